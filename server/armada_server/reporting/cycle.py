"""A scheduling cycle's record for the reports, built from what the cycle itself used and
decided (its snapshot and its SchedulingResult), never computed a second time.

One pass over the snapshot's jobs counts them per queue and finds the queues of the jobs the
cycle decided about; everything else is read off the result, so the record costs a small part
of the cycle it describes (benchmarks/README.md).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

from armada_core import scheduling as s
from armada_server.reporting.limits import limit_of, settings_of
from armada_server.scheduling.snapshot import Placement

#: How a preemption's reason reads when the scheduler gave none of its own.
URGENCY = "urgency: made room for a job of a higher priority class"
FAIR_SHARE = "fair share: made room for a job of a queue below its fair share"
NOTHING_PLACED = "fair share or class caps: no job was placed in its room"


def _preemption_kind(
    job: s.Job,
    own: Mapping[str, str],
    preempting: Mapping[str, str],
    jobs: Mapping[str, s.Job],
    urgency: Mapping[str, int],
) -> str:
    """Why the cycle preempted `job`: its own reason, else by the job it made room for."""
    if job.id in own:
        return own[job.id]
    placed = jobs.get(preempting.get(job.id, ""))
    if placed is None:
        return NOTHING_PLACED
    higher = urgency.get(placed.priority_class, 0) > urgency.get(job.priority_class, 0)
    return URGENCY if higher else FAIR_SHARE


_QUEUE = attrgetter("queue")
_QUEUE_NODE = attrgetter("queue", "node")


@dataclass
class _Tally:
    """The cycle's jobs counted per queue and pool, in one pass over the snapshot."""

    queued: Counter[str] = field(default_factory=Counter)
    running: Counter[str] = field(default_factory=Counter)
    decided: dict[str, s.Job] = field(default_factory=dict)  # jobs the cycle decided about
    per_queue: dict[str, Counter[str]] = field(default_factory=dict)  # what -> jobs
    by_pool: dict[str, Counter[tuple[str, str]]] = field(default_factory=dict)  # (pool, what)
    pools: dict[str, dict[str, int]] = field(default_factory=dict)  # pool -> what -> count
    preemptions: Counter[str] = field(default_factory=Counter)  # why -> jobs

    def count_jobs(
        self, snapshot: s.Snapshot, placements: Mapping[str, Placement], decided: set[str]
    ) -> None:
        """Jobs per queue (queued, running) and running jobs per pool. The passes over every
        job are C-level counts and one comprehension; per-job Python work is for running and
        decided jobs only, which the cluster's size bounds, not the backlog's."""
        for p in placements.values():
            pool = self.pools.setdefault(p.pool, {"nodes": 0, "scheduled": 0, "preempted": 0})
            pool["nodes"] += 1
        jobs = snapshot.jobs
        placed = [j for j in jobs if j.node is not None]
        self.running = Counter(map(_QUEUE, placed))
        self.queued = Counter(map(_QUEUE, jobs))
        self.queued.subtract(self.running)
        # Per (queue, node) first, at C level: the loop below goes over the distinct pairs,
        # a few per node, not over every running job.
        for (queue, node), count in Counter(map(_QUEUE_NODE, placed)).items():
            if (at := placements.get(node)) is not None:
                self.by_pool.setdefault(queue, Counter())[(at.pool, "running")] += count
        if decided:
            self.decided = {j.id: j for j in jobs if j.id in decided}

    def add(self, job: s.Job, what: str, where: Placement | None) -> None:
        """One decision of the cycle: the job `what` ("scheduled", "preempted") `where`."""
        self.per_queue.setdefault(job.queue, Counter())[what] += 1
        if where is not None:
            self.pools[where.pool][what] += 1
            self.by_pool.setdefault(job.queue, Counter())[(where.pool, what)] += 1

    def queue_rows(self, result: s.SchedulingResult) -> dict[str, dict[str, Any]]:
        """Per queue: the cycle's figures of it, its jobs and what the cycle did with them."""
        rows = {}
        for name in sorted(self.queued.keys() | self.running.keys() | result.queue_figures.keys()):
            figures = result.queue_figures.get(name)
            decisions = self.per_queue.get(name, Counter())
            rows[name] = {
                **(_camel(asdict(figures)) if figures is not None else {}),
                "costAfter": result.queue_costs.get(name, 0.0),
                "queued": self.queued[name],
                "running": self.running[name],
                "scheduled": decisions["scheduled"],
                "preempted": decisions["preempted"],
                "pools": _pools_of(self.by_pool.get(name, Counter())),
            }
        return rows


def cycle_record(
    *,
    cycle: int,
    started_at: datetime,
    seconds: float,
    snapshot: s.Snapshot,
    placements: Mapping[str, Placement],
    result: s.SchedulingResult,
    preempting: Mapping[str, str],
) -> dict[str, Any]:
    """The cycle's figures as the reports keep them (JSON-ready)."""
    tally = _Tally()
    tally.count_jobs(
        snapshot, placements, {*result.scheduled, *result.preempted, *preempting.values()}
    )
    jobs = tally.decided
    for job_id, node in result.scheduled.items():
        if job_id in jobs:
            tally.add(jobs[job_id], "scheduled", placements.get(node))
    urgency = {c.name: c.priority for c in snapshot.priority_classes}
    for job_id in result.preempted:
        if (victim := jobs.get(job_id)) is not None:
            tally.add(victim, "preempted", placements.get(victim.node or ""))
            why = _preemption_kind(victim, result.preempt_reasons, preempting, jobs, urgency)
            tally.preemptions[why] += 1
    waiting = {reason: len(ids) for reason, ids in result.unscheduled.groups().items() if ids}
    bound: Counter[str] = Counter()
    for reason, count in waiting.items():
        if (limit := limit_of(reason)) is not None:
            bound[limit] += count
    return {
        "cycle": cycle,
        "started": started_at.isoformat(),
        "seconds": seconds,
        "considered": {"queued": tally.queued.total(), "running": tally.running.total()},
        "scheduled": len(result.scheduled),
        "preempted": len(result.preempted),
        "failed": len(result.failed),
        "pools": tally.pools,
        "capacity": result.capacity,
        "preemptions": dict(tally.preemptions.most_common()),
        "waiting": dict(sorted(waiting.items(), key=lambda kv: (-kv[1], kv[0]))),
        "limits": {
            "bound": dict(bound.most_common()),
            "rateTokens": snapshot.rate_tokens,
            "settings": settings_of(snapshot.config),
        },
        "queues": tally.queue_rows(result),
    }


def _camel(values: Mapping[str, Any]) -> dict[str, Any]:
    """Keys in camelCase, as the REST gateway's JSON has them."""
    return {re.sub(r"_(.)", lambda m: m.group(1).upper(), k): v for k, v in values.items()}


def _pools_of(counts: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """A queue's jobs per pool: running at the cycle's start, scheduled and preempted by it."""
    out: dict[str, dict[str, int]] = {}
    for (pool, what), n in sorted(counts.items()):
        out.setdefault(pool, {"running": 0, "scheduled": 0, "preempted": 0})[what] = n
    return out


def dumps(record: Mapping[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), sort_keys=True)
