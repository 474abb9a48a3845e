"""The task lifecycle every integration uses: submit-or-reattach against a real server, the
plan it follows, waiting reasons and the result payload."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from armada_core.api import job_pb2
from armada_core.api import submit_pb2 as pb
from armada_core.client import ArmadaClient, AsyncArmadaClient, gang_items, job_item
from armada_core.client.lifecycle import (
    ATTEMPT_ANNOTATION,
    GENERATION_ANNOTATION,
    TASK_ANNOTATION,
    FoundJob,
    LifecycleError,
    Plan,
    TaskIdentity,
    WaitingReasons,
    asubmit_or_reattach,
    plan,
    submit_or_reattach,
)

from .conftest import pod

TASK = TaskIdentity("airflow", "dag/run-1/task/-1", "1", name="task")
RETRY = TaskIdentity("airflow", "dag/run-1/task/-1", "2", name="task")


def one(client_id: str) -> list[pb.JobSubmitRequestItem]:
    return [job_item(pod(), client_id=client_id)]


def gang(client_id: str) -> list[pb.JobSubmitRequestItem]:
    return gang_items(pod(), replicas=3, client_id=client_id)


def found(
    job_id: str, state: int, attempt: str = "1", generation: int = 0, job_set: str = "js"
) -> FoundJob:
    return FoundJob(job_id, job_set, state, attempt, generation)


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        ([], Plan()),
        # the same attempt: reattach while the jobs can succeed or did
        ([found("a", pb.RUNNING)], Plan(reattach=("a",))),
        ([found("a", pb.SUCCEEDED)], Plan(reattach=("a",))),
        # ... else a new generation
        ([found("a", pb.CANCELLED)], Plan(generation=1)),
        ([found("a", pb.PREEMPTED), found("b", pb.FAILED, generation=1)], Plan(generation=2)),
        (
            [found("a", pb.CANCELLED), found("b", pb.QUEUED, generation=1)],
            Plan(reattach=("b",), generation=1),
        ),
        # a gang member ended otherwise: its live siblings are cancelled first
        (
            [found("a", pb.RUNNING), found("b", pb.PREEMPTED), found("c", pb.SUCCEEDED)],
            Plan(cancel=(found("a", pb.RUNNING),), generation=1),
        ),
        # another attempt's live jobs are cancelled; its ended ones are left alone
        ([found("a", pb.RUNNING, attempt="0")], Plan(cancel=(found("a", pb.RUNNING, "0"),))),
        ([found("a", pb.SUCCEEDED, attempt="0"), found("b", pb.FAILED, attempt="0")], Plan()),
        (
            [found("a", pb.QUEUED, attempt="0"), found("b", pb.RUNNING)],
            Plan(reattach=("b",), cancel=(found("a", pb.QUEUED, "0"),)),
        ),
        # an older generation of this attempt still live (a crash between cancel and submit)
        (
            [found("a", pb.RUNNING), found("b", pb.QUEUED, generation=1)],
            Plan(reattach=("b",), cancel=(found("a", pb.RUNNING),), generation=1),
        ),
    ],
)
def test_plan(jobs: list[FoundJob], expected: Plan) -> None:
    decided = plan(TASK, jobs)
    assert (decided.reattach, decided.cancel, decided.generation) == (
        expected.reattach,
        expected.cancel,
        expected.generation,
    )


def test_identity_is_deterministic_and_bounded() -> None:
    assert TASK.client_id() == TaskIdentity(*TASK.__dict__.values()).client_id()
    assert TASK.client_id() != RETRY.client_id() != TASK.client_id(1)
    assert TASK.client_id(1).startswith("airflow-task.1-")
    long = TaskIdentity("dagster", "x" * 5000, "y" * 5000, name="n/with spaces" * 10)
    assert len(long.external_job_uri) < 200 and len(long.client_id()) < 100
    assert long.annotations()[TASK_ANNOTATION] != long.annotations()[ATTEMPT_ANNOTATION]


def states(client: ArmadaClient, job_ids: list[str]) -> list[str]:
    found_states = client.get_job_status(job_ids)
    return [pb.JobState.Name(found_states[j]) for j in job_ids]


def test_submit_then_reattach_then_replace(client: ArmadaClient, q: str) -> None:
    lines: list[str] = []
    first = submit_or_reattach(client, q, "js", TASK, one, log=lines.append)
    assert not first.reattached and first.generation == 0
    details = client.get_job_details(first.job_ids, expand_job_spec=True)[first.job_ids[0]]
    assert details.job_spec.annotations[ATTEMPT_ANNOTATION] == "1"
    assert details.job_spec.annotations[GENERATION_ANNOTATION] == "0"
    assert client.get_job_status_by_external_uri(q, "js", TASK.external_job_uri) == {
        first.job_ids[0]: pb.QUEUED
    }

    # The same attempt again (a crashed submitter): the same job.
    again = submit_or_reattach(client, q, "js", TASK, one, log=lines.append)
    assert again.reattached and again.job_ids == first.job_ids

    # Its job cancelled by someone: the same attempt submits a new generation.
    client.cancel_jobs(q, "js", first.job_ids)
    second = submit_or_reattach(client, q, "js", TASK, one, log=lines.append)
    assert not second.reattached and second.generation == 1
    assert second.job_ids != first.job_ids and second.client_id == TASK.client_id(1)

    # A new attempt: the live job of the earlier one is cancelled before it submits.
    third = submit_or_reattach(client, q, "js", RETRY, one, log=lines.append)
    assert states(client, second.job_ids) == ["CANCELLED"]
    assert states(client, third.job_ids) == ["QUEUED"]
    cancelled = client.get_job_details(second.job_ids)[second.job_ids[0]]
    assert cancelled.cancel_reason == "replaced by attempt 2 of task"
    assert any("Cancelling Armada job" in line for line in lines)


def test_earlier_attempts_in_other_job_sets_are_found(client: ArmadaClient, q: str) -> None:
    """A Dagster re-execution: the parent run's job set is in the lineage."""
    parent = TaskIdentity("dagster", "root/step", "run-1", name="step")
    old = submit_or_reattach(client, q, "run-1", parent, gang)
    child = TaskIdentity("dagster", "root/step", "run-2", name="step", job_sets=("run-1",))
    new = submit_or_reattach(client, q, "run-2", child, gang)
    assert states(client, old.job_ids) == ["CANCELLED"] * 3
    assert states(client, new.job_ids) == ["QUEUED"] * 3
    # A third run of the lineage reattaches to nothing of run-1 (ended) and cancels run-2's.
    grandchild = TaskIdentity(
        "dagster", "root/step", "run-3", name="step", job_sets=("run-1", "run-2")
    )
    newest = submit_or_reattach(client, q, "run-3", grandchild, gang)
    assert states(client, new.job_ids) == ["CANCELLED"] * 3
    assert newest.generation == 0 and len(set(newest.job_ids)) == 3


