"""Fair share per queue as the latest scheduling cycle weighed it: the web UI's chart samples
it, and GetJobDetails tells a waiting job where its queue stands (and, after that, its place
in the queue's line, read from storage when asked).

A sample is the latest kept cycle's own figures (reporting/cycle.py, from the cycle's
SchedulingResult): each queue's weight (1 / priority factor), fair share among the active
queues (those with queued or running jobs), adjusted fair share (fair share capped at demand,
the rest handed to the others), its actual share (the cost of what it held, the dominant
resource's share, which is what the scheduler compares) and per resource what it held over the
capacity the cycle counted. Nothing is computed again beside the cycle.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from armada_server.storage.cycle_reports import CycleReports
from armada_server.storage.places import ordinal
from armada_server.storage.queues import Queues


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


def compute(cycles: CycleReports, queues: Queues) -> Sample:
    """One sample: the latest kept cycle's figures for every queue (zeros for a queue the
    cycle did not weigh). Blocking: reads the database (two small reads)."""
    kept = cycles.cycles(1)
    record: dict[str, Any] = json.loads(kept[0].report) if kept else {}
    when = kept[0].started_at.timestamp() if kept else time.time()
    capacity: dict[str, int] = record.get("capacity", {})
    weighed: dict[str, dict[str, Any]] = record.get("queues", {})
    out = {}
    for q in queues.list_queues():
        f = weighed.get(q.name, {})
        held: dict[str, int] = f.get("held", {})
        out[q.name] = QueueShare(
            name=q.name,
            weight=f.get("weight", 1.0 / (q.priority_factor or 1.0)),
            cordoned=q.cordoned,
            active="fairShare" in f,
            fair_share=f.get("fairShare", 0.0),
            adjusted_fair_share=f.get("adjustedFairShare", 0.0),
            share=f.get("share", 0.0),
            demand=f.get("demand", 0.0),
            shares={d: held.get(d, 0) / c for d, c in capacity.items() if c},
            running=f.get("running", 0),
            queued=f.get("queued", 0),
        )
    return Sample(when, capacity, dict(sorted(out.items())))


# A sample reads the latest cycle's row; the pause still keeps a slow database's reads from
# taking the server's time from submissions and scheduling.
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
        cycles: CycleReports,
        queues: Queues,
        max_age: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cycles = cycles
        self.queues = queues
        self.max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._sample: Sample | None = None
        self._until = 0.0

    def get(self) -> Sample:
        """A sample young enough. Blocking: reads the database when the last one is too old;
        callers that ask meanwhile wait for that one rather than read again."""
        with self._lock:
            started = self._clock()
            if self._sample is None or started >= self._until:
                self._sample = compute(self.cycles, self.queues)
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


def place_in_line(place: int, length: int) -> str:
    """A waiting job's place in its queue's line and how long the line is, both read when
    asked in one snapshot (storage/places.py: a gang counts once): "3rd in line of 120
    queued". Said after the queue's standing, so that clients which take everything from
    "; queue " on as read when asked (armada_core.client.lifecycle) do not take a moving
    place for a new reason from the scheduler."""
    return f"{ordinal(place)} in line of {length} queued"
