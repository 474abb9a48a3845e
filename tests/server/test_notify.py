"""Cross-replica wake-ups on PostgreSQL (storage/notify.py): every job set a transaction
appended events to is heard by the other replicas' listeners once it commits, and none of a
transaction that rolled back. The notifications go in the statement that numbers the events
(for a few events, the one that also writes them), so these append events as every writer
does."""

from __future__ import annotations

import threading

from armada_core.api import submit_pb2
from armada_server.storage import base, open_storage
from armada_server.storage.notify import Listener

from .test_event_numbering import queued


def test_every_job_set_of_a_transaction_is_heard_at_its_commit(
    postgres_server,  # type: ignore[no-untyped-def]
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(base, "NUMBERED_AT_ONCE", 100)  # sets numbered in three statements
    storage = open_storage(postgres_server.new_database())
    tx = storage.transactions
    heard: list[tuple[str, str]] = []
    changed = threading.Condition()

    def wake(keys: set[tuple[str, str]] | None) -> None:
        with changed:
            heard.extend(sorted(keys or ()))
            changed.notify_all()

    listener = Listener(storage.engine, wake)
    listener.start()
    try:
        for name in ("q", "other queue"):
            storage.queues.create_queue(submit_pb2.Queue(name=name, priority_factor=1))
        sets = [("q", f"set-{n}") for n in range(250)] + [("other queue", "set-0")]

        class RolledBack(Exception):
            pass

        try:
            with tx.write() as (conn, touched):
                tx.append(conn, touched, [queued("gone", "rolled back")])
                raise RolledBack
        except RolledBack:
            pass
        events = [queued(f"job-{n}", job_set) for n, (_, job_set) in enumerate(sets[:-1])]
        other = queued("other", "set-0")
        other.queued.queue = "other queue"
        with tx.write() as (conn, touched):
            tx.append(conn, touched, [*events, events[0], other])  # set-0 twice: heard once
            with changed:
                assert not changed.wait_for(lambda: heard, timeout=0.5)  # not before commit
        with changed:
            assert changed.wait_for(lambda: len(heard) >= len(sets), timeout=30)
            assert not changed.wait_for(lambda: len(heard) > len(sets), timeout=0.5)
        assert sorted(heard) == sorted(sets)
        # A few events are numbered and written by one statement, which notifies too.
        heard.clear()
        with tx.write() as (conn, touched):
            tx.append(conn, touched, [queued("a", "set-1"), queued("b", "new"), queued("c", "new")])
        with changed:
            assert changed.wait_for(lambda: len(heard) >= 2, timeout=30)
            assert not changed.wait_for(lambda: len(heard) > 2, timeout=0.5)
        assert sorted(heard) == [("q", "new"), ("q", "set-1")]
    finally:
        listener.stop()
        storage.engine.dispose()
