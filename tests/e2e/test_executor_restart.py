"""Executors reconcile on start, fence themselves, and never overcommit a node.

Real `armada-server` and `armada-executor` processes over loopback gRPC; the executor dies by
SIGKILL. Each job is a small Python program that appends its start and end, with its job and
run ids, to a shared file; at its start it also records which earlier runs of the same job are
still alive (by pid and start time in /proc), so "no job ran twice at any moment" is read from
the jobs' own records, also for runs killed without a chance to record their end.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import JobState
from armada_core.jobs import annotations as ann

from .processes import (
    Process,
    processes_mentioning,
    start_executor,
    start_server,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOB = r"""
import os, signal, sys, time

record, seconds, term_delay = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
job, run = os.environ["ARMADA_JOB_ID"], os.environ["ARMADA_RUN_ID"]
if os.environ["ARMADA_POD_NAME"].count("-") > 2:  # armada-<job>-0-<n>: a retry
    seconds = float(sys.argv[4])


def stat(pid):
    try:
        data = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[19])


def append(line):
    fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    os.close(fd)


alive = []
try:
    with open(record) as f:
        for line in f:
            kind, other_job, other_run, *rest = line.split()
            if kind == "start" and other_job == job and other_run != run:
                seen = stat(int(rest[0]))
                if seen is not None and seen[1] == int(rest[1]) and seen[0] not in "ZX":
                    alive.append(other_run)
except FileNotFoundError:
    pass
me = os.getpid()
append(f"start {job} {run} {me} {stat(me)[1]} {time.time():.6f} {','.join(alive) or '-'}")


def terminated(*_):
    time.sleep(term_delay)  # ignores SIGTERM for a while, as slow jobs do
    append(f"end {job} {run} {time.time():.6f} terminated")
    sys.exit(143)


