"""Leadership on PostgreSQL: one replica leads; one that stops gives it up for good."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from armada_server.scheduling.leader import Leadership
from armada_server.storage.database import make_engine

pytestmark = pytest.mark.postgres


@pytest.fixture
def engines(postgres_server) -> Iterator[tuple[Engine, Engine]]:  # type: ignore[no-untyped-def]
    url = postgres_server.new_database()
    a, b = make_engine(url), make_engine(url)
    yield a, b
    a.dispose()
    b.dispose()


def test_one_replica_leads_and_a_closed_one_never_again(engines: tuple[Engine, Engine]) -> None:
    a, b = Leadership(engines[0]), Leadership(engines[1])
    assert a.is_leader() and not b.is_leader()
    a.release()  # given up for now: either may take it next
    assert b.is_leader() and not a.is_leader()
    b.close()
    assert a.is_leader()
    a.release()
    assert not b.is_leader()  # free, but B has stopped
    assert a.is_leader()


def test_closing_while_cycles_ask_leaves_the_lock_free(engines: tuple[Engine, Engine]) -> None:
    """Threads ask as cycles do while the replica closes: none takes the lock back after
    it is given up, so the other replica leads at once."""
    a, b = Leadership(engines[0]), Leadership(engines[1])
    assert a.is_leader()
    go = threading.Event()

    def ask() -> None:
        go.wait()
        for _ in range(200):
            a.is_leader()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    go.set()
    a.close()
    for thread in threads:
        thread.join()
    assert not a.is_leader()
    assert b.is_leader()
