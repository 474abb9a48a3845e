"""Cross-replica wake-ups on PostgreSQL (storage/notify.py): every job set a transaction
appended to is heard by the other replicas' listeners once it commits, and none of a
transaction that rolled back."""

from __future__ import annotations

import threading

from armada_server.storage.database import open_database
from armada_server.storage.notify import Listener, notify


def test_every_job_set_of_a_transaction_is_heard_at_its_commit(
    postgres_server,  # type: ignore[no-untyped-def]
) -> None:
    engine = open_database(postgres_server.new_database())
    heard: list[tuple[str, str]] = []
    changed = threading.Condition()

    def wake(keys: set[tuple[str, str]] | None) -> None:
        with changed:
            heard.extend(sorted(keys or ()))
            changed.notify_all()

    listener = Listener(engine, wake)
    listener.start()
    try:
        sets = [("q", f"set-{n}") for n in range(300)] + [("other queue", "set-0")]
        with engine.connect() as conn, conn.begin() as transaction:
            notify(conn, [("q", "rolled back")])
            transaction.rollback()
        with engine.begin() as conn:
            notify(conn, sets)
            with changed:
                assert not changed.wait_for(lambda: heard, timeout=0.5)  # not before commit
        with changed:
            assert changed.wait_for(lambda: len(heard) >= len(sets), timeout=30)
        assert sorted(heard) == sorted(sets)
    finally:
        listener.stop()
        engine.dispose()
