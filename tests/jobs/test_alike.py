"""Jobs made from items alike are encoded from what they share: each must parse to exactly
the spec and events that building it alone gives."""

from __future__ import annotations

import pytest

from armada_core.api import submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.jobs import job_from_item, lifecycle
from armada_core.jobs.alike import AlikeJobs
from armada_core.jobs.lifecycle import EventMessage

from .factories import T0, container, item

ITEMS = {
    "plain": item(),
    "client id": item(client_id="c-1"),
    "non-ascii client id": item(client_id="ünïcode-" + "x" * 300),
    "gang": item(annotations={ann.GANG_ID: "g1", ann.GANG_CARDINALITY: "2"}),
    "task": item(annotations={ann.TASK: "dag/run/task/-1", ann.TASK_ATTEMPT: "1"}),
    "large": item({"containers": [container(args=["x" * 70_000])]}, client_id="c-3"),
    "everything": item(
        {"containers": [container(cpu="2")], "priorityClassName": "armada-preemptible"},
        priority=7.5,
        client_id="c-2",
        external_job_uri="https://ci.example/run/1",
        labels={"team": "a"},
        annotations={"note": "n"},
        scheduler="other",
    ),
}


@pytest.mark.parametrize("source", list(ITEMS.values()), ids=list(ITEMS))
@pytest.mark.parametrize("groups", [(), ("g1", "g2")])
def test_a_job_made_alike_is_the_job_made_alone(
    source: submit_pb2.JobSubmitRequestItem, groups: tuple[str, ...]
) -> None:
    where = {"queue": "q", "job_set_id": "s", "owner": "alice", "now": T0, "groups": groups}
    alike = AlikeJobs(source, **where)  # type: ignore[arg-type]
    for number, client_id in enumerate([source.client_id, "other", ""]):
        job_id = f"01job{number}"
        own = submit_pb2.JobSubmitRequestItem()
        own.CopyFrom(source)
        own.client_id = client_id
        alone = job_from_item(own, job_id=job_id, **where)  # type: ignore[arg-type]
        submitted, queued = lifecycle.submitted(alone, T0)

        spec, submitted_bytes, queued_bytes = alike.encoded(job_id, client_id)

        assert submit_pb2.Job.FromString(spec) == alone
        assert EventMessage.FromString(submitted_bytes) == submitted
        assert EventMessage.FromString(queued_bytes) == queued
    shared = submit_pb2.Job()
    shared.CopyFrom(alone)
    shared.id = shared.client_id = ""
    assert alike.spec == shared


def test_the_source_item_is_left_as_it_was() -> None:
    source = item(client_id="mine")
    before = source.SerializeToString()
    AlikeJobs(source, queue="q", job_set_id="s", owner="alice", now=T0).encoded("01a", "x")
    assert source.SerializeToString() == before


def test_a_job_needs_an_id() -> None:
    alike = AlikeJobs(item(), queue="q", job_set_id="s", owner="alice", now=T0)
    with pytest.raises(ValueError, match="needs an id"):
        alike.encoded("", "c")
