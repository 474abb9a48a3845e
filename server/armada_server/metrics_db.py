"""The series /metrics reads from the database: the same value on every replica, whichever
leads and however often it changed (docs/metrics.md: aggregate them with max, not sum).

Every series that names a queue, pool or outcome lists every queue, pool and outcome the
database knows, at 0 where nothing is counted, so a dashboard's line drops to 0 instead of
vanishing. Reads are bounded: live jobs through the (state, queue) index on every scrape,
the jobs that ended since the last read once every `ended_refresh` seconds (EndedJobs), a
cycle's figures only when a new cycle was kept, node loads once every `load_refresh` seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, case, func, inspect, select, text

from armada_core.api import executor_pb2
from armada_core.jobs import JobState
from armada_core.scheduling.model import parse_quantity
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.changes import mark
from armada_server.storage.job_reads import JobReads
from armada_server.storage.nodes import NodeLoad, Nodes, decode_nodes

LIVE = {
    JobState.QUEUED: "queued",
    JobState.LEASED: "leased",
    JobState.PENDING: "pending",
    JobState.RUNNING: "running",
}
ENDED = {
    JobState.SUCCEEDED: "succeeded",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "cancelled",
    JobState.PREEMPTED: "preempted",
    JobState.REJECTED: "rejected",
}
#: The retention's index of ended jobs by when they ended (migration 0012).
FINISHED_INDEX = "ix_jobs_finished"
#: The cycle's per-queue figures (reporting/cycle.py's camelCase keys) and their series.
SHARES = {
    "fairShare": ("armada_queue_fair_share", "The queue's fair share in the latest cycle"),
    "adjustedFairShare": (
        "armada_queue_adjusted_fair_share",
        "Fair share capped at demand, the rest handed to others by weight, in the latest cycle",
    ),
    "share": ("armada_queue_actual_share", "DRF cost of what the queue held as the cycle began"),
    "demand": ("armada_queue_demand", "DRF cost of what the queue held plus what it had queued"),
}


@dataclass
class _Cached:
    """A value recomputed at most once every `every` seconds."""

    every: float
    read: Callable[[], Any]
    value: Any = None
    at: float = field(default=float("-inf"))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> Any:
        with self.lock:
            if time.monotonic() - self.at >= self.every:
                self.value = self.read()
                self.at = time.monotonic()
            return self.value


class EndedJobs:
    """Jobs that ended, by queue and outcome. Where the retention may delete ended jobs (its
    index ix_jobs_finished exists), a running total kept by change numbers
    (`storage/changes.py`): every row written after a read's snapshot stamps at least that
    read's mark, so the ended rows below a mark were all in its snapshot. A read adds to the
    total the ended rows from the previous read's mark up to its own (the first read, every
    one below its mark), and counts those at or above its mark afresh; jobs deleted later stay
    counted. An ended row is not written again, so each is added once, however long after
    the time it carries its end was committed (an executor's report carries when the run
    ended, and may reach the server long after). Without that index nothing deletes jobs, and
    a read counts them through ix_jobs_state_queue alone."""

    def __init__(self, jobs: JobReads) -> None:
        self.jobs = jobs
        self.engine = jobs.engine
        self.total: Tally[tuple[str, JobState]] = Tally()
        self.mark: int | None = None  # the previous read's
        self.running_total: bool | None = None  # known at the first read

    def read(self) -> dict[tuple[str, JobState], int]:
        if self.running_total is None:
            indexes = inspect(self.engine).get_indexes("jobs")
            self.running_total = any(i["name"] == FINISHED_INDEX for i in indexes)
        if not self.running_total:  # every state through the covering index, kept ended
            counts = self.jobs.count_jobs_by_queue_and_state()
            return {key: n for key, n in counts.items() if key[1] in ENDED}
        j = t.jobs.c
        ended = text(f"jobs.state IN ({', '.join(str(int(s)) for s in sorted(ENDED))})")
        with Transactions(self.engine).read(snapshot=True) as conn:
            now = mark(conn)
            settled = func.sum(case((j.changed < now, 1), else_=0))
            query = select(j.queue, j.state, settled, func.count()).where(ended)
            if self.mark is not None:
                query = query.where(j.changed >= self.mark)
            rows: Sequence[tuple[str, int, int | None, int]] = conn.execute(
                query.group_by(j.state, j.queue)
            ).all()
        self.mark = now
        recent: Tally[tuple[str, JobState]] = Tally()
        for queue, state, old, count in rows:
            key = (str(queue), JobState(state))
            self.total[key] += int(old or 0)
            recent[key] = int(count) - int(old or 0)
        return {key: self.total[key] + recent[key] for key in self.total.keys() | recent.keys()}


class DatabaseSeries(Collector):
    """Job counts, queue shares of the latest kept cycle, nodes and executors."""

    def __init__(
        self,
        jobs: JobReads,
        nodes: Nodes | None = None,
        *,
        ended_refresh: float = 15.0,
        load_refresh: float = 10.0,
    ) -> None:
        self.jobs = jobs
        self.engine: Engine = jobs.engine
        self.nodes = nodes
        self.ended = _Cached(ended_refresh, EndedJobs(jobs).read)
        self.loads = _Cached(load_refresh, self._node_loads)
        self._cycle: tuple[int, dict[str, Any]] = (0, {})
        # Executor -> its latest report of nodes, and what the node series need of it.
        self._summaries: dict[str, tuple[bytes, _ExecutorNodes]] = {}
        # The queues the latest scrape found (the series this process counts list them too).
        self.known_queues: list[str] = []

    def collect(self) -> Iterator[Metric]:
        queues = self.known_queues = self.queue_names()
        yield from self._job_counts(queues)
        yield from self._shares(queues)
        if self.nodes is not None:
            yield from self._node_series()

    def queue_names(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(conn.execute(select(t.queues.c.name)).scalars())

    def _count_states(self, states: Iterable[JobState]) -> dict[tuple[str, JobState], int]:
        j = t.jobs.c
        with self.engine.connect() as conn:
            rows: Sequence[tuple[str, int, int]] = conn.execute(
                select(j.queue, j.state, func.count())
                .where(j.state.in_([int(s) for s in states]))
                .group_by(j.state, j.queue)  # the order of ix_jobs_state_queue
            ).all()
        return {(str(q), JobState(s)): int(n) for q, s, n in rows}

    def _job_counts(self, queues: list[str]) -> Iterator[Metric]:
        live = self._count_states(LIVE)
        gauge = GaugeMetricFamily(
            "armada_jobs", "Jobs by queue and state (not finished)", labels=["queue", "state"]
        )
        ended: dict[tuple[str, JobState], int] = self.ended.get()
        counter = CounterMetricFamily(
            "armada_jobs_ended",
            "Jobs that ended, by queue and outcome (read from the database: the same on "
            "every replica)",
            labels=["queue", "outcome"],
        )
        names = sorted(set(queues) | {q for q, _ in live} | {q for q, _ in ended})
        for queue in names:
            for state, label in LIVE.items():
                gauge.add_metric([queue, label], live.get((queue, state), 0))
            for state, label in ENDED.items():
                counter.add_metric([queue, label], ended.get((queue, state), 0))
        yield gauge
        yield counter

    def _latest_cycle(self) -> dict[str, Any]:
        """The latest kept cycle's record (read again only when a newer one was kept)."""
        c = t.scheduling_cycles.c
        with self.engine.connect() as conn:
            latest = conn.execute(select(func.max(c.id))).scalar()
            if latest is None:
                return {}
            if int(latest) != self._cycle[0]:
                report = conn.execute(select(c.report).where(c.id == latest)).scalar()
                self._cycle = (int(latest), json.loads(report) if report else {})
        return self._cycle[1]

    def _shares(self, queues: list[str]) -> Iterator[Metric]:
        record = self._latest_cycle()
        figures: dict[str, dict[str, Any]] = record.get("queues", {})
        pools = sorted(record.get("pools", {})) or [""]
        cycle = GaugeMetricFamily(
            "armada_scheduling_latest_cycle",
            "The latest kept scheduling cycle: its number, start (unix seconds) and duration",
            labels=["figure"],
        )
        if record:
            started = _unix(record.get("started", ""))
            cycle.add_metric(["number"], float(record.get("cycle", 0)))
            cycle.add_metric(["started_seconds"], started)
            cycle.add_metric(["duration_seconds"], float(record.get("seconds", 0.0)))
        yield cycle
        for key, (name, doc) in SHARES.items():
            family = GaugeMetricFamily(name, doc, labels=["queue", "pool"])
            for queue in sorted(set(queues) | figures.keys()):
                value = float(figures.get(queue, {}).get(key, 0.0))
                for pool in pools:  # one cycle weighs every pool together
                    family.add_metric([queue, pool], value)
            yield family

    def _node_loads(self) -> dict[tuple[str, str], NodeLoad]:
        assert self.nodes is not None
        return self.nodes.node_loads()

    def _node_series(self) -> Iterator[Metric]:
        """Per pool: nodes, their capacity and what runs hold of it. An executor's report is
        decoded again only when it changed: a scrape of 10,000 nodes decoded every one of
        them (about 0.1 s of the server's CPU per scrape)."""
        assert self.nodes is not None
        reports, cordons = self.nodes.reported_nodes()
        loads: dict[tuple[str, str], NodeLoad] = self.loads.get()
        count: dict[tuple[str, str], int] = defaultdict(int)
        capacity: dict[tuple[str, str], float] = defaultdict(float)
        allocated: dict[tuple[str, str], float] = defaultdict(float)
        seen: dict[tuple[str, str], float] = {}
        summaries: dict[str, tuple[bytes, _ExecutorNodes]] = {}
        for report in reports:
            kept = self._summaries.get(report.executor)
            if kept is None or kept[0] != report.nodes:
                kept = (report.nodes, _ExecutorNodes.of(decode_nodes(report.nodes)))
            summaries[report.executor] = kept
            if not report.pool:
                continue
            pool, nodes = report.pool, kept[1]
            seen[(report.executor, pool)] = report.last_seen.timestamp()
            count[(pool, "all")] += nodes.count
            count.setdefault((pool, "cordoned"), 0)  # counted below; listed at 0 if none
            count[(pool, "unschedulable")] += nodes.unschedulable
            for resource, amount in nodes.capacity.items():
                capacity[(pool, resource)] += amount
        self._summaries = summaries
        pools = {r.executor: r.pool for r in reports if r.pool}
        for executor, name in cordons:  # those of nodes no executor reports are left out
            of = pools.get(executor)
            if of is not None and name in summaries[executor][1].names:
                count[(of, "cordoned")] += 1
        for (executor, name), load in loads.items():
            of = pools.get(executor)
            if of is None or name not in summaries[executor][1].names:
                continue
            for resource, amount in load.requests.items():
                milli = 1000.0 if resource == "cpu" else 1.0
                allocated[(of, resource)] += amount / milli
        for pool, resource in capacity:
            allocated.setdefault((pool, resource), 0.0)
        yield _family(
            "armada_nodes", "Nodes per pool: all, cordoned, unschedulable", ["pool", "state"], count
        )
        yield _family(
            "armada_node_capacity",
            "What nodes may use per pool and resource (cpu in cores, the rest in base units)",
            ["pool", "resource"],
            capacity,
        )
        yield _family(
            "armada_node_allocated",
            "What runs holding nodes request, per pool and resource (cpu in cores)",
            ["pool", "resource"],
            allocated,
        )
        yield _family(
            "armada_executor_last_seen_seconds",
            "When each executor last synced (unix seconds)",
            ["executor", "pool"],
            seen,
        )


@dataclass(frozen=True)
class _ExecutorNodes:
    """What the node series need of one executor's report of its nodes."""

    count: int
    names: frozenset[str]
    unschedulable: int
    capacity: dict[str, float]

    @classmethod
    def of(cls, nodes: Iterable[executor_pb2.Node]) -> _ExecutorNodes:
        names: set[str] = set()
        count = unschedulable = 0
        capacity: dict[str, float] = defaultdict(float)
        for node in nodes:
            count += 1
            names.add(node.name)
            unschedulable += int(node.unschedulable)
            for resource, quantity in node.allocatable.items():
                capacity[resource] += _amount(resource, quantity)
        return cls(count, frozenset(names), unschedulable, dict(capacity))


def _family(
    name: str, doc: str, labels: list[str], values: dict[tuple[str, str], Any]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def _amount(resource: str, quantity: str) -> float:
    """A node's allocatable quantity in cores (cpu) or base units; 0 when unreadable."""
    try:
        if resource == "cpu":
            return parse_quantity(quantity, milli=True) / 1000.0
        return float(parse_quantity(quantity))
    except ValueError:
        return 0.0


def _unix(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0
