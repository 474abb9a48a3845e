"""Fair share per queue, from what the scheduler reads: the web UI's chart samples it, and
GetJobDetails tells a waiting job where its queue stands.

Each sample reads the scheduler's state (queues, executors' nodes, queued and running jobs)
and computes, as the scheduler does with armada_core.scheduling.fairness: each queue's weight
(1 / priority factor), fair share among the active queues (those with queued or running
jobs), adjusted fair share (fair share capped at demand, the rest handed to the others), and
its actual share: per resource (requests of running jobs / capacity of schedulable nodes) and
the dominant one, which is what the scheduler compares.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from armada_core.api import submit_pb2
from armada_core.scheduling import Resources
from armada_core.scheduling.fairness import CostModel, adjusted_fair_shares, fair_shares
from armada_core.scheduling.model import DEFAULT_RESOURCE_ORDER
from armada_server.config import ServerConfig
from armada_server.storage.places import ordinal
from armada_server.storage.scheduling_reads import QueuedJob, RunningJob, SchedulingReads


@dataclass(frozen=True)
class QueueShare:
    name: str
    weight: float
    cordoned: bool
    active: bool
    fair_share: float
    adjusted_fair_share: float
    share: float  # dominant share of running jobs' requests
    demand: float  # dominant share of running + queued requests
    shares: Mapping[str, float] = field(default_factory=dict)  # per resource
    running: int = 0
    queued: int = 0


@dataclass(frozen=True)
class Sample:
    time: float
    capacity: Mapping[str, int]  # schedulable capacity per resource (cpu in millicores)
    queues: Mapping[str, QueueShare]


class Shapes:
    """Parsed resource lists by their text: few distinct shapes, parsing is the cost."""

    def __init__(self) -> None:
        self._cache: dict[tuple[tuple[str, str], ...], Resources] = {}
        self._by_spec: dict[bytes, Resources] = {}

    def __call__(self, values: Mapping[str, str]) -> Resources:
        key = tuple(sorted(values.items()))
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) > 10_000:
                self._cache.clear()
            try:
                found = Resources.from_k8s(dict(key))
            except (ValueError, ArithmeticError):
                found = Resources()
            self._cache[key] = found
        return found

    def of_job(self, job: QueuedJob | RunningJob) -> Resources:
        """A job's requests; jobs whose specs differ only in their ids are parsed once."""
        key = job.spec_key
        if key is None:
            return self(_requests(job.spec))
        found = self._by_spec.get(key)
        if found is None:
            if len(self._by_spec) > 10_000:
                self._by_spec.clear()
            found = self._by_spec[key] = self(_requests(job.spec))
        return found


def _requests(spec: submit_pb2.Job) -> Mapping[str, str]:
    return {k: v.string for k, v in spec.scheduling_resource_requirements.requests.items()}


