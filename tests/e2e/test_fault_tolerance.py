"""Fault tolerance with real processes: a killed executor, a killed scheduling leader.

Every component is a real process (`armada-server`, `armada-executor`) speaking real gRPC to a
real database; faults are SIGKILLs, so nothing gets to clean up after itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import JobState
from armada_core.jobs import annotations as ann

from .processes import (
    LEADER,
    Process,
    kill_leftovers,
    processes_mentioning,
    start_executor,
    start_server,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def pod(*command: str, cpu: str = "100m", memory: str = "32Mi") -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "command": list(command),
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ]
    }


def runs_of(client: ArmadaClient, job_ids: list[str]) -> dict[str, list[job_pb2.JobRunDetails]]:
    details = {}
    for i in range(0, len(job_ids), 100):
        details.update(client.get_job_details(job_ids[i : i + 100], expand_job_run=True))
    return {job: list(details[job].job_runs) for job in job_ids}


def count_states(client: ArmadaClient, job_ids: list[str]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for state in client.get_job_status(job_ids).values():
        counts[state] = counts.get(state, 0) + 1
    return counts


# --- a killed executor ----------------------------------------------------------------------

JOBS = 50
# Long enough that an executor busy starting its 50 pods on a loaded machine (the suite runs a
# worker per core) keeps its leases; short enough that the test does not wait long for expiry.
LEASE_TIMEOUT = 6


def test_a_killed_executor_loses_its_leases_and_its_jobs_run_elsewhere(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'armada.db'}"
    _, address = start_server(
        processes,
        "server",
        tmp_path,
        database,
        lease_timeout=LEASE_TIMEOUT,
        scheduling_period=0.2,
        executor_sync_interval=0.2,
    )
    e1 = start_executor(processes, "e1", address, "local", tmp_path, "1x8x8Gi")
    e1_sandbox = str(tmp_path / "e1-pods")
    try:
        with ArmadaClient(address) as client:
            client.create_queue(submit_pb2.Queue(name="q"))
            jobs = client.submit_jobs("q", "long", [job_item(pod("sleep", "600"))] * JOBS)
            wait_until(
                lambda: count_states(client, jobs).get(submit_pb2.RUNNING) == JOBS,
                120,
                f"all {JOBS} jobs to run on e1",
            )
            before = runs_of(client, jobs)
            assert all(
                [(r.cluster, r.state) for r in runs] == [("e1", job_pb2.RUN_STATE_RUNNING)]
                for runs in before.values()
            )
            assert len(processes_mentioning(e1_sandbox)) >= JOBS  # the pods really run

            e1.kill()  # SIGKILL: no goodbye, its pods are orphaned
            killed_at = time.monotonic()
            # Its pods have nobody to report them any more; the test removes them.
            orphans = kill_leftovers(e1_sandbox)
            assert len(orphans) >= JOBS

            start_executor(processes, "e2", address, "local", tmp_path, "1x8x8Gi")
            # One read decides: two separate reads (job states, then runs) could see the jobs
            # still running on e1 and then their e2 runs only leased.
            wait_until(
                lambda: all(
                    runs[-1].cluster == "e2" and runs[-1].state == job_pb2.RUN_STATE_RUNNING
                    for runs in runs_of(client, jobs).values()
                ),
                180,
                f"all {JOBS} jobs to run again, on e2",
            )
            # The leases expired no sooner than the timeout (generous upper bound: slow CI).
            assert time.monotonic() - killed_at >= LEASE_TIMEOUT - 1

            for job, runs in runs_of(client, jobs).items():
                assert [r.cluster for r in runs] == ["e1", "e2"], job
                assert runs[0].state == job_pb2.RUN_STATE_LEASE_EXPIRED, (job, runs[0])
                assert runs[0].finished_ts.seconds > 0, job
                assert runs[1].state == job_pb2.RUN_STATE_RUNNING, (job, runs[1])
            # The events tell the same story: each job's e1 run expired, and it was retried.
            kinds: dict[str, list[str]] = {job: [] for job in jobs}
            failed: dict[str, list[submit_pb2.JobState]] = {job: [] for job in jobs}
            for message in client.get_job_set_events("q", "long", watch=False):
                kind = message.message.WhichOneof("events")
                event = getattr(message.message, kind)
                kinds[event.job_id].append(kind)
                if kind == "failed":
                    failed[event.job_id].append(event)
            for job in jobs:
                assert kinds[job] == [
                    "submitted",
                    "queued",
                    "leased",
                    "pending",
                    "running",
                    "lease_expired",
                    "failed",
                    "queued",
                    "leased",
                    "pending",
                    "running",
                ], (job, kinds[job])
                [failure] = failed[job]
                assert failure.retryable, (job, failure)
            assert len(processes_mentioning(str(tmp_path / "e2-pods"))) >= JOBS

            client.cancel_job_set("q", "long")
            results = client.wait_for_jobs("q", "long", jobs, timeout=120)
            assert {r.state for r in results.values()} == {JobState.CANCELLED}
    finally:
        kill_leftovers(e1_sandbox)
    wait_until(
        lambda: not processes_mentioning(str(tmp_path / "e2-pods")),
        60,
        "e2's pods to be killed after cancellation",
    )


def test_a_lease_lost_too_often_fails_the_job_by_policy(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    """maxAttemptedRuns: 1 - a job whose only allowed run lost its lease fails, and is not
    run again anywhere."""
    database = f"sqlite:///{tmp_path / 'armada.db'}"
    _, address = start_server(
        processes,
        "server",
        tmp_path,
        database,
        lease_timeout=LEASE_TIMEOUT,
        scheduling_period=0.2,
        executor_sync_interval=0.2,
        retry="{maxAttemptedRuns: 1}",
    )
    e1 = start_executor(processes, "e1", address, "simulated", tmp_path, "1x8x8Gi")
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        long = job_item(pod("sleep", "600"), annotations={ann.PREFIX + "simulatedDuration": "600"})
        jobs = client.submit_jobs("q", "once", [long] * 5)
        wait_until(
            lambda: count_states(client, jobs).get(submit_pb2.RUNNING) == 5,
            60,
            "the jobs to run on e1",
        )
        e1.kill()
        start_executor(processes, "e2", address, "simulated", tmp_path, "1x8x8Gi")
        results = client.wait_for_jobs("q", "once", jobs, timeout=120)
        for result in results.values():
            assert result.state == JobState.FAILED, result
            assert result.failure_subcategory in ("lease_expired", "max_runs_exceeded"), result
        for job, runs in runs_of(client, jobs).items():
            assert [(r.cluster, r.state) for r in runs] == [
                ("e1", job_pb2.RUN_STATE_LEASE_EXPIRED)
            ], job


# --- a killed scheduling leader -------------------------------------------------------------


def simulated(seconds: float) -> submit_pb2.JobSubmitRequestItem:
    return job_item(pod("true"), annotations={ann.PREFIX + "simulatedDuration": str(seconds)})


@pytest.mark.postgres
def test_a_killed_leader_is_replaced_and_scheduling_continues(
    processes: Callable[..., Process], tmp_path: Path, postgres_server
) -> None:
    """Two replicas on one PostgreSQL database; the executor syncs with the follower.

    Both replicas run without an in-process executor, so the only thing the leader does that
    the follower does not is scheduling: when the leader dies, jobs can only be leased again
    if the follower takes over the advisory lock. (With an executor inside each replica,
    killing the leader would also kill an executor, and a lease could come from either.)
    """
    database = postgres_server.new_database()
    settings = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": 10}
    leader, leader_address = start_server(processes, "a", tmp_path, database, **settings)
    leader.wait_for(LEADER, timeout=60)
    follower, address = start_server(processes, "b", tmp_path, database, **settings)
    start_executor(processes, "e1", address, "simulated", tmp_path, "2x4x8Gi")
    with ArmadaClient(address) as client, ArmadaClient(leader_address) as via_leader:
        client.create_queue(submit_pb2.Queue(name="q"))
        # The leader schedules, whichever replica took the jobs and serves the executor.
        first = client.submit_jobs("q", "before", [simulated(0.5)] * 10)
        results = client.wait_for_jobs("q", "before", first, timeout=120)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}
        assert via_leader.get_job_status(first) == client.get_job_status(first)
        # Jobs running when the leader dies are not disturbed: they live on the executor.
        running = client.submit_jobs("q", "during", [simulated(4)] * 4)
        wait_until(
            lambda: count_states(client, running).get(submit_pb2.RUNNING) == 4,
            60,
            "the long jobs to run",
        )
        assert LEADER not in follower.output()

        leader.kill()
        killed_at = time.monotonic()
        queued = client.submit_jobs("q", "after", [simulated(0.5)] * 20)
        follower.wait_for(LEADER, timeout=60)
        takeover = time.monotonic() - killed_at
        results = client.wait_for_jobs("q", "after", queued, timeout=120)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}, results
        assert {r.cluster for r in results.values()} == {"e1"}
        results = client.wait_for_jobs("q", "during", running, timeout=120)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}, results
        for runs in runs_of(client, running).values():  # one run each: nothing was lost
            assert [r.state for r in runs] == [job_pb2.RUN_STATE_SUCCEEDED]
    # "Within seconds": the follower tries every scheduling period; allow a slow machine.
    assert takeover < 30, f"the follower took {takeover:.1f}s to take over"
