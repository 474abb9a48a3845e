"""Each job set's events are numbered 1, 2, 3, ... in the order they were appended, however
many sets one transaction appends to (their numbers are taken in a statement per
NUMBERED_AT_ONCE sets, their rows written in one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select

from armada_core.api import event_pb2, submit_pb2
from armada_core.jobs.lifecycle import EventMessage, timestamp
from armada_server.storage import base, open_storage
from armada_server.storage import schema as t
from armada_server.storage.bulk import NewRows

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


def test_appended_events_are_stored_as_sqlalchemy_stores_them(database_url: str) -> None:
    """The rows `append` makes (one pass, as the driver takes them) equal SQLAlchemy's own
    INSERT of each event's job set, number, job, time and bytes; events of one time and of
    many, in sets of one event and of many."""
    storage = open_storage(database_url)
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        tx = storage.transactions
        events = [queued(f"j{n}", f"set-{n % 3}") for n in range(7)]
        for n, event in enumerate(events[4:]):  # times of their own, to the microsecond
            event.queued.created.CopyFrom(timestamp(NOW + timedelta(seconds=n, microseconds=7)))
        events.append(queued("alone", "set-alone"))
        with tx.write() as (conn, touched):
            tx.append(conn, touched, events)
        numbers: dict[str, int] = {}
        expected = []
        for e in events:
            body = e.queued
            numbers[body.job_set_id] = numbers.get(body.job_set_id, 0) + 1
            expected.append(
                {
                    "queue": "mirror",
                    "job_set": body.job_set_id,
                    "seq": numbers[body.job_set_id],
                    "job_id": body.job_id,
                    "created_at": body.created.ToDatetime(tzinfo=UTC),
                    "payload": e.SerializeToString(),
                }
            )
        with storage.engine.begin() as conn:
            conn.execute(insert(t.events), expected)
            rows = {}
            for r in conn.execute(select(t.events).order_by(t.events.c.job_set, t.events.c.seq)):
                row = r._asdict()
                rows.setdefault(row.pop("queue"), []).append(row)
        assert rows["q"] == rows["mirror"]
        assert len(rows["q"]) == len(events)
    finally:
        storage.engine.dispose()


def test_an_event_without_a_body_is_refused_before_anything_is_written(
    database_url: str,
) -> None:
    storage = open_storage(database_url)
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        tx = storage.transactions
        with pytest.raises(ValueError, match="without a body"), tx.write() as (conn, touched):
            tx.append(conn, touched, [queued("a", "s"), EventMessage()])
        assert storage.events.last_seq("q", "s") is None
    finally:
        storage.engine.dispose()


def test_rows_made_for_other_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="events: rows of"):
        NewRows.of_values(t.events, ("queue", "job_set", "created_at", "job_id", "payload"), [])