def compute(
    reads: SchedulingReads,
    config: ServerConfig,
    shapes: Shapes | None = None,
    now: datetime | None = None,
) -> Sample:
    """One sample. Blocking: reads the database."""
    shapes = shapes or Shapes()
    now = now or datetime.now(UTC)
    state = reads.scheduling_state(executor_timeout=config.lease_timeout, now=now)
    capacity: dict[str, int] = {}
    live_nodes: set[str] = set()
    for executor in state.executors:
        for node in executor.nodes:
            live_nodes.add(f"{executor.id}/{node.name}")
            if node.unschedulable:
                continue
            for name, amount in shapes(dict(node.allocatable)).items():
                capacity[name] = capacity.get(name, 0) + amount
    names = {q.name for q in state.queues}
    alloc: dict[str, dict[str, int]] = {q: {} for q in names}
    demand: dict[str, dict[str, int]] = {q: {} for q in names}
    running = dict.fromkeys(names, 0)
    queued = dict.fromkeys(names, 0)
    for job in state.running:
        if job.queue not in names or job.node not in live_nodes:
            continue
        running[job.queue] += 1
        for name, amount in shapes.of_job(job).items():
            alloc[job.queue][name] = alloc[job.queue].get(name, 0) + amount
            demand[job.queue][name] = demand[job.queue].get(name, 0) + amount
    for waiting in state.queued:
        if waiting.queue not in names:
            continue
        queued[waiting.queue] += 1
        for name, amount in shapes.of_job(waiting).items():
            demand[waiting.queue][name] = demand[waiting.queue].get(name, 0) + amount
    known = [n for n in DEFAULT_RESOURCE_ORDER if n in capacity]
    dims = tuple(known + sorted(set(capacity) - set(known)))
    costs = CostModel.build(dims, [capacity[d] for d in dims], {})

    def cost(values: Mapping[str, int]) -> float:
        return costs.cost([values.get(d, 0) for d in dims])

    by_name = {q.name: q for q in state.queues}
    weights = {q: 1.0 / (by_name[q].priority_factor or 1.0) for q in names}
    active = sorted(q for q in names if running[q] or queued[q])
    plain = fair_shares({q: weights[q] for q in active}) if active else {}
    adjusted = (
        adjusted_fair_shares({q: weights[q] for q in active}, {q: cost(demand[q]) for q in active})
        if active
        else {}
    )
    queues = {}
    for q in sorted(names):
        queues[q] = QueueShare(
            name=q,
            weight=weights[q],
            cordoned=by_name[q].cordoned,
            active=q in plain,
            fair_share=plain.get(q, 0.0),
            adjusted_fair_share=adjusted.get(q, 0.0),
            share=cost(alloc[q]),
            demand=cost(demand[q]),
            shares={d: alloc[q].get(d, 0) / capacity[d] for d in dims if capacity[d]},
            running=running[q],
            queued=queued[q],
        )
    return Sample(now.timestamp(), capacity, queues)


# A sample reads every queued and running job: with a million queued it takes seconds, and the
# sampler must not take the server's time from submissions and scheduling.
MAX_BUSY_FRACTION = 0.1


def pause(period: float, took: float) -> float:
    """Seconds until the next sample: the rest of the period, and long enough that sampling
    keeps to MAX_BUSY_FRACTION of one core."""
    return max(0.5, period - took, took * (1 / MAX_BUSY_FRACTION - 1))


class RecentShares:
    """The latest sample for readers that ask often (GetJobDetails, polled for every waiting
    job): computed on demand, then reused for `max_age` seconds, or longer when computing
    took long, so that these reads too keep to MAX_BUSY_FRACTION of one core."""

    def __init__(
        self,
        reads: SchedulingReads,
        config: ServerConfig,
        max_age: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reads = reads
        self.config = config
        self.max_age = max_age
        self._clock = clock
        self._shapes = Shapes()
        self._lock = threading.Lock()
        self._sample: Sample | None = None
        self._until = 0.0

    def get(self) -> Sample:
        """A sample young enough. Blocking: reads the database when the last one is too old;
        callers that ask meanwhile wait for that one rather than read again."""
        with self._lock:
            started = self._clock()
            if self._sample is None or started >= self._until:
                self._sample = compute(self.reads, self.config, self._shapes)
                done = self._clock()
                self._until = done + pause(self.max_age, done - started)
            return self._sample


def place_in_fair_share(sample: Sample, queue: str) -> str:
    """Where `queue` stands: "queue <name> at <x.x>x its fair share", x being its dominant
    share (the scheduler's cost of what it runs) over its adjusted fair share; 0.0x when it
    has no share (nothing running, or not active)."""
    found = sample.queues.get(queue)
    ratio = 0.0
    if found is not None and found.adjusted_fair_share > 0:
        ratio = found.share / found.adjusted_fair_share
    return f"queue {queue} at {ratio:.1f}x its fair share"


def place_in_line(sample: Sample, queue: str, place: int) -> str:
    """A waiting job's place in its queue's line (storage/places.py: a gang counts once) and
    how many jobs the queue has queued: "3rd in line of 120 queued". The place is read when
    asked; the count is the sample's (a few seconds old), never less than the place. Said
    after the queue's standing, so that clients which take everything from "; queue " on as
    read when asked (armada_core.client.lifecycle) do not take a moving place for a new
    reason from the scheduler."""
    found = sample.queues.get(queue)
    queued = max(found.queued if found is not None else 0, place)
    return f"{ordinal(place)} in line of {queued} queued"
