"""What a simulation saw, step by step: the decisions (leases, preemptions), each job's wait,
and at every step each queue's share of the cluster, its fair share and the utilisation.

Shares are dominant-resource shares (the largest of a queue's fractions of the cluster's CPU,
memory and GPUs) of the runs its executor holds; a queue's fair share is its weight over the
active queues' (those with jobs queued or running), capped at what it asks for, the rest
handed to the others by weight (`adjusted_fair_shares`, as the scheduler computes it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from armada_core.api import executor_pb2
from armada_core.scheduling.fairness import adjusted_fair_shares
from armada_core.scheduling.model import parse_quantity
from armada_server.executors.nodes import GPU
from armada_server.simulation.jobs import Demand


def capacity_of(nodes: Sequence[executor_pb2.Node]) -> dict[str, int]:
    """The cluster's total of each resource, in the units of `Demand`."""
    total: dict[str, int] = defaultdict(int)
    for node in nodes:
        for name, value in node.allocatable.items():
            if name == GPU:
                total[name] += int(value) * 1000
            elif name in ("cpu", "memory"):
                total[name] += parse_quantity(value, milli=name == "cpu")
    return dict(total)


@dataclass
class JobRecord:
    queue: str
    name: str  # the arrival's client id (a member's, for gangs)
    submitted: float
    leased: float | None = None  # first lease
    runs: int = 0
    preemptions: int = 0
    succeeded: bool = False


@dataclass(frozen=True)
class Decision:
    step: int
    time: float
    kind: str  # "leased" or "preempted"
    job: str  # the job's name in the workload
    node: str


# No generated repr: asyncio.run formats the main task's result (this) when it restores its
# signal handler: a third of a second for a day's recording (every job, every decision).
@dataclass(repr=False)
class Recording:
    """Filled by the driver; read by report.py."""

    queues: Mapping[str, float]  # name -> weight
    capacity: Mapping[str, int]
    period: float
    jobs: dict[str, JobRecord] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    shares: dict[str, list[float]] = field(default_factory=dict)
    fair: dict[str, list[float]] = field(default_factory=dict)
    queued: dict[str, list[int]] = field(default_factory=dict)
    utilisation: dict[str, list[float]] = field(default_factory=dict)
    cycles: int = 0
    end: float = 0.0

    def __post_init__(self) -> None:
        for q in self.queues:
            self.shares[q], self.fair[q], self.queued[q] = [], [], []
        for r in self.capacity:
            self.utilisation[r] = []

    def dominant(self, requests: Mapping[str, int]) -> float:
        return max(
            (v / self.capacity[r] for r, v in requests.items() if self.capacity.get(r)),
            default=0.0,
        )

    def sample(
        self,
        time: float,
        running: Mapping[str, Mapping[str, int]],
        waiting: Mapping[str, Mapping[str, int]],
        waiting_jobs: Mapping[str, int],
    ) -> None:
        """One point of every series: per queue what its runs hold (`running`) and what its
        queued jobs ask (`waiting`), as resource totals."""
        self.times.append(time)
        shares = {q: self.dominant(running.get(q, {})) for q in self.queues}
        demands: dict[str, float] = {}
        for q in self.queues:
            total = dict(running.get(q, {}))
            for r, v in waiting.get(q, {}).items():
                total[r] = total.get(r, 0) + v
            demands[q] = min(1.0, self.dominant(total))
        active = {q: w for q, w in self.queues.items() if demands[q] > 0}
        fair = adjusted_fair_shares(active, {q: demands[q] for q in active}) if active else {}
        for q in self.queues:
            self.shares[q].append(shares[q])
            self.fair[q].append(fair.get(q, 0.0))
            self.queued[q].append(waiting_jobs.get(q, 0))
        used: dict[str, int] = defaultdict(int)
        for requests in running.values():
            for r, v in requests.items():
                used[r] += v
        for r, cap in self.capacity.items():
            self.utilisation[r].append(used[r] / cap if cap else 0.0)


class Holdings:
    """Resource totals per queue of a set of jobs (those running, those queued)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Demand] = {}
        self.totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, job: str, demand: Demand) -> None:
        if job in self.jobs:
            return
        self.jobs[job] = demand
        self.counts[demand.queue] += 1
        totals = self.totals[demand.queue]
        for r, v in demand.requests.items():
            totals[r] += v

    def remove(self, job: str) -> Demand | None:
        demand = self.jobs.pop(job, None)
        if demand is not None:
            self.counts[demand.queue] -= 1
            totals = self.totals[demand.queue]
            for r, v in demand.requests.items():
                totals[r] -= v
        return demand

    def __contains__(self, job: object) -> bool:
        return job in self.jobs

    def __len__(self) -> int:
        return len(self.jobs)
