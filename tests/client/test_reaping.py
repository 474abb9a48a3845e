"""The reconciler of ended tasks: its decision table, and rounds against a real server with
orchestrator answers given by the test (the orchestrators' own adapters are tested in their
deployments: tests/airflow, tests/dagster, tests/prefect)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, AsyncArmadaClient
from armada_core.client.lifecycle import TaskIdentity
from armada_core.client.lifecycle.airflow_states import AirflowTaskStates, split_task
from armada_core.client.lifecycle.reaping import (
    REAP_ANNOTATION,
    AsyncReaper,
    OrchestratorUnreachable,
    Reaper,
    TaskJob,
    TaskState,
    decide,
    ended,
    running,
    unknown,
)

from ..jobs.factories import item


def job(task: str = "t", attempt: str = "1", job_id: str = "j", **annotations: str) -> TaskJob:
    return TaskJob(job_id, "q", "s", submit_pb2.RUNNING, "airflow", task, attempt, 0, annotations)


SUBJECT = "airflow task t"


@pytest.mark.parametrize(
    ("the_job", "state", "reason"),
    [
        # the orchestrator says the task ended: its jobs go, the reason names its state
        (job(), ended(SUBJECT, "failed"), "airflow task t is failed"),
        (job(), ended(SUBJECT, "success"), "airflow task t is success"),
        # a running task keeps its jobs, with or without an attempt to compare
        (job(), running(SUBJECT, "deferred"), None),
        (job(), running(SUBJECT, "running", attempt="1"), None),
        # a later attempt runs: the earlier attempt's job is over
        (
            job(attempt="0"),
            running(SUBJECT, "running", attempt="1"),
            "airflow task t: attempt 0 is over, attempt 1 is running",
        ),
        # what the orchestrator cannot say about is left alone
        (job(), unknown(SUBJECT, "not found"), None),
        (job(), None, None),
        # a task that asked its jobs to outlive a kill keeps them
        (job(**{REAP_ANNOTATION: "false"}), ended(SUBJECT, "failed"), None),
    ],
)
def test_decide(the_job: TaskJob, state: TaskState | None, reason: str | None) -> None:
    states = {} if state is None else {the_job.key: state}
    expected = [] if reason is None else [(the_job, reason)]
    assert decide([the_job], states) == expected


def test_decide_keeps_tasks_apart_and_gangs_together() -> None:
    gang = [job("a", "1", "g1"), job("a", "1", "g2")]
    other = job("b", "1", "o")
    states = {("a", "1"): ended("task a", "failed"), ("b", "1"): running("task b")}
    assert decide([*gang, other], states) == [(g, "task a is failed") for g in gang]


class Given:
    """Orchestrator answers set by the test, or an orchestrator that cannot be reached."""

    orchestrator = "airflow"

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], TaskState] = {}
        self.down = False
        self.asked: list[list[str]] = []

    def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:
        self.asked.append([j.job_id for j in jobs])
        if self.down:
            raise OrchestratorUnreachable("connection refused")
        return self.answers


class AsyncGiven(Given):
    async def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:  # type: ignore[override]
        return Given.states(self, jobs)


def submit(client: ArmadaClient, task: str, attempt: str, orchestrator: str = "airflow") -> str:
    identity = TaskIdentity(orchestrator, task, attempt)
    [answer] = client.submit_jobs("q", "s", identity.stamp([item()], 0))
    return answer


def states(client: ArmadaClient, *ids: str) -> list[int]:
    found = client.get_job_status(list(ids))
    return [found[i] for i in ids]


def test_a_round_cancels_ended_tasks_jobs_only_and_is_idempotent(
    client: ArmadaClient, q: str
) -> None:
    failed = submit(client, "d/r/failed/-1", "0")
    # (the server refuses a second live generation of a task: attempt 1 has not submitted)
    earlier = submit(client, "d/r/retried/-1", "0")
    runs = submit(client, "d/r/runs/-1", "0")
    unheard = submit(client, "d/r/unknown/-1", "0")
    prefect = submit(client, "d/r/failed/-1", "0", orchestrator="prefect")
    given = Given()
    given.answers = {
        ("d/r/failed/-1", "0"): ended("airflow task d/r/failed/-1", "failed"),
        ("d/r/retried/-1", "0"): running("airflow task d/r/retried/-1", attempt="1"),
        ("d/r/runs/-1", "0"): running("airflow task d/r/runs/-1", "deferred", attempt="0"),
    }
    reaper = Reaper(client, given)

    first = reaper.reap_once()  # seen over once: not yet cancelled
    assert (first.listed, first.cancelled, first.pending) == (4, (), 2)
    assert states(client, failed, earlier) == [submit_pb2.QUEUED] * 2
    done = reaper.reap_once()

    assert done.listed == 4  # the Prefect job is another orchestrator's
    assert dict(done.cancelled) == {
        failed: "airflow task d/r/failed/-1 is failed",
        earlier: "airflow task d/r/retried/-1: attempt 0 is over, attempt 1 is running",
    }
    assert states(client, failed, earlier) == [submit_pb2.CANCELLED] * 2
    assert states(client, runs, unheard, prefect) == [submit_pb2.QUEUED] * 3
    details = client.get_job_details([failed])[failed]
    assert details.cancel_reason == "airflow task d/r/failed/-1 is failed"
    # The next round sees only the live jobs and cancels nothing more.
    again = reaper.reap_once()
    assert (again.listed, again.cancelled) == (2, ())
    assert reaper.counters.as_dict() == {
        "rounds": 3,
        "cancelled": 2,
        "unreachable": 0,
        "last_unreachable": "",
    }


def test_an_unreachable_orchestrator_cancels_nothing_and_says_so(
    client: ArmadaClient, q: str, caplog: pytest.LogCaptureFixture
) -> None:
    ended_task = submit(client, "d/r/t/-1", "0")
    given = Given()
    given.answers = {("d/r/t/-1", "0"): ended("airflow task d/r/t/-1", "failed")}
    given.down = True
    reaper = Reaper(client, given)
    given.down = False
    assert reaper.reap_once().pending == 1
    given.down = True

    done = reaper.reap_once()

    assert (done.cancelled, done.unreachable) == ((), "connection refused")
    assert states(client, ended_task) == [submit_pb2.QUEUED]
    assert reaper.counters.unreachable == 1
    assert "airflow cannot be reached (connection refused): no job cancelled" in caplog.text
    # Back: its answer is confirmed by a second round before anything is cancelled.
    given.down = False
    assert reaper.reap_once().cancelled == ()
    assert [j for j, _ in reaper.reap_once().cancelled] == [ended_task]


def test_an_answer_that_changes_between_rounds_cancels_nothing(
    client: ArmadaClient, q: str
) -> None:
    job_id = submit(client, "d/r/t/-1", "0")
    given = Given()
    reaper = Reaper(client, given)
    for state in ("failed", "running", "failed"):
        given.answers = {
            ("d/r/t/-1", "0"): ended("airflow task d/r/t/-1", state)
            if state == "failed"
            else running("airflow task d/r/t/-1")
        }
        assert reaper.reap_once().cancelled == ()
    assert states(client, job_id) == [submit_pb2.QUEUED]
    # what a reaper that does not live between rounds hands back to the next one
    again = Reaper(client, given, pending=reaper.pending)
    assert [j for j, _ in again.reap_once().cancelled] == [job_id]


def test_no_live_task_jobs_asks_nothing(client: ArmadaClient, q: str) -> None:
    given = Given()
    assert Reaper(client, given).reap_once().listed == 0
    assert given.asked == []


def test_the_asyncio_reaper_decides_alike(client: ArmadaClient, q: str, servers) -> None:  # type: ignore[no-untyped-def]
    failed = submit(client, "d/r/t/-1", "0")
    runs = submit(client, "d/r/u/-1", "0")
    given = AsyncGiven()
    given.answers = {
        ("d/r/t/-1", "0"): ended("airflow task d/r/t/-1", "success"),
        ("d/r/u/-1", "0"): running("airflow task d/r/u/-1"),
    }

    async def one_round() -> tuple[tuple[str, str], ...]:
        async with AsyncArmadaClient(servers.address, timeout=10) as aclient:
            reaper = AsyncReaper(aclient, given)
            assert (await reaper.reap_once()).cancelled == ()
            return (await reaper.reap_once()).cancelled

    assert asyncio.run(one_round()) == ((failed, "airflow task d/r/t/-1 is success"),)
    assert states(client, failed, runs) == [submit_pb2.CANCELLED, submit_pb2.QUEUED]


@pytest.mark.parametrize(
    ("task", "parts"),
    [
        ("dag/run/task/-1", ("dag", "run", "task", -1)),
        (
            "dag/manual__2024-01-01T00:00:00+00:00/group.task/3",
            ("dag", "manual__2024-01-01T00:00:00+00:00", "group.task", 3),
        ),
        ("dag/a/run/with/slashes/task/0", ("dag", "a/run/with/slashes", "task", 0)),
        ("dag/run/task", None),
        ("dag/run/task/x", None),
        ("d" * 64 + "#" + "0" * 32, None),  # a hashed long name
    ],
)
def test_split_airflow_task(task: str, parts: tuple[str, str, str, int] | None) -> None:
    assert split_task(task) == parts


def test_airflow_not_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        adapter = AirflowTaskStates(f"http://127.0.0.1:{port}", timeout=2)
        with pytest.raises(
            OrchestratorUnreachable, match=f"Airflow API at http://127.0.0.1:{port}"
        ):
            adapter.states([job("d/r/t/-1")])
