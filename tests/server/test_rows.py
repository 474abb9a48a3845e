"""A new job's row is written from its spec, without the Job its events make: it must hold
what that Job says."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy

from armada_core.api import submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.jobs import job_from_item, lifecycle
from armada_server.storage.rows import job_row, mutable_job_row, spec_key

from ..jobs.factories import T0, container, item

GANG = {ann.GANG_ID: "g1", ann.GANG_CARDINALITY: "2"}
TASK = {ann.TASK: "dag/run/task/-1", ann.TASK_ATTEMPT: "1", ann.TASK_GENERATION: "0"}


def _spec(**fields: object) -> submit_pb2.Job:
    pod = {"containers": [container()], "priorityClassName": "armada-preemptible"}
    return job_from_item(
        item(pod, **fields),
        job_id="01jobid",
        queue="q",
        job_set_id="s",
        owner="alice",
        now=T0,
    )


def _bare() -> submit_pb2.Job:
    """A spec as an older path stored it: one `pod_spec`, no creation time."""
    spec = submit_pb2.Job(id="01bare", queue="q", job_set_id="s", priority=3)
    spec.pod_spec.priorityClassName = "armada-default"
    return spec


@pytest.mark.parametrize(
    "spec",
    [
        _spec(),
        _spec(priority=7.5, client_id="c-1"),
        _spec(annotations=GANG),
        _spec(annotations=TASK),
        _spec(external_job_uri="https://ci.example/run/1", labels={"team": "a"}),
        _bare(),
    ],
    ids=["plain", "priority and client id", "gang", "task", "external uri", "bare"],
)
def test_a_new_jobs_row_holds_what_its_submitted_job_says(spec: submit_pb2.Job) -> None:
    now = T0 + timedelta(seconds=5)
    events = lifecycle.submitted(spec, now)
    job = lifecycle.rebuild(events)
    assert job is not None
    row = job_row(events[0].submitted.job, now)
    changeable = {k: v for k, v in mutable_job_row(job).items() if not k.startswith("_")}
    del changeable["version"]  # a new row takes the column's default
    assert {k: row[k] for k in changeable} == changeable
    assert submit_pb2.Job.FromString(row["spec"]) == job.spec
    gang = job.gang
    assert (row["id"], row["queue"], row["job_set"]) == (job.id, job.queue, job.job_set)
    assert row["priority_class"] == job.priority_class
    assert row["gang_id"] == (gang.id if gang else None)
    assert row["client_id"] == (job.spec.client_id or None)
    assert row["task"] == (job.spec.annotations.get(ann.TASK) or None)
    assert row["external_job_uri"] == (job.annotations.get(ann.EXTERNAL_JOB_URI) or None)
    assert row["submitted_at"] == job.submitted_at


def test_a_requests_jobs_are_stored_as_each_would_be_alone(database_url: str) -> None:
    """Items alike share what they make (`AlikeJobs`): every stored row and event must still
    be what that job alone makes, through the path that stores everything a request built and
    the one that stores only the items whose client ids are new."""
    from armada_core.jobs.lifecycle import EventMessage
    from armada_core.jobs.submission import without_client_id
    from armada_server.storage import open_storage
    from armada_server.storage import schema as t

    storage = open_storage(database_url, clock=lambda: T0)
    storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    pod = {"containers": [container()]}
    first = [
        item(pod, client_id="a"),
        item(pod, client_id="b"),
        item(pod),
        item(pod),
        item(pod, client_id="a"),  # the first item's job
        item({"containers": [container(cpu="2")]}, client_id="c", annotations=GANG),
        item(pod, client_id="d", labels={"team": "x"}),
    ]
    second = [item(pod, client_id="b"), item(pod, client_id="e"), item(pod)]  # b is known
    requests = [first, second]
    ids = [storage.submissions.submit("q", "s", r, owner="alice", groups=("g",)) for r in requests]
    assert ids[0][0] == ids[0][4] and ids[1][0] == ids[0][1]
    made = {
        job_id: source
        for request, its_ids in zip(requests, ids, strict=True)
        for job_id, source in zip(its_ids, request, strict=True)
    }
    with storage.engine.connect() as conn:
        rows = {r.id: r._asdict() for r in conn.execute(sqlalchemy.select(t.jobs))}
    assert sorted(rows) == sorted(made)
    events = [EventMessage.FromString(e.payload) for e in storage.events.events_after("q", "s", 0)]
    expected_events = []
    keys: dict[bytes, set[bytes | None]] = {}
    for job_id in ids[0][:4] + ids[0][5:] + ids[1][1:]:  # in order of submission
        spec = job_from_item(
            made[job_id],
            job_id=job_id,
            queue="q",
            job_set_id="s",
            owner="alice",
            now=T0,
            groups=("g",),
        )
        expected_events += lifecycle.submitted(spec, T0)
        stored = rows[job_id]
        # Written id first, as the serialiser does, then the client id: a cycle keys what a
        # spec decides on the rest, the same for the jobs of items alike.
        assert spec_key(job_id, stored["spec"]) is not None
        keys.setdefault(without_client_id(made[job_id]), set()).add(
            spec_key(job_id, stored["spec"], stored["client_id"])
        )
        assert submit_pb2.Job.FromString(stored.pop("spec")) == spec
        expected = job_row(spec, T0)
        del expected["spec"]
        assert {k: stored[k] for k in expected} == expected | {
            "submitted_at": stored["submitted_at"],
            "last_transition_at": stored["last_transition_at"],
        }
        assert stored["submitted_at"].replace(tzinfo=None) == T0.replace(tzinfo=None)
    assert events == expected_events
    # Items alike (with client ids or without) share one key; items not alike do not.
    assert len(keys) == 3
    assert all(len(k) == 1 and None not in k for k in keys.values())
    assert len(set().union(*keys.values())) == 3


@pytest.mark.parametrize("client_id", ["c-1", "ü" * 1024])
def test_a_specs_key_leaves_out_its_id_and_a_client_id_written_after_it(client_id: str) -> None:
    spec = _spec(client_id=client_id)
    spec.ClearField("created")
    canonical = spec.SerializeToString()  # the client id amid the other fields
    without = submit_pb2.Job()
    without.CopyFrom(spec)
    without.client_id = ""
    # Deterministic: maps (resources) are written in an order of their own otherwise, which
    # differed between the copies.
    after_id = submit_pb2.Job(id=spec.id, client_id=client_id).SerializeToString() + submit_pb2.Job(
        **{**_fields(without), "id": ""}
    ).SerializeToString(deterministic=True)
    assert submit_pb2.Job.FromString(after_id) == spec
    rest = without.SerializeToString(deterministic=True)[len(b"\n\x07" + spec.id.encode()) :]
    assert spec_key(spec.id, after_id, client_id) == rest
    assert spec_key(spec.id, after_id) != rest  # without its client id, the key keeps it
    assert spec_key(spec.id, canonical, client_id) == canonical[len(b"\n\x07" + spec.id.encode()) :]
    assert spec_key("01other", after_id, client_id) is None


def _fields(message: submit_pb2.Job) -> dict[str, object]:
    copy = submit_pb2.Job()
    copy.CopyFrom(message)
    return {f.name: v for f, v in copy.ListFields()}
