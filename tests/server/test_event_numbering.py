"""Each job set's events are numbered 1, 2, 3, ... in the order they were appended, however
many sets one transaction appends to (their numbers are taken in a statement per
NUMBERED_AT_ONCE sets, their rows written in one)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from armada_core.api import event_pb2, submit_pb2
from armada_core.jobs.lifecycle import EventMessage, timestamp
from armada_server.storage import base, open_storage

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def queued(job_id: str, job_set: str) -> EventMessage:
    body = event_pb2.JobQueuedEvent(job_id=job_id, job_set_id=job_set, queue="q")
    body.created.CopyFrom(timestamp(NOW))
    return EventMessage(queued=body)


@pytest.mark.parametrize("at_once", [500, 3], ids=["one-statement", "in-chunks"])
def test_a_transaction_numbers_each_of_many_sets_from_its_last(
    database_url: str, monkeypatch: pytest.MonkeyPatch, at_once: int
) -> None:
    monkeypatch.setattr(base, "NUMBERED_AT_ONCE", at_once)
    storage = open_storage(database_url)
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        tx = storage.transactions
        sets = [f"set-{n}" for n in range(10)]
        appended: dict[str, list[str]] = {s: [] for s in sets}

        def append(events: list[EventMessage]) -> None:
            with tx.write() as (conn, touched):
                tx.append(conn, touched, events)
            assert touched == {("q", e.queued.job_set_id) for e in events}
            for e in events:
                appended[e.queued.job_set_id].append(e.queued.job_id)

        append([queued("first", "set-3")])  # one set: numbered on its own
        # Sets of the transaction interleaved and out of order, some new, some not.
        append([queued(f"a{n}-{s}", s) for n in range(3) for s in reversed(sets)])
        append([queued(f"b{n}-{s}", s) for s in sets[::2] for n in range(2)])
        for job_set in sets:
            stored = storage.events.events_after("q", job_set, 0)
            ids = [EventMessage.FromString(e.payload).queued.job_id for e in stored]
            assert [e.seq for e in stored] == list(range(1, len(appended[job_set]) + 1))
            assert ids == appended[job_set], job_set
            assert storage.events.last_seq("q", job_set) == len(appended[job_set])
    finally:
        storage.engine.dispose()
