"""Scheduling rate limits: token buckets, global and per queue.

The scheduler is a pure function of its snapshot, so it cannot keep a bucket itself: the
caller (the server's scheduling loop) keeps a ``RateBuckets`` between cycles, refills it to
the cycle's time for the snapshot (``Snapshot.rate_tokens``, ``Snapshot.queue_rate_tokens``),
and takes out what the cycle consumed (``SchedulingResult.rate_consumed``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from .model import SchedulingConfig


def burst_of(rate: float, burst: int | None) -> int:
    """A bucket's size: the configured burst, or the rate rounded up (at least 1)."""
    if burst is not None:
        return burst
    return max(1, math.ceil(rate))


def allowance(rate: float | None, burst: int | None, tokens: float | None) -> int | None:
    """Whole jobs a bucket lets through now (None: no limit); a missing level is full."""
    if rate is None:
        return None
    size = burst_of(rate, burst)
    level = size if tokens is None else min(float(size), tokens)
    return max(0, math.floor(level))


@dataclass
class RateBuckets:
    """The buckets' state between cycles: tokens at the time they were last refilled.

    A queue without an entry has a full bucket, so only queues that scheduled recently take
    memory."""

    tokens: float | None = None
    queues: dict[str, float] = field(default_factory=dict)
    at: float | None = None

    def refill(self, config: SchedulingConfig, now: float) -> tuple[float | None, dict[str, float]]:
        """Levels at ``now`` (for the snapshot): each bucket gains ``rate`` tokens per second
        since the last cycle, up to its size."""
        elapsed = 0.0 if self.at is None else max(0.0, now - self.at)
        self.at = now
        if config.scheduling_rate is None:
            self.tokens = None
        elif self.tokens is not None:
            size = burst_of(config.scheduling_rate, config.scheduling_burst)
            self.tokens = min(float(size), self.tokens + config.scheduling_rate * elapsed)
        if config.queue_scheduling_rate is None:
            self.queues = {}
        else:
            rate = config.queue_scheduling_rate
            full = float(burst_of(rate, config.queue_scheduling_burst))
            levels = {q: min(full, t + rate * elapsed) for q, t in self.queues.items()}
            self.queues = {q: t for q, t in levels.items() if t < full}
        return self.tokens, dict(self.queues)

    def consume(self, config: SchedulingConfig, consumed: Mapping[str, int]) -> None:
        """Take out the tokens a cycle used (its new jobs, per queue)."""
        if config.scheduling_rate is not None:
            size = burst_of(config.scheduling_rate, config.scheduling_burst)
            level = float(size) if self.tokens is None else self.tokens
            self.tokens = max(0.0, level - sum(consumed.values()))
        if config.queue_scheduling_rate is not None:
            size = burst_of(config.queue_scheduling_rate, config.queue_scheduling_burst)
            for queue, used in consumed.items():
                if used:
                    level = self.queues.get(queue, float(size))
                    self.queues[queue] = max(0.0, level - used)
