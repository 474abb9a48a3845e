"""Eviction (SEMANTICS.md, "Eviction").

Running gangs (a single job is a gang of one) that may be preempted to fair share go back
to their queue as evicted items; everything else keeps holding its node. A protected
preemptible gang holds at its lowest member's class priority, so strictly more urgent jobs
may still displace it; every other job holds at +infinity and is never displaced.
"""

from __future__ import annotations

from collections import defaultdict

from ..model import Job
from .order import running_order_or_id
from .state import EVICTED, EXTRA, INF, CycleState, Item


def preemptible(state: CycleState, job: Job) -> bool:
    """Its class is preemptible, or it has run at least its lifetime."""
    if state.classes[job.priority_class].preemptible:
        return True
    if job.lifetime is not None and job.start_time is not None:
        return state.snapshot.now - job.start_time >= job.lifetime
    return False


def running_gangs(state: CycleState, running: list[Job]) -> list[list[Job]]:
    """Running jobs grouped by (queue, gang), each group in running order; records every
    running job and its gang on the state, for victims preempted as a unit."""
    units: dict[tuple[str, str, str], list[Job]] = defaultdict(list)
    for job in running:
        if job.gang_id is None:
            units[(job.queue, "job", job.id)].append(job)
        else:
            units[(job.queue, "gang", job.gang_id)].append(job)
    gangs = []
    for key in sorted(units):
        members = units[key]
        members.sort(key=lambda j: running_order_or_id(j, state.classes))
        elastic = state.roles.elastic if state.roles is not None else set()
        for j in members:
            # An elastic member gives way alone; any other member takes its whole group.
            state.gang_of[j.id] = [j] if j.id in elastic else members
            state.running[j.id] = j
        gangs.append(members)
    return gangs


def evict(state: CycleState, running: list[Job], protected: set[str]) -> dict[str, list[Item]]:
    """Evict the preemptible gangs of unprotected queues; hold everything else in place.
    Returns each queue's evicted items, to be ordered with its queued gangs."""
    items: dict[str, list[Item]] = defaultdict(list)
    for members in running_gangs(state, running):
        hold = INF
        if all(state.accounted(j) and preemptible(state, j) for j in members):
            queue = members[0].queue
            if queue not in protected:
                items[queue].extend(evicted_items(state, members))
                continue
            hold = float(min(state.priority(j) for j in members))
        for job in members:
            hold_node(state, job, hold)
    return items


def evicted_items(state: CycleState, members: list[Job]) -> list[Item]:
    """Mark an evicted gang's members on their nodes; the gang goes back as its core (up to
    its minimum cardinality) and one item per member above the minimum."""
    queue = members[0].queue
    for job in members:
        state.node_of(job).evicted[job.id] = (state.vec(job), state.priority(job))
    minimum = max(1, min(members[0].min_cardinality, len(members)))
    if members[0].gang_id is None:
        minimum = len(members)
    elastic = state.roles.elastic if state.roles is not None else set()
    if any(j.id in elastic for j in members):
        # A role group: its core is every role's minimum, its extras the elastic members.
        ordered = [j for j in members if j.id not in elastic]
        minimum = len(ordered)
        members = ordered + [j for j in members if j.id in elastic]
    core = state.item(EVICTED, queue, members[:minimum])
    return [core] + [state.item(EXTRA, queue, [job], parent=core) for job in members[minimum:]]


def hold_node(state: CycleState, job: Job, hold: float) -> None:
    """The job keeps its space on its node at ``hold``, and counts for its queue if known."""
    vec = state.vec(job)
    state.node_of(job).held[job.id] = (vec, hold)
    if state.accounted(job):
        state.account(job, vec, +1)