signal.signal(signal.SIGTERM, terminated)
print(f"job {job} started", flush=True)
time.sleep(seconds)
print(f"job {job} finished", flush=True)
append(f"end {job} {run} {time.time():.6f} done")
"""


@dataclass
class Runs:
    """What the jobs recorded, per job and run."""

    starts: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)
    ends: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Runs:
        runs = cls()
        for line in path.read_text().splitlines():
            parts = line.split()
            if parts[0] == "start":
                _, job, run, _, _, when, alive = parts
                runs.starts.setdefault(job, {})[run] = (float(when), alive)
            else:
                _, job, run, when, how = parts
                runs.ends.setdefault(job, {})[run] = (float(when), how)
        return runs


def job_spec(
    tmp_path: Path,
    seconds: float,
    *,
    cpu: str = "100m",
    term_delay: float = 0,
    grace: int = 1,
    priority_class: str = "",
    retry_seconds: float | None = None,
) -> dict:
    """A job running `seconds` (`retry_seconds` when it is a retry)."""
    script = tmp_path / "job.py"
    if not script.exists():
        script.write_text(JOB)
    spec = {
        "containers": [
            {
                "name": "main",
                "command": [
                    sys.executable,
                    str(script),
                    str(tmp_path / "record"),
                    str(seconds),
                    str(term_delay),
                    str(seconds if retry_seconds is None else retry_seconds),
                ],
                "resources": {
                    "requests": {"cpu": cpu, "memory": "32Mi"},
                    "limits": {"cpu": cpu, "memory": "256Mi"},
                },
            }
        ],
        "terminationGracePeriodSeconds": grace,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def runs_of(client: ArmadaClient, job_ids: list[str]) -> dict[str, list[job_pb2.JobRunDetails]]:
    details = {}
    for i in range(0, len(job_ids), 100):
        details.update(client.get_job_details(job_ids[i : i + 100], expand_job_run=True))
    return {job: list(details[job].job_runs) for job in job_ids}


def all_running(client: ArmadaClient, jobs: list[str], record: Path) -> bool:
    states = client.get_job_status(jobs).values()
    return (
        all(s == submit_pb2.RUNNING for s in states)
        and record.exists()
        and len(Runs.read(record).starts) == len(jobs)
    )


JOBS = 50


def test_an_executor_killed_and_restarted_adopts_its_runs_and_each_job_runs_once(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'armada.db'}"
    _, address = start_server(
        processes,
        "server",
        tmp_path,
        database,
        lease_timeout=30,
        scheduling_period=0.2,
        executor_sync_interval=0.2,
    )
    sandbox = tmp_path / "e1-pods"
    e1 = start_executor(processes, "e1", address, "local", tmp_path, "1x8x8Gi")
    record = tmp_path / "record"
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        jobs = client.submit_jobs("q", "s", [job_item(job_spec(tmp_path, 10))] * JOBS)
        wait_until(lambda: all_running(client, jobs, record), 120, "every job to run")

        e1.kill()  # SIGKILL: its pods live on, their shims keep logging them
        assert len(processes_mentioning(str(sandbox))) >= 2 * JOBS  # jobs and their shims
        restarted = start_executor(
            processes,
            "e1-again",
            address,
            "local",
            tmp_path,
            "1x8x8Gi",
            executor_id="e1",
            sandbox=sandbox,
        )
        assert f"adopted {JOBS} runs" in restarted.output()

        results = client.wait_for_jobs("q", "s", jobs, timeout=120)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}
        for job, runs in runs_of(client, jobs).items():  # one run each, never retried
            assert [(r.cluster, r.state) for r in runs] == [("e1", job_pb2.RUN_STATE_SUCCEEDED)], (
                job
            )
        # Their output after the restart was logged too.
        for log in sandbox.glob("*/*/logs/main.log"):
            lines = log.read_text()
            assert "started" in lines and "finished" in lines, log

    runs = Runs.read(record)
    assert sorted(runs.starts) == sorted(jobs)
    for job in jobs:
        [(run, (started, alive))] = runs.starts[job].items()
        assert alive == "-"
        assert runs.ends[job] == {run: (runs.ends[job][run][0], "done")}
        assert runs.ends[job][run][0] > started
    wait_until(lambda: not processes_mentioning(str(sandbox)), 30, "no process to remain")


def test_pods_of_an_executor_dead_past_the_lease_timeout_die_before_their_jobs_are_retried(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    # Its pods fence themselves after half of it without a sync. Long enough that the
    # executor taking over never misses that window on a loaded machine (at 6 s one of its
    # own runs once fenced itself and expired).
    lease_timeout = 12
    database = f"sqlite:///{tmp_path / 'armada.db'}"
    _, address = start_server(
        processes,
        "server",
        tmp_path,
        database,
        lease_timeout=lease_timeout,
        scheduling_period=0.2,
        executor_sync_interval=0.2,
    )
    sandbox = tmp_path / "e1-pods"
    e1 = start_executor(processes, "e1", address, "local", tmp_path, "1x8x8Gi")
    record = tmp_path / "record"
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        jobs = client.submit_jobs(
            "q", "s", [job_item(job_spec(tmp_path, 600, retry_seconds=2))] * JOBS
        )
        wait_until(lambda: all_running(client, jobs, record), 120, "every job to run")
        first_runs = {job: next(iter(runs)) for job, runs in Runs.read(record).starts.items()}

        e1.kill()
        # Nobody has stopped them; they stop themselves well before the leases expire.
        wait_until(
            lambda: not processes_mentioning(str(sandbox)),
            60,
            "the orphaned pods to fence themselves",
        )
        start_executor(processes, "e2", address, "local", tmp_path, "1x8x8Gi")
        results = client.wait_for_jobs("q", "s", jobs, timeout=180)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}
        for job, runs in runs_of(client, jobs).items():
            assert [(r.cluster, r.state) for r in runs] == [
                ("e1", job_pb2.RUN_STATE_LEASE_EXPIRED),
                ("e2", job_pb2.RUN_STATE_SUCCEEDED),
            ], job

        # The restarted executor finds its fenced runs, reports them and keeps nothing.
        restarted = start_executor(
            processes,
            "e1-again",
            address,
            "local",
            tmp_path,
            "1x8x8Gi",
            executor_id="e1",
            sandbox=sandbox,
        )
        assert f"adopted {JOBS} runs" in restarted.output()
        wait_until(
            lambda: len(list(sandbox.glob("*/*/reported"))) == JOBS,
            30,
            "the fenced runs' outcomes to reach the server",
        )
        assert not processes_mentioning(str(sandbox))
        assert {r.state for r in runs_of(client, jobs)[jobs[0]]} == {
            job_pb2.RUN_STATE_LEASE_EXPIRED,
            job_pb2.RUN_STATE_SUCCEEDED,
        }

    runs = Runs.read(record)
    for job in jobs:
        first = first_runs[job]
        [retry] = [run for run in runs.starts[job] if run != first]
        # Killed by fencing: the first run never ended on its own...
        assert first not in runs.ends.get(job, {}), job
        # ...and was gone before the retry started.
        assert runs.starts[job][retry][1] == "-", job
        assert runs.starts[job][retry][0] > runs.starts[job][first][0]
        assert runs.ends[job][retry][1] == "done"
    assert not processes_mentioning(str(tmp_path / "e2-pods"))


def test_a_job_placed_by_preemption_starts_only_after_its_victim_has_ended(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'armada.db'}"
    _, address = start_server(
        processes,
        "server",
        tmp_path,
        database,
        scheduling_period=0.2,
        executor_sync_interval=0.2,
        priority_classes="[{name: batch, priority: 0, preemptible: true}, "
        "{name: urgent, priority: 100}]",
        default_priority_class="batch",
    )
    start_executor(processes, "e1", address, "local", tmp_path, "1x2x4Gi")
    record = tmp_path / "record"
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        # The victim uses the whole node and takes 3 s of its 8 s grace period to stop.
        [victim] = client.submit_jobs(
            "q",
            "batch",
            [
                job_item(
                    job_spec(tmp_path, 600, cpu="2", term_delay=3, grace=8, priority_class="batch")
                )
            ],
        )
        wait_until(lambda: all_running(client, [victim], record), 60, "the victim to run")
        [urgent] = client.submit_jobs(
            "q", "urgent", [job_item(job_spec(tmp_path, 0.5, cpu="2", priority_class="urgent"))]
        )
        results = client.wait_for_jobs("q", "urgent", [urgent], timeout=60)
        assert results[urgent].state == JobState.SUCCEEDED
        client.cancel_jobs("q", "batch", [victim])  # it was queued again for a retry

    runs = Runs.read(record)
    # Its first run (preempted, it may have been retried since).
    victim_run, (victim_start, _) = min(runs.starts[victim].items(), key=lambda r: r[1][0])
    victim_end, how = runs.ends[victim][victim_run]
    assert how == "terminated"
    [(urgent_start, _)] = runs.starts[urgent].values()
    # Never both at once on a node that holds one of them.
    assert victim_start < victim_end < urgent_start


def test_a_restarted_simulated_executor_holds_nothing_and_its_runs_are_retried(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'armada.db'}"
    _, address = start_server(
        processes,
        "server",
        tmp_path,
        database,
        lease_timeout=30,
        scheduling_period=0.2,
        executor_sync_interval=0.2,
    )
    # Two nodes: a run lost as pod_missing is retried on another node than its own.
    e1 = start_executor(processes, "e1", address, "simulated", tmp_path, "2x8x8Gi")
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        item = job_item(job_spec(tmp_path, 0), annotations={ann.PREFIX + "simulatedDuration": "3"})
        jobs = client.submit_jobs("q", "s", [item] * 5)
        wait_until(
            lambda: set(client.get_job_status(jobs).values()) == {submit_pb2.RUNNING},
            60,
            "the jobs to run",
        )
        e1.kill()
        start_executor(
            processes, "e1-again", address, "simulated", tmp_path, "2x8x8Gi", executor_id="e1"
        )
        results = client.wait_for_jobs("q", "s", jobs, timeout=60)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}
        subcategories = {}
        for message in client.get_job_set_events("q", "s", watch=False):
            if message.message.WhichOneof("events") == "failed":
                event = message.message.failed
                subcategories[event.job_id] = event.failure_subcategory
        assert subcategories == dict.fromkeys(jobs, "pod_missing")
        for runs in runs_of(client, jobs).values():
            assert [r.cluster for r in runs] == ["e1", "e1"]
            assert runs[-1].state == job_pb2.RUN_STATE_SUCCEEDED
