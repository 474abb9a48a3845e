"""Pooled PostgreSQL connections (storage/database.py): one the server has closed is never
handed out, and one that is open is handed out without a round trip to ask."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import Engine, text

from armada_core.api import submit_pb2
from armada_server.storage import open_storage

pytestmark = pytest.mark.postgres


def backend_pids(engine: Engine, count: int) -> set[int]:
    """Check out `count` connections at once (so the pool keeps that many) and say whose."""
    held = [engine.connect() for _ in range(count)]
    try:
        return {conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() for conn in held}
    finally:
        for conn in held:
            conn.close()


def terminate(admin: Engine, pids: set[int]) -> None:
    with admin.connect() as conn:
        for pid in pids:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        conn.commit()
        deadline = time.monotonic() + 30
        while conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)"),
            {"pids": list(pids)},
        ).scalar_one():
            assert time.monotonic() < deadline, "terminated backends did not exit"
            time.sleep(0.05)
            conn.commit()


def test_connections_the_server_closed_are_replaced_unseen(
    postgres_server,  # type: ignore[no-untyped-def]
) -> None:
    storage = open_storage(postgres_server.new_database())
    admin = open_storage(postgres_server.new_database()).engine
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        before = backend_pids(storage.engine, 3)
        terminate(admin, before)  # as a restart would: every pooled connection closed
        for _ in range(3):  # each transaction finds a closed one first: none fails
            assert storage.queues.get_queue("q").name == "q"
        storage.queues.set_cordoned("q", True)
        assert storage.queues.get_queue("q").cordoned
        assert not backend_pids(storage.engine, 3) & before
    finally:
        storage.engine.dispose()
        admin.dispose()


def test_an_open_connection_is_handed_out_without_a_ping(
    postgres_server,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = open_storage(postgres_server.new_database())
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        [pid] = backend_pids(storage.engine, 1)

        def no_ping(_: object) -> bool:
            raise AssertionError("a pooled connection was pinged")

        monkeypatch.setattr(storage.engine.dialect, "do_ping", no_ping)
        for _ in range(5):
            storage.queues.get_queue("q")
        assert backend_pids(storage.engine, 1) == {pid}  # the same connection throughout
    finally:
        storage.engine.dispose()
