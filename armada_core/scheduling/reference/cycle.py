"""One scheduling cycle, as the sequence of SEMANTICS.md's phases over one ``CycleState``."""

from __future__ import annotations

from ..model import SchedulingResult, Snapshot
from .eviction import evict
from .gangs import schedule_queued
from .inputs import sort_jobs
from .order import add_queued_gangs, lookback, next_item, order_queue
from .putback import return_evicted
from .queues import weigh_queues
from .state import QUEUED, CycleState


def reference_schedule(snapshot: Snapshot) -> SchedulingResult:
    """Run one scheduling cycle the slow, obvious way."""
    state = CycleState.build(snapshot)
    running, queued = sort_jobs(state)
    protected = weigh_queues(state, running, queued)
    items = evict(state, running, protected)
    add_queued_gangs(state, queued, items)
    for queue_items in items.values():
        order_queue(state, queue_items)
        lookback(state, queue_items)
    while (item := next_item(state, items)) is not None:
        if item.kind == QUEUED:
            schedule_queued(state, item)
        else:
            return_evicted(state, item)
    return outcomes(state)


def outcomes(state: CycleState) -> SchedulingResult:
    """Complete the result: tokens each queue's new jobs took, every queue's final cost."""
    result = state.result
    result.rate_consumed = {q: n for q, n in state.new_by_queue.items() if n}
    for q in state.queues:
        result.queue_costs[q] = state.costs.cost(state.alloc[q]) if q in state.alloc else 0.0
    return result