def test_gang_with_a_member_gone_is_replaced_whole(client: ArmadaClient, q: str) -> None:
    first = submit_or_reattach(client, q, "js", TASK, gang)
    client.cancel_jobs(q, "js", first.job_ids[:1])
    second = submit_or_reattach(client, q, "js", TASK, gang)
    # (the server fails the waiting members of a gang cut below its size itself)
    assert set(states(client, first.job_ids)) <= {"CANCELLED", "FAILED"}
    assert second.generation == 1 and states(client, second.job_ids) == ["QUEUED"] * 3
    gang_ids = {
        client.get_job_details([j], expand_job_spec=True)[j].job_spec.annotations[
            "armadaproject.io/gangId"
        ]
        for j in second.job_ids
    }
    assert gang_ids == {TASK.client_id(1)}


async def test_the_asyncio_driver_decides_the_same(
    aclient: AsyncArmadaClient, client: ArmadaClient, q: str
) -> None:
    first = await asubmit_or_reattach(aclient, q, "js", TASK, one)
    again = await asubmit_or_reattach(aclient, q, "js", TASK, one)
    assert again.reattached and again.job_ids == first.job_ids
    replaced = await asubmit_or_reattach(aclient, q, "js", RETRY, one)
    assert states(client, first.job_ids) == ["CANCELLED"]
    assert states(client, replaced.job_ids) == ["QUEUED"]


