"""Builders for scheduler tests: compact nodes, jobs and multi-round scenarios."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from armada_core.scheduling import (
    Job,
    Node,
    PriorityClass,
    Queue,
    Resources,
    SchedulingConfig,
    SchedulingResult,
    Snapshot,
    Taint,
    Toleration,
)
from armada_core.scheduling.fast import fast_schedule
from armada_core.scheduling.reference import reference_schedule

GI = 2**30

Impl = Callable[[Snapshot], SchedulingResult]
IMPLEMENTATIONS: dict[str, Impl] = {"reference": reference_schedule, "fast": fast_schedule}

#: Classes used throughout the tables: three preemptible levels and a non-preemptible one.
PRIORITY_CLASSES = (
    PriorityClass("low", 0, preemptible=True),
    PriorityClass("mid", 1, preemptible=True),
    PriorityClass("high", 2, preemptible=True),
    PriorityClass("np", 3, preemptible=False),
    PriorityClass("np0", 0, preemptible=False),
)

_clock = itertools.count()


def res(cpu: float = 1, mem: float = 1, gpu: int = 0, **extra: int) -> Resources:
    """CPU in cores and memory in GiB, stored as milli-CPU and bytes."""
    values = {"cpu": round(cpu * 1000), "memory": round(mem * GI)}
    if gpu:
        values["nvidia.com/gpu"] = gpu
    values.update({k.replace("__", "/").replace("_", "-"): v for k, v in extra.items()})
    return Resources(values)


def node(
    node_id: str,
    cpu: float = 4,
    mem: float = 16,
    gpu: int = 0,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    cordoned: bool = False,
    **extra: int,
) -> Node:
    return Node(node_id, res(cpu, mem, gpu, **extra), dict(labels or {}), tuple(taints), cordoned)


def job(
    job_id: str,
    queue: str = "A",
    cpu: float = 1,
    mem: float = 1,
    gpu: int = 0,
    pc: str = "low",
    *,
    submit: float | None = None,
    **kw,
) -> Job:
    extra = kw.pop("extra", {})
    if submit is None:
        submit = float(next(_clock))
    return Job(job_id, queue, pc, res(cpu, mem, gpu, **extra), submit_time=submit, **kw)


def jobs(prefix: str, count: int, queue: str = "A", **kw) -> list[Job]:
    return [job(f"{prefix}{i}", queue, **kw) for i in range(count)]


def gang(prefix: str, count: int, queue: str = "A", **kw) -> list[Job]:
    """A gang of identical members; pass ``gang_min_cardinality`` / ``gang_uniformity_label``."""
    return [
        job(f"{prefix}{i}", queue, gang_id=prefix, gang_cardinality=count, **kw)
        for i in range(count)
    ]


def running(jobs_: Iterable[Job], node_id: str, start: float = 0.0) -> list[Job]:
    return [replace(j, node=node_id, start_time=start) for j in jobs_]


@dataclass
class Round:
    """Jobs submitted before the round and what the round must decide."""

    submit: list[Job] = field(default_factory=list)
    finish: set[str] = field(default_factory=set)  # running jobs that completed before it
    # Running pod group members that SUCCEEDED before it: gone like ``finish``, and the caller
    # tells their group's other members (``Job.gang_succeeded``), as the server does.
    succeed: set[str] = field(default_factory=set)
    now: float | None = None
    sched: set[str] | dict[str, str] | None = None
    pre: set[str] | None = None
    failed: set[str] | None = None
    counts: dict[str, int] | None = None  # running jobs per queue once decisions are applied
    reasons: dict[str, str] = field(default_factory=dict)  # job id -> substring of its reason
    queues: tuple[Queue, ...] | None = None  # replaces the scenario's queues from this round on
    rate_tokens: float | None = None  # the global rate-limit bucket's level (None: full)
    queue_rate_tokens: dict[str, float] = field(default_factory=dict)  # absent: full
    excess_flow: dict[str, int] | None = None  # the round's excess-flow budget charges


@dataclass
class Scenario:
    name: str
    nodes: list[Node]
    rounds: list[Round]
    queues: tuple[Queue, ...] = (Queue("A"), Queue("B"))
    config: SchedulingConfig = field(default_factory=SchedulingConfig)
    classes: tuple[PriorityClass, ...] = PRIORITY_CLASSES
    usage_elapsed: float = 0.0


def apply(jobs_: list[Job], result: SchedulingResult, now: float) -> list[Job]:
    """The world after a cycle: scheduled jobs run, preempted and failed jobs are gone."""
    out = []
    for j in jobs_:
        if j.id in result.preempted or j.id in result.failed:
            continue
        if j.id in result.scheduled:
            charge = result.excess_flow.get(j.id, 0)
            j = replace(j, node=result.scheduled[j.id], start_time=now, excess_flow=charge)
        out.append(j)
    return out


def run_scenario(scenario: Scenario, impl: Impl) -> list[SchedulingResult]:
    world: list[Job] = []
    done: dict[tuple[str, str], dict[str, int]] = {}  # pod group -> role -> members succeeded
    queues = scenario.queues
    results = []
    for number, rnd in enumerate(scenario.rounds):
        now = float(number * 100) if rnd.now is None else rnd.now
        if rnd.queues is not None:
            queues = rnd.queues
        for j in world:
            if j.id in rnd.succeed and j.gang_id is not None and j.gang_role is not None:
                roles = done.setdefault((j.queue, j.gang_id), {})
                roles[j.gang_role] = roles.get(j.gang_role, 0) + 1
        world = [j for j in world if j.id not in rnd.finish | rnd.succeed] + list(rnd.submit)
        world = [
            replace(j, gang_succeeded=tuple(sorted(done[(j.queue, j.gang_id)].items())))
            if (j.queue, j.gang_id) in done
            else j
            for j in world
        ]
        snap = Snapshot(
            queues,
            scenario.classes,
            tuple(scenario.nodes),
            tuple(world),
            scenario.config,
            now=now,
            usage_elapsed=scenario.usage_elapsed,
            rate_tokens=rnd.rate_tokens,
            queue_rate_tokens=rnd.queue_rate_tokens,
        )
        result = impl(snap)
        results.append(result)
        where = f"{scenario.name} round {number}"
        check_basic(snap, result)
        if rnd.sched is not None:
            if isinstance(rnd.sched, dict):
                assert result.scheduled == rnd.sched, where
            else:
                assert set(result.scheduled) == rnd.sched, where
        if rnd.pre is not None:
            assert result.preempted == rnd.pre, where
        if rnd.failed is not None:
            assert set(result.failed) == rnd.failed, where
        if rnd.excess_flow is not None:
            assert result.excess_flow == rnd.excess_flow, where
        for job_id, text in rnd.reasons.items():
            got = result.unscheduled.get(job_id) or result.failed.get(job_id) or ""
            assert text in got, f"{where}: {job_id}: {got!r}"
        world = apply(world, result, now)
        if rnd.counts is not None:
            counts: dict[str, int] = {}
            for j in world:
                if j.node is not None:
                    counts[j.queue] = counts.get(j.queue, 0) + 1
            want = {k: v for k, v in rnd.counts.items() if v}
            assert counts == want, where
    return results


def check_basic(snap: Snapshot, result: SchedulingResult) -> None:
    """Every queued job is accounted for exactly once; nothing is over capacity."""
    queued = {j.id for j in snap.jobs if j.node is None}
    running_ids = {j.id for j in snap.jobs if j.node is not None}
    assert set(result.scheduled) <= queued
    assert result.preempted <= running_ids
    parts = [set(result.scheduled), set(result.failed), set(result.unscheduled)]
    assert sum(len(p) for p in parts) == len(queued), "each queued job gets one outcome"
    recorded = sum(map(len, result.unscheduled.groups().values()))
    assert recorded == len(result.unscheduled), "each unscheduled job is recorded once"
    assert set().union(*parts) == queued
    check_capacity(snap, result)


def check_capacity(snap: Snapshot, result: SchedulingResult) -> None:
    used: dict[str, dict[str, int]] = {n.id: {} for n in snap.nodes}
    for j in snap.jobs:
        where = j.node if j.node is not None else result.scheduled.get(j.id)
        if where is None or j.id in result.preempted or where not in used:
            continue
        for k, v in j.requests.items():
            used[where][k] = used[where].get(k, 0) + v
    for n in snap.nodes:
        for k, v in used[n.id].items():
            before = sum(
                j.requests.get(k, 0) for j in snap.jobs if j.node == n.id
            )  # pre-existing over-commitment is not the scheduler's doing
            assert v <= max(n.capacity.get(k, 0), before), f"node {n.id} over capacity on {k}"


def tol(key: str, value: str = "", operator: str = "Equal", effect: str = "") -> Toleration:
    return Toleration(key, operator, value, effect)


def read_on_threads(sets: list[list[Job]], read: Callable[[list[Job]], object]) -> None:
    """`read` of random samples of each of `sets`, a thread per set at once: what a cycle
    keeps for the next must never give one thread's cycle another's jobs."""
    failures: list[BaseException] = []

    def run(records: list[Job]) -> None:
        rng = random.Random(len(records))
        try:
            for _ in range(100):
                read(rng.sample(records, rng.randrange(1, len(records))))
        except BaseException as e:  # reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=run, args=(s,)) for s in sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]
