"""One scheduling cycle, phase by phase, in the order of SEMANTICS.md."""

from __future__ import annotations

import time

from ...gcpause import gc_paused
from ..model import SchedulingResult, Snapshot
from .eviction import evict, load_nodes, nothing_moves
from .inputs import index_for_placing, index_inputs
from .limits import allowances
from .loop import place_all
from .order import order_queues, queued_work
from .outcomes import finish
from .queues import charge_holders, weigh_queues
from .state import CycleState


def fast_schedule(snapshot: Snapshot, timings: dict[str, float] | None = None) -> SchedulingResult:
    """Run one scheduling cycle; decisions are identical to ``reference_schedule``.

    ``timings``, when given, receives the seconds spent in each phase. The garbage collector
    is paused meanwhile: the cycle's short-lived objects would otherwise make it traverse
    every job of the snapshot several times.
    """
    with gc_paused():
        # The cycle's state is gone before the collector resumes: its first collection then
        # looks at the result alone, not at every job's columns still held.
        return _schedule(snapshot, timings)


def _schedule(snapshot: Snapshot, timings: dict[str, float] | None) -> SchedulingResult:
    start = time.perf_counter()
    state, decided = prepare(snapshot)
    prepared = time.perf_counter()
    if not decided:
        place_all(state)
    placed = time.perf_counter()
    result = state.result if decided else finish(state)
    if timings is not None:
        timings["prepare"] = prepared - start
        timings["place"] = placed - prepared
        timings["finish"] = time.perf_counter() - placed
    return result


def prepare(snapshot: Snapshot) -> tuple[CycleState, bool]:
    """Build the cycle state; True when the cycle is already decided (a steady state)."""
    state = CycleState(snapshot)
    index_inputs(state)
    if nothing_moves(state):
        return state, True
    index_for_placing(state)
    protected = weigh_queues(state)
    evicted = evict(state, protected)
    holding = load_nodes(state)
    charge_holders(state, holding)
    allowances(state)
    queued = queued_work(state)
    order_queues(state, evicted, queued)
    return state, False
