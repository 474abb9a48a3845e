"""Trying a gang (SEMANTICS.md, "Placing"): its members placed in order on the live state.

A failed or trial attempt is taken back with ``CycleState.save``/``restore``; trials are
compared by the members they place, the worst stage they reach and the free resources
they leave.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import reasons
from ..model import Job
from .nodes import Rank, place
from .state import CycleState, add


def try_gang(
    state: CycleState,
    members: list[Job],
    minimum: int,
    allowed: set[int] | None,
    core: int = 0,
) -> tuple[set[str], Rank] | str:
    """Place members in order; with fewer than ``minimum`` placed, or a member of a role
    group's ``core`` not placed, the attempt fails (the caller takes it back). Returns the
    members placed and the worst stage, or a reason."""
    placed: set[str] = set()
    worst = (0, 0.0)
    first_reason: str | None = None
    for k, job in enumerate(members):
        outcome = place(state, job, allowed)
        if isinstance(outcome, str):
            first_reason = first_reason or outcome
            if minimum == len(members) or k < core:
                return outcome
            continue
        placed.add(job.id)
        worst = max(worst, outcome)
    if len(placed) < minimum:
        return first_reason or reasons.NO_CAPACITY
    return placed, worst


def free_left(state: CycleState, indices: Iterable[int]) -> list[int]:
    """The free resources left on the nodes of the given indices."""
    leftover = state.zeros()
    for i in indices:
        leftover = add(leftover, state.nodes[i].free())
    return leftover
