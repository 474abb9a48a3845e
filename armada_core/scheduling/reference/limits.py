"""Limits a queued gang must pass before any member is placed (SEMANTICS.md, "Rate limits",
"Placing"): jobs per cycle, fraction of the cluster per cycle, global rate limit, queue rate
limit, per-queue class cap. Each is checked for the gang as a whole; the first that fails
names the reason. Evicted gangs going back are checked against the class cap only.
"""

from __future__ import annotations

from .. import reasons
from ..ratelimit import allowance
from .state import CycleState, Item, add


def first_limit(state: CycleState, item: Item) -> str | None:
    """The reason of the first limit the queued gang would exceed, or None."""
    return cycle_limit(state, item) or rate_limit(state, item) or class_limit(state, item)


def cycle_limit(state: CycleState, item: Item) -> str | None:
    """Jobs per cycle, then the fraction of each resource's cluster total per cycle."""
    cfg = state.snapshot.config
    cap = cfg.max_jobs_per_cycle
    if cap is not None and state.new_count + len(item.members) > cap:
        return reasons.MAX_JOBS_PER_CYCLE
    limits = cfg.max_fraction_per_cycle
    for i, d in enumerate(state.dims):
        if d in limits and state.new_total[i] + item.total[i] > limits[d] * state.totals[i]:
            return reasons.MAX_RESOURCES_PER_CYCLE
    return None


def rate_limit(state: CycleState, item: Item) -> str | None:
    """Token buckets, global then the queue's: the whole gang must fit in what is left."""
    snap, cfg = state.snapshot, state.snapshot.config
    size = len(item.members)
    overall = allowance(cfg.scheduling_rate, cfg.scheduling_burst, snap.rate_tokens)
    if overall is not None and state.new_count + size > overall:
        return reasons.GLOBAL_RATE_LIMIT
    own = allowance(
        cfg.queue_scheduling_rate,
        cfg.queue_scheduling_burst,
        snap.queue_rate_tokens.get(item.queue),
    )
    if own is not None and state.new_by_queue.get(item.queue, 0) + size > own:
        return reasons.QUEUE_RATE_LIMIT
    return None


def class_limit(state: CycleState, item: Item) -> str | None:
    """Per-queue class cap: what the queue holds of each class, with the gang, must stay
    within the class's fraction of the cluster."""
    by_class: dict[str, list[int]] = {}
    for j in item.members:
        have = by_class.get(j.priority_class, state.zeros())
        by_class[j.priority_class] = add(have, state.vec(j))
    for pc_name in sorted(by_class):
        limits = state.classes[pc_name].max_fraction_per_queue
        have = add(state.alloc_by_class[(item.queue, pc_name)], by_class[pc_name])
        for i, d in enumerate(state.dims):
            if d in limits and have[i] > limits[d] * state.totals[i]:
                return reasons.queue_class_limit(pc_name)
    return None
