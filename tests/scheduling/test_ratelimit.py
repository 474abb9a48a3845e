"""Token buckets carried between cycles by the caller of the pure scheduler."""

from __future__ import annotations

from armada_core.scheduling import Queue, SchedulingConfig, Snapshot
from armada_core.scheduling.fast import fast_schedule
from armada_core.scheduling.ratelimit import RateBuckets, allowance, burst_of

from .helpers import PRIORITY_CLASSES, jobs, node

BOTH = SchedulingConfig(
    scheduling_rate=2.0, scheduling_burst=4, queue_scheduling_rate=1.0, queue_scheduling_burst=2
)


def test_burst_defaults_to_the_rate_rounded_up() -> None:
    assert burst_of(0.1, None) == 1
    assert burst_of(2.5, None) == 3
    assert burst_of(2.5, 10) == 10


def test_allowance_is_whole_tokens_up_to_the_burst() -> None:
    assert allowance(None, None, 0.0) is None
    assert allowance(1.0, 3, None) == 3
    assert allowance(1.0, 3, 2.9) == 2
    assert allowance(1.0, 3, 50.0) == 3


def test_buckets_start_full_refill_with_time_and_cap_at_the_burst() -> None:
    buckets = RateBuckets()
    assert buckets.refill(BOTH, now=100.0) == (None, {})  # full
    buckets.consume(BOTH, {"A": 2, "B": 1})
    assert (buckets.tokens, buckets.queues) == (1.0, {"A": 0.0, "B": 1.0})
    tokens, queues = buckets.refill(BOTH, now=100.5)
    assert tokens == 2.0 and queues == {"A": 0.5, "B": 1.5}
    tokens, queues = buckets.refill(BOTH, now=110.0)
    assert tokens == 4.0 and queues == {}  # full buckets are forgotten


def test_turning_a_limit_off_forgets_its_bucket() -> None:
    buckets = RateBuckets()
    buckets.refill(BOTH, now=0.0)
    buckets.consume(BOTH, {"A": 2})
    assert buckets.refill(SchedulingConfig(), now=0.0) == (None, {})


def test_cycles_share_the_bucket_through_the_snapshot() -> None:
    """What a cycle consumed is gone next cycle, and comes back at the rate."""
    world = tuple(jobs("a", 6, "A"))
    buckets = RateBuckets()
    leased: list[int] = []
    done: set[str] = set()
    for now in (0.0, 0.0, 0.5, 1.0, 10.0):
        tokens, queues = buckets.refill(BOTH, now)
        queued = tuple(j for j in world if j.id not in done)
        snap = Snapshot(
            (Queue("A"),),
            PRIORITY_CLASSES,
            (node("n0", cpu=16),),
            queued,
            BOTH,
            now=now,
            rate_tokens=tokens,
            queue_rate_tokens=queues,
        )
        result = fast_schedule(snap)
        buckets.consume(BOTH, result.rate_consumed)
        done |= set(result.scheduled)
        leased.append(len(result.scheduled))
    assert leased == [2, 0, 0, 1, 2]
