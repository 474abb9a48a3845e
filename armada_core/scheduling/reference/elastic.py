"""Elastic pod groups (SEMANTICS.md, "Elastic pod groups"): the role rules' decisions
(``roles.plan``) applied to the cycle, the items of queued role groups and of late members
of running ones, and what becomes of the members a placement leaves out."""

from __future__ import annotations

from collections.abc import Callable

from .. import reasons
from ..model import Job
from ..roles import RunningKey, arrange, plan, short_role
from .state import QUEUED, CycleState, Item


def apply_roles(
    state: CycleState,
    running: list[Job],
    queued: list[Job],
    order: Callable[[Job], RunningKey],
) -> tuple[list[Job], list[Job]]:
    """A group with a role below its minimum has its running members preempted and its
    queued ones wait, all out of the cycle; returns the running and queued jobs left.
    ``order`` is a running job's place in its queue."""
    levels = state.snapshot.config.topology_levels
    nodes = [ns.node for ns in state.nodes]
    state.roles = plan(
        [j for j in running if state.accounted(j)],
        queued,
        nodes,
        state.node_index,
        levels,
        order,
    )
    gone = set(state.roles.preempt)
    state.result.preempted.update(gone)
    state.result.preempt_reasons.update(state.roles.preempt_reasons)
    for job_id, why in state.roles.waiting.items():
        state.result.unscheduled[job_id] = why
    return (
        [j for j in running if j.id not in gone],
        [j for j in queued if j.id not in state.roles.waiting],
    )


def late_member_item(state: CycleState, job: Job, allowed: frozenset[int] | None) -> Item:
    """A queued member of a running role group: placed alone, on the nodes near the running
    members (``allowed``; None: anywhere)."""
    item = state.item(QUEUED, job.queue, [job])
    item.late = True
    item.allowed = None if allowed is None else set(allowed)
    return item


def role_group_item(state: CycleState, queue: str, members: list[Job]) -> Item | None:
    """A complete queued role group: its members in placing order (every role's minimum
    first), or None when a role has fewer members than its minimum (they fail)."""
    short = short_role(members)
    if short is not None:
        for j in members:
            state.result.failed[j.id] = short
        return None
    ordered, core = arrange(members)
    item = state.item(QUEUED, queue, ordered)
    item.core = core
    return item


def elastic_reason(job: Job) -> str:
    """Why an elastic member of a role group was left queued."""
    return reasons.elastic_waits(job.gang_id or "", job.gang_role or "")


def fail_unplaced(state: CycleState, members: list[Job], placed: set[str], core: int = 0) -> None:
    """The gang runs with the members placed; the others fail, or in a role group wait
    for capacity in later cycles."""
    for j in members:
        if j.id not in placed:
            if core:
                state.result.unscheduled[j.id] = elastic_reason(j)
            else:
                state.result.failed[j.id] = reasons.GANG_ELASTIC_REST