def test_a_refused_submission_reattaches_to_the_live_generation(
    client: ArmadaClient, q: str
) -> None:
    """Two attempts that both found nothing live: the server keeps the first one's jobs and
    refuses the second, which reattaches to them (here the first is in a job set outside the
    second's lineage, so the second's own look finds nothing, as in a race)."""
    first = submit_or_reattach(client, q, "a", TASK, gang)
    lines: list[str] = []
    second = submit_or_reattach(client, q, "b", RETRY, gang, log=lines.append)
    assert second.reattached and sorted(second.job_ids) == sorted(first.job_ids)
    assert second.job_set_id == "a"
    assert states(client, first.job_ids) == ["QUEUED"] * 3
    assert any("reattaching to Armada job(s)" in line for line in lines), lines


async def test_the_asyncio_driver_reattaches_when_refused(
    aclient: AsyncArmadaClient, client: ArmadaClient, q: str
) -> None:
    first = await asubmit_or_reattach(aclient, q, "a", TASK, one)
    second = await asubmit_or_reattach(aclient, q, "b", RETRY, one)
    assert second.reattached and second.job_ids == first.job_ids
    assert second.job_set_id == "a"
    # once the live job ended, the other attempt submits its own
    client.cancel_jobs(q, "a", first.job_ids)
    third = await asubmit_or_reattach(aclient, q, "b", RETRY, one)
    assert not third.reattached and states(client, third.job_ids) == ["QUEUED"]


def test_an_earlier_attempt_that_will_not_end_blocks_the_new_one(
    client: ArmadaClient, q: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the cancellation cannot be confirmed, nothing is submitted beside the old job."""
    submit_or_reattach(client, q, "js", TASK, one)
    real_run = client._run

    def cancel_ignored(call):  # type: ignore[no-untyped-def]
        if call.method == "CancelJobs":
            return []
        return real_run(call)

    monkeypatch.setattr(client, "_run", cancel_ignored)
    with pytest.raises(LifecycleError, match="did not end within 0 s"):
        submit_or_reattach(client, q, "js", RETRY, one, cancel_wait=0)
    assert len(client.get_job_status_by_external_uri(q, "js", TASK.external_job_uri)) == 1


def _details(state: int, reason: str, since: float) -> job_pb2.JobDetails:
    ts = Timestamp()
    ts.FromNanoseconds(int(since * 1e9))
    return job_pb2.JobDetails(state=state, scheduling_reason=reason, last_transition_ts=ts)


def test_waiting_reasons_on_change_and_every_interval() -> None:
    reasons = WaitingReasons({"a": "job a", "b": "job b"}, interval=60)
    waiting = {
        "a": _details(pb.QUEUED, "insufficient free resources", 1000.0),
        "b": _details(pb.RUNNING, "", 1000.0),
    }
    assert reasons.lines(waiting, 1010.0) == [
        "Armada job a QUEUED 10s: insufficient free resources"
    ]
    assert reasons.lines(waiting, 1030.0) == []  # unchanged, within the interval
    assert reasons.lines(waiting, 1200.0) == ["Armada job a QUEUED 3m: insufficient free resources"]
    waiting["a"] = _details(pb.QUEUED, "queue is cordoned", 1000.0)
    assert reasons.lines(waiting, 1201.0) == ["Armada job a QUEUED 3m: queue is cordoned"]
    waiting["a"] = _details(pb.RUNNING, "", 1202.0)
    assert reasons.lines(waiting, 1203.0) == []


def test_reattaching_in_a_lineage_job_set_waits_there(client: ArmadaClient, q: str) -> None:
    first = submit_or_reattach(client, q, "old", TASK, one)
    moved = TaskIdentity(TASK.orchestrator, TASK.task, TASK.attempt, TASK.name, job_sets=("old",))
    again = submit_or_reattach(client, q, "new", moved, one)
    assert again.reattached and again.job_ids == first.job_ids
    assert again.job_set_id == "old"


def test_the_queue_share_moving_is_not_a_change_of_reason() -> None:
    reasons = WaitingReasons({"a": "job a"}, interval=60)
    why = "0 of 2 matching nodes have 4 cpu free"
    assert (
        len(
            reasons.lines(
                {"a": _details(pb.QUEUED, f"{why}; queue q at 1.0x its fair share", 1000.0)}, 1001.0
            )
        )
        == 1
    )
    assert (
        reasons.lines(
            {"a": _details(pb.QUEUED, f"{why}; queue q at 1.3x its fair share", 1000.0)}, 1002.0
        )
        == []
    )
