"""Topology-aware gangs and elastic pod groups as operators run them: two server replicas on
one PostgreSQL database with `topology_levels: [topology/block, topology/rack]` (and a usage
half-life, whose decayed usage the leader keeps in the database), and a remote
`armada-executor` (simulated, or local with real processes) whose nodes carry block and rack
labels given on its command line (the mapping form of `--nodes`): 2 blocks x 2 racks x 2
nodes of 2 CPUs.

A gang that must stay within one rack (`gangMaxHops: 2`) and an elastic pod group that must
stay within one block (a coordinator and 2 to 4 workers, `gangMaxHops: 4`) run while the
group's block has no room for all of it; the leading replica is SIGKILLed; the other takes
over, jobs holding part of a block are cancelled, and the new leader places the waiting
workers and a second rack gang. Every gang and group member must succeed, no job may ever
have two live runs, each gang's members must have run in one rack (the group's in one
block), and the group's coordinator must have run together with at least its minimum of
workers. The evidence is what the system says about itself: the job sets' event logs, the
runs' nodes and times from GetJobDetails, and (local executor) the processes' own start and
end records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, Role, gang_items, job_item, pod_group_items
from armada_server.config import parse_nodes
from armada_server.executors.nodes import virtual_nodes
from armada_server.storage import schema as t
from armada_server.storage.database import open_database

from .processes import Process, kill_leftovers, wait_until
from .topology import (
    GRACE_SECONDS,
    History,
    Topology,
    close_open,
    event_violations,
    in_pool,
    job_details,
    live_pods,
    overlapping_runs,
    read_histories,
    read_records,
    recorded_spec,
    resources,
    run_violations,
    settle,
    simulated_spec,
    stuck,
    timeline,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(300)]

BLOCK, RACK = "topology/block", "topology/rack"
SETTINGS = {
    "scheduling_period": 0.2,
    "executor_sync_interval": 0.2,
    "lease_timeout": 4,
    "scheduling": f"{{topology_levels: [{BLOCK}, {RACK}], usage_half_life: 300}}",
}
POOL, QUEUE, EXECUTOR = "topo", "train", "e-topo"
# 2 blocks x 2 racks x 2 nodes of 2 CPUs: a rack holds 4 one-CPU members, a block 8.
NODES = tuple(
    f'{{count: 2, cpu: "2", memory: 4Gi, labels: {{{BLOCK}: {block}, {RACK}: {rack}}}}}'
    for block in ("b1", "b2")
    for rack in ("r1", "r2")
)
SECONDS = 10  # each gang or group member's run: the first wave runs until after the kill
FILLER, FILLER_SECONDS = 5, 600  # one-CPU jobs held in block b2 until they are cancelled
RACK_GANG = 4
COORDINATORS, WORKERS_MIN, WORKERS_MAX = 1, 2, 4
CYCLE_FAILED = "scheduling cycle failed"


def node_labels() -> dict[str, Mapping[str, str]]:
    """Node name -> labels, as the executor builds them from the same `--nodes` texts."""
    return {
        node.name: dict(node.labels)
        for node in virtual_nodes([parse_nodes(text) for text in NODES], EXECUTOR)
    }


@pytest.fixture
def topology(
    processes: Callable[..., Process], tmp_path: Path, postgres_server
) -> Iterator[Topology]:
    """Two replicas on a new PostgreSQL database, the first one leading; the executor comes
    with the test (its kind is the test's parameter). Kills its pods' leftovers at the end."""
    topology = Topology(processes, tmp_path, postgres_server.new_database(), **SETTINGS)
    topology.add_replica("a")
    topology.leader()  # the first replica leads: a known starting point
    topology.add_replica("b")
    yield topology
    topology.close()
    for process in reversed(topology.processes):
        process.stop()
    for sandbox in tmp_path.glob("*-pods"):
        kill_leftovers(str(sandbox))


def member_spec(kind: str, record: Path, seconds: float) -> tuple[dict, dict[str, str]]:
    """One CPU for `seconds`: a simulated run, or a local process that records its life."""
    if kind == "local":
        return recorded_spec(record, seconds, cpu="1"), {}
    spec, annotations = simulated_spec(seconds)
    spec["containers"][0]["resources"] = resources("1")
    return spec, annotations


def carried_usage(database_url: str) -> tuple[dict[str, float], datetime | None]:
    """Each queue's decayed usage as the scheduling leader last kept it in the database, and
    when it wrote it."""
    engine = open_database(database_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(t.scheduler_carryover.c.state, t.scheduler_carryover.c.updated_at)
            ).first()
    finally:
        engine.dispose()
    if row is None:
        return {}, None
    return json.loads(row.state).get("usage", {}), row.updated_at


def runs_of(
    details: Mapping[str, job_pb2.JobDetails], jobs: list[str]
) -> list[job_pb2.JobRunDetails]:
    return [run for job in jobs for run in details[job].job_runs]


def one_domain(
    what: str,
    jobs: list[str],
    details: Mapping[str, job_pb2.JobDetails],
    labels: Mapping[str, Mapping[str, str]],
    level: str,
) -> list[str]:
    """Every run of `jobs` on a node of one domain of `level` (for the rack level, within one
    block too: a rack is named within its block)."""
    levels = (BLOCK,) if level == BLOCK else (BLOCK, RACK)
    where = {
        run.node: tuple(labels.get(run.node, {}).get(lv, "?") for lv in levels)
        for run in runs_of(details, jobs)
    }
    if not where:
        return [f"{what}: no runs at all"]
    if len(set(where.values())) != 1 or "?" in next(iter(where.values())):
        return [
            f"{what} ran in more than one {level.split('/')[1]} (or on unknown nodes): "
            + ", ".join(f"{node} in {'/'.join(domain)}" for node, domain in sorted(where.items()))
        ]
    return []


def ran_together(
    coordinators: list[str],
    workers: list[str],
    details: Mapping[str, job_pb2.JobDetails],
    minimum: int,
) -> list[str]:
    """At some instant a coordinator's run and at least `minimum` workers' runs were all
    running (from the runs' start and finish times)."""

    def spans(jobs: list[str]) -> list[tuple[int, int]]:
        return [
            (run.started_ts.ToNanoseconds(), run.finished_ts.ToNanoseconds())
            for run in runs_of(details, jobs)
            if run.HasField("started_ts") and run.HasField("finished_ts")
        ]

    best = 0
    for c_start, c_end in spans(coordinators):
        # Worker runs overlapping the coordinator's; the most alive at any start instant.
        overlapping = [
            (max(s, c_start), min(e, c_end)) for s, e in spans(workers) if s < c_end and e > c_start
        ]
        for at, _ in overlapping:
            best = max(best, sum(1 for s, e in overlapping if s <= at < e))
    if best < minimum:
        return [
            f"the pod group's coordinator ran with at most {best} workers at once, fewer "
            f"than the minimum {minimum}"
        ]
    return []


def placements(
    jobs: Mapping[str, str],
    details: Mapping[str, job_pb2.JobDetails],
    labels: Mapping[str, Mapping[str, str]],
) -> str:
    """Each job's runs: where and when, for the evidence."""
    lines = []
    for job, what in jobs.items():
        for run in details[job].job_runs:
            at = labels.get(run.node, {})
            lines.append(
                f"  {what} {job[-6:]} run {run.run_id[-12:]} "
                f"{job_pb2.JobRunState.Name(run.state)} on {run.node or '?'} "
                f"({at.get(BLOCK, '?')}/{at.get(RACK, '?')}) "
                f"{run.started_ts.ToNanoseconds() / 1e9:.3f}-"
                f"{run.finished_ts.ToNanoseconds() / 1e9:.3f}"
            )
    return "\n".join(lines)


def wait_for(
    client: ArmadaClient,
    topology: Topology,
    jobs: list[str],
    what: str,
    enough: Callable[[dict[str, int]], bool],
) -> dict[str, int]:
    """Wait until the jobs' states (GetJobStatus) satisfy `enough`; returns them. On a
    timeout, says where each job is and why the scheduler leaves it queued."""
    states: dict[str, int] = {}

    def ready() -> bool:
        states.update(client.get_job_status(jobs))
        return enough(states)

    try:
        wait_until(ready, 60, what)
    except AssertionError as e:
        reasons = client.get_job_details(jobs)
        raise AssertionError(
            f"{e}\n"
            + "\n".join(
                f"  {j}: {submit_pb2.JobState.Name(d.state)}, scheduler: {d.scheduling_reason!r}"
                for j, d in reasons.items()
            )
            + "\ncomponents' logs:\n"
            + topology.problems()
        ) from None
    return states


def running(jobs: list[str], at_least: int | None = None) -> Callable[[dict[str, int]], bool]:
    need = len(jobs) if at_least is None else at_least
    return lambda states: sum(states.get(j) == submit_pb2.RUNNING for j in jobs) >= need


@pytest.mark.parametrize("kind", ["simulated", "local"])
def test_topology_gangs_and_pod_groups_survive_the_leader_being_killed(
    topology: Topology, tmp_path: Path, kind: str
) -> None:
    """The filler holds 5 CPUs of block b2 (node selector), so no rack of b2 is whole: rack
    gang 1 takes a rack of b1. The pod group (5 CPUs at most, 3 at least) then fits neither
    block whole (4 CPUs free in b1, 3 in b2): it starts with its minimum and at least one
    worker waits. The leader is killed; through the survivor the filler is cancelled and rack
    gang 2 submitted, so the new leader places the waiting workers (in the group's block only,
    whichever block has room) and gang 2 (in one rack)."""
    labels = node_labels()
    assert {(v[BLOCK], v[RACK]) for v in labels.values()} == {
        (b, r) for b in ("b1", "b2") for r in ("r1", "r2")
    }
    topology.add_executor(EXECUTOR, kind, POOL, *NODES)
    record = tmp_path / "records.log"
    spec, annotations = member_spec(kind, record, SECONDS)
    filler_spec, filler_annotations = member_spec(kind, record, FILLER_SECONDS)
    filler_spec["nodeSelector"] = {BLOCK: "b2"}
    job_set = "topology"
    sets = [(QUEUE, job_set), (QUEUE, "filler")]
    violations: list[str] = []
    with topology.client() as client:
        client.create_queue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
        filler = client.submit_jobs(
            QUEUE,
            "filler",
            [
                job_item(
                    filler_spec,
                    client_id=f"filler-{i}",
                    annotations=in_pool(POOL, filler_annotations),
                )
                for i in range(FILLER)
            ],
        )
        wait_for(client, topology, filler, "the filler to run in block b2", running(filler))
        gang = client.submit_jobs(
            QUEUE,
            job_set,
            gang_items(
                spec,
                replicas=RACK_GANG,
                max_hops=2,
                client_id="rack-gang-1",
                annotations=in_pool(POOL, annotations),
            ),
        )
        wait_for(client, topology, gang, "rack gang 1 to run", running(gang))
        group = client.submit_jobs(
            QUEUE,
            job_set,
            pod_group_items(
                [
                    Role("coordinator", spec, minimum=COORDINATORS),
                    Role("worker", spec, minimum=WORKERS_MIN, maximum=WORKERS_MAX),
                ],
                max_hops=4,
                client_id="pod-group",
                annotations=in_pool(POOL, annotations),
            ),
        )
        coordinators, workers = group[:COORDINATORS], group[COORDINATORS:]
        states = wait_for(
            client,
            topology,
            group,
            "the pod group's coordinator and minimum of workers to run",
            lambda st: running(coordinators)(st) and running(workers, WORKERS_MIN)(st),
        )
        waiting = [w for w in workers if states[w] == submit_pb2.QUEUED]
        if not waiting:
            violations.append(
                "no worker of the pod group waited before the leader was killed, "
                "though no block had room for the whole group"
            )

    # SIGKILL the leader while they run; the other replica takes over.
    leader = topology.leader()
    before, _ = carried_usage(topology.database_url)
    if not before.get(QUEUE):
        violations.append(f"the leader kept no decayed usage of {QUEUE} before it was killed")
    leader.process.kill()
    killed_at = datetime.now(UTC)
    survivor = topology.leader()
    assert survivor is not leader

    with topology.client(survivor) as client:
        # Room in block b2 (the group's block, or the one it must not spill into), and a
        # second rack gang: for the new leader to place, with the waiting workers.
        cancelled = client.cancel_jobs(QUEUE, "filler", filler, reason="make room")
        second = client.submit_jobs(
            QUEUE,
            job_set,
            gang_items(
                spec,
                replicas=RACK_GANG,
                max_hops=2,
                client_id="rack-gang-2",
                annotations=in_pool(POOL, annotations),
            ),
        )
    topology_jobs = gang + group + second
    jobs = topology_jobs + filler
    unsettled = settle(topology, jobs, timeout=90)

    with topology.client(survivor, timeout=60) as client:
        histories: dict[str, History] = read_histories(client, sets)
        details = job_details(client, jobs)
    violations += stuck(topology, unsettled, histories, 90)
    violations += [
        f"{job}: acknowledged at submission, but no events" for job in jobs if job not in histories
    ]
    violations += event_violations(histories, cancelled)
    violations += run_violations(details, histories)
    violations += [
        f"{job} ended {histories[job].final}, expected SUCCEEDED: {histories[job].story()}"
        for job in topology_jobs
        if job in histories and histories[job].final != "SUCCEEDED"
    ]
    violations += one_domain("rack gang 1", gang, details, labels, RACK)
    violations += one_domain("rack gang 2", second, details, labels, RACK)
    violations += one_domain("the pod group", group, details, labels, BLOCK)
    violations += ran_together(coordinators, workers, details, WORKERS_MIN)
    # The new leader read the row the killed one kept and goes on keeping it (that it
    # carries the values on is shown by tests/server's restart tests).
    after, written = carried_usage(topology.database_url)
    if not after.get(QUEUE) or written is None or written <= killed_at:
        violations.append(
            f"the new leader does not keep {QUEUE}'s decayed usage: "
            f"{after} written at {written}, the leader killed at {killed_at}"
        )
    violations += [
        f"{name}: {line}"
        for name, lines in topology.log_lines(CYCLE_FAILED).items()
        for line in lines[:3]
    ]
    lifetimes = []
    if kind == "local":
        # From the processes' own records: none started twice, none alive twice at once,
        # each on the node its run says.
        deadline = time.monotonic() + 30
        while len(read_records(record)[0]) < len(jobs) and time.monotonic() < deadline:
            time.sleep(0.2)
        lifetimes, anomalies = read_records(record)
        violations += anomalies
        close_open(lifetimes, topology.watch)
        violations += [line for _, line in overlapping_runs(lifetimes)]
        nodes = {run.run_id: run.node for run in runs_of(details, jobs)}
        violations += [
            f"job {life.job_id}: run {life.run_id[-12:]}'s process ran on "
            f"{life.node}, its run says {nodes.get(life.run_id, '?')}"
            for life in lifetimes
            if nodes.get(life.run_id) != life.node
        ]
        # And none is left once every job has ended.
        sandbox = topology.executors[EXECUTOR].sandbox
        deadline = time.monotonic() + GRACE_SECONDS + 20
        while live_pods(sandbox) and time.monotonic() < deadline:
            time.sleep(0.2)
        violations += [
            f"pid {pid} of job {job} run {run[:8]} still alive after every job ended"
            for pid, (job, run) in sorted(live_pods(sandbox).items())
        ]
    kinds = {
        **dict.fromkeys(filler, "filler"),
        **dict.fromkeys(gang, "gang-1"),
        **dict.fromkeys(second, "gang-2"),
        **dict.fromkeys(coordinators, "coordinator"),
        **dict.fromkeys(workers, "worker"),
    }
    summary = (
        f"leader {leader.name} killed, {survivor.name} took over; {len(waiting)} "
        f"worker(s) waited at the kill"
    )
    print(f"{summary}; runs:\n" + placements(kinds, details, labels))  # shown with -s or -rP
    assert not violations, (
        f"{len(violations)} violations ({summary}):\n"
        + "\n".join(violations[:40])
        + "\nruns:\n"
        + placements(kinds, details, labels)
        + "\ntimeline:\n"
        + timeline(histories, lifetimes)
        + "\ncomponents' logs:\n"
        + topology.problems()
    )
