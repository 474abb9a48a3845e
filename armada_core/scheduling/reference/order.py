"""Order and lookback (SEMANTICS.md, "Order", "Lookback").

Inside a queue: class priority first (highest first, seed 000's order); among equal class
priority, evicted gangs, then evicted members above a gang's minimum, then queued gangs, each
by (job priority, [start time,] submit time, job id). Across queues: the head gang with the
most urgent class, then the smallest cost after it per weight, then the queue name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from .. import reasons
from ..model import Job, PriorityClass
from ..roles import RunningKey, has_roles
from .elastic import late_member_item, role_group_item
from .queues import queue_key
from .state import EVICTED, EXTRA, QUEUED, CycleState, Item

#: A queued job's place in its queue: -class priority, priority, submit time, id.
QueuedKey = tuple[int, int, float, str]
#: Where an item goes in its queue: -class priority, kind, its first member's place.
ItemKey = tuple[int, int, QueuedKey | RunningKey]
#: Progressive filling: -class priority of the head, the queue's key with it, queue name.
HeadKey = tuple[int, float, str]


def queued_order(job: Job, pcs: dict[str, PriorityClass]) -> QueuedKey:
    """A queued job's place: class priority (highest first), priority, submit time, id."""
    return (-pcs[job.priority_class].priority, job.priority, job.submit_time, job.id)


def running_order(job: Job, pcs: dict[str, PriorityClass]) -> RunningKey:
    """A running job's place: as queued, with the start time before the submit time."""
    start = job.start_time if job.start_time is not None else 0.0
    return (-pcs[job.priority_class].priority, job.priority, start, job.submit_time, job.id)


def running_order_or_id(job: Job, pcs: dict[str, PriorityClass]) -> RunningKey:
    """Running order; a job of an unknown class (never moved) sorts by id alone."""
    if job.priority_class in pcs:
        return running_order(job, pcs)
    return (0, 0, 0.0, 0.0, job.id)


def add_queued_gangs(state: CycleState, queued: list[Job], items: dict[str, list[Item]]) -> None:
    """Group queued jobs into gangs (a single job is a gang of one) and add the complete
    ones to their queue's items. Jobs of cordoned queues wait; a gang with more members than
    its cardinality fails, one with fewer waits for the rest."""
    result = state.result
    gangs: dict[tuple[str, str], list[Job]] = defaultdict(list)
    late = state.roles.late if state.roles is not None else {}
    for job in queued:
        if state.queues[job.queue].cordoned:
            result.unscheduled[job.id] = reasons.QUEUE_CORDONED
            continue
        if job.id in late:
            items[job.queue].append(late_member_item(state, job, late[job.id]))
            continue
        gang = job.gang_id if job.gang_id is not None else "\0" + job.id
        gangs[(job.queue, gang)].append(job)
    for (queue, _), members in sorted(gangs.items()):
        members.sort(key=lambda j: queued_order(j, state.classes))
        cardinality = members[0].gang_cardinality if members[0].gang_id is not None else 1
        if len(members) > cardinality:
            for j in members:
                result.failed[j.id] = reasons.GANG_TOO_MANY
        elif len(members) < cardinality:
            for j in members:
                result.unscheduled[j.id] = reasons.gang_incomplete(len(members), cardinality)
        elif members[0].gang_id is not None and has_roles(members):
            group = role_group_item(state, queue, members)
            if group is not None:
                items[queue].append(group)
        else:
            items[queue].append(state.item(QUEUED, queue, members))


def order_queue(state: CycleState, queue_items: list[Item]) -> None:
    """Sort a queue's items: class priority first; among equals, evicted gangs, extra
    members, queued gangs, each by its first member. Running before queued among equals keeps
    a queue from churning its own jobs of one class."""
    pcs = state.classes
    order: dict[int, Callable[[Item], QueuedKey | RunningKey]] = {
        EVICTED: lambda it: running_order(it.members[0], pcs),
        EXTRA: lambda it: running_order(it.members[0], pcs),
        QUEUED: lambda it: queued_order(it.members[0], pcs),
    }

    def place(it: Item) -> ItemKey:
        return (-state.priority(it.members[0]), it.kind, order[it.kind](it))

    queue_items.sort(key=place)


def lookback(state: CycleState, queue_items: list[Item]) -> None:
    """Keep the queued gangs that start within the queue's first ``max_queue_lookback``
    queued jobs (in the queue's order); the rest wait for a later cycle, unattempted."""
    limit = state.snapshot.config.max_queue_lookback
    if limit is None:
        return
    seen = 0
    kept = []
    for it in queue_items:
        if it.kind == QUEUED:
            if seen >= limit:
                for j in it.members:
                    state.result.unscheduled[j.id] = reasons.queue_lookback(limit)
                continue
            seen += len(it.members)
        kept.append(it)
    queue_items[:] = kept


def next_item(state: CycleState, items: dict[str, list[Item]]) -> Item | None:
    """Progressive filling: take the head of the queue with the smallest
    ``(-class priority of the head, cost after the head / weight, name)``."""
    best: HeadKey | None = None
    for queue in sorted(items):
        if not items[queue]:
            continue
        head = items[queue][0]
        key = (-head.class_priority, queue_key(state, queue, head.total), queue)
        if best is None or key < best:
            best = key
    if best is None:
        return None
    return items[best[2]].pop(0)
