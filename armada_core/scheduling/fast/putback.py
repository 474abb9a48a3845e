"""Placing evicted jobs (SEMANTICS.md, Placing): every member back on its own node, all or
nothing, if the node's capacity minus everything now holding space fits it and the queue's
class cap allows; otherwise the job (gang) is preempted. Exempt from per-cycle limits.

Evicted jobs go back in vectorised batches: until a queued job is placed they cannot take
each other's space, so only which of them come before the next other event matters.
"""

from __future__ import annotations

import numpy as np

from .free_space import IntArray, scatter_add
from .limits import class_limit
from .queues import (
    beats,
    change_usage,
    charge_class,
    consecutive_wins,
    queue_key,
    queue_keys,
)
from .state import CycleState, HeapEntry, Item
from .victims import evicted_settled

#: Evicted jobs looked at per step, so that a step costs O(1) amortised.
_WINDOW = 4096

#: The heap key of the first item after a queue's evicted singles: (-class priority, key,
#: queue).
BarrierKey = tuple[int, float, int]
#: A queue's evicted singles at its head: queue, first position, rows, cumulative requests.
Span = tuple[int, int, IntArray, IntArray]
#: The evicted singles of a queue that go back in a batch: queue, rows, their total.
Batch = tuple[int, IntArray, IntArray]


def evicted_batch(state: CycleState, window: int = _WINDOW) -> tuple[int, int]:
    """Re-place, across all queues, every evicted job that comes before the next other event.

    Returns how many went back and how many were looked at (0 back: something did not fit,
    the caller goes one item at a time).
    """
    spans, barrier, scanned = _spans(state, window)
    picked = _before_barrier(state, spans, barrier)
    if not picked:
        return 0, scanned
    jobs, queues, space = state.jobs, state.queues, state.nodes.space
    rows = np.concatenate([r for _, r, _ in picked])
    nodes = jobs.node[rows]
    reqs = state.shapes.requests[jobs.shape[rows]]
    need = np.zeros((space.n_nodes, space.n_dims), dtype=np.int64)
    scatter_add(need, nodes, reqs)
    touched = need.any(axis=1)
    if not (space.held[touched] + need[touched] <= space.capacity[touched]).all():
        return 0, scanned
    priorities = jobs.class_priority[rows]
    evicted_settled(state, rows)
    for priority in np.unique(priorities).tolist():
        sel = priorities == priority
        space.put_back_evicted(nodes[sel], reqs[sel], int(priority))
    for q, mine, total in picked:
        queues.allocation[q] = [
            a + b for a, b in zip(queues.allocation[q], total.tolist(), strict=True)
        ]
        shapes = jobs.shape[mine]
        for s in np.unique(shapes).tolist():
            vec = (state.shapes.requests[s] * int((shapes == s).sum())).tolist()
            charge_class(state, q, state.shapes.facts[s].class_name, vec)
        state.order.position[q] += len(mine)
    return len(rows), scanned


def _spans(state: CycleState, window: int) -> tuple[list[Span], BarrierKey | None, int]:
    """Per queue, the evicted singles at its head (up to ``window``) with their cumulative
    requests; and the key of the earliest other event (the barrier) across queues."""
    order, jobs, requests = state.order, state.jobs, state.shapes.requests
    barrier: BarrierKey | None = None
    spans: list[Span] = []
    scanned = 0
    for q in range(len(state.queues.names)):
        sequence = order.sequence[q]
        p0 = order.position[q]
        if p0 >= len(sequence):
            continue
        cut = min(int(order.evicted_end[q][p0]), p0 + window)
        rows = sequence[p0:cut]
        gone = np.flatnonzero(state.evictions.settled[rows])
        if len(gone):
            # Jobs that gave way earlier are already preempted: the first is the barrier.
            cut = p0 + int(gone[0])
            rows = rows[: int(gone[0])]
        cum = None
        if len(rows):
            cum = np.cumsum(requests[jobs.shape[rows]], axis=0)
            scanned += len(rows)
        if cut < len(sequence):
            key = _barrier_key(state, q, int(sequence[cut]), cum)
            if barrier is None or key < barrier:
                barrier = key
        if cum is not None:
            spans.append((q, p0, rows, cum))
    return spans, barrier, scanned


def _barrier_key(state: CycleState, q: int, code: int, cum: IntArray | None) -> BarrierKey:
    """The heap key the item ``code`` will have once the evicted jobs before it are back."""
    if code < 0:
        item = state.gangs.items[-1 - code]
        priority, total = item.class_priority, item.total
    else:
        priority = int(state.jobs.class_priority[code])
        total = state.shapes.facts[state.jobs.shape[code]].request_tuple
    extra = total if cum is None else [a + b for a, b in zip(cum[-1].tolist(), total, strict=True)]
    return (-priority, queue_key(state, q, extra), q)


def _before_barrier(
    state: CycleState, spans: list[Span], barrier: BarrierKey | None
) -> list[Batch]:
    """Per queue, the evicted singles whose keys come before the barrier, and their total."""
    picked: list[Batch] = []
    for q, _start, rows, cum in spans:
        neg = -state.jobs.class_priority[rows]
        ks = queue_keys(state, q, cum)
        if barrier is None:
            count = len(rows)
        else:
            b0, b1, b2 = barrier
            before = (neg < b0) | ((neg == b0) & ((ks < b1) | ((ks == b1) & (q < b2))))
            bad = np.flatnonzero(~before)
            count = int(bad[0]) if len(bad) else len(rows)
        if count:
            picked.append((q, rows[:count], cum[count - 1]))
    return picked


def evicted_run(
    state: CycleState, q: int, neg_priority: int, bound: HeapEntry | None, pos: int
) -> int:
    """Re-place the run of evicted singles at the queue's head, as many as the queue wins;
    one at a time when a class cap applies or they do not all fit. Returns how many."""
    jobs, order, facts = state.jobs, state.order, state.shapes.facts
    end = min(int(order.run_end[q][pos]), pos + _WINDOW)
    if _wins_one(state, q, neg_priority, bound, pos, end):
        evicted_one(state, q, int(order.sequence[q][pos]))
        return 1
    rows = order.sequence[q][pos:end]
    gone = np.flatnonzero(state.evictions.settled[rows])
    if len(gone):
        # A job that gave way earlier is already preempted: its turn changes nothing.
        if gone[0] == 0:
            evicted_one(state, q, int(rows[0]))
            return 1
        rows = rows[: int(gone[0])]
    shapes = jobs.shape[rows]
    classes = state.classes
    if state.class_caps and any(
        classes[facts[s].class_name].max_fraction_per_queue for s in set(shapes.tolist())
    ):
        evicted_one(state, q, int(rows[0]))
        return 1
    reqs = state.shapes.requests[shapes]
    k = max(1, consecutive_wins(state, q, neg_priority, bound, reqs))
    rows, reqs, shapes = rows[:k], reqs[:k], shapes[:k]
    nodes = jobs.node[rows]
    space = state.nodes.space
    if k == 1:
        n = int(nodes[0])
        fits = bool((space.held[n] + reqs[0] <= space.capacity[n]).all())
    else:
        touched, inverse = np.unique(nodes, return_inverse=True)
        need = np.zeros((len(touched), space.n_dims), dtype=np.int64)
        scatter_add(need, inverse.reshape(-1), reqs)
        fits = bool((space.held[touched] + need <= space.capacity[touched]).all())
    if not fits:
        evicted_one(state, q, int(rows[0]))
        return 1
    space.put_back_evicted(nodes, reqs, int(jobs.class_priority[rows[0]]))
    evicted_settled(state, rows)
    total = reqs.sum(axis=0).tolist()
    allocation = state.queues.allocation
    allocation[q] = [a + b for a, b in zip(allocation[q], total, strict=True)]
    for s in np.unique(shapes).tolist():
        sel = reqs[shapes == s].sum(axis=0).tolist()
        charge_class(state, q, facts[s].class_name, sel)
    return k


def _wins_one(
    state: CycleState, q: int, neg_priority: int, bound: HeapEntry | None, pos: int, end: int
) -> bool:
    """Whether the queue wins only the first of its run (the two-job check of
    ``consecutive_wins``), in plain Python: most turns of queues that contend win one, and
    one job goes back as ``evicted_one`` puts it, without the run's arrays."""
    if bound is None or neg_priority < bound[0] or end - pos < 2:
        return False
    if state.class_caps:
        return False
    sequence, shape, facts = state.order.sequence[q], state.jobs.shape, state.shapes.facts
    first, second = facts[shape[sequence[pos]]], facts[shape[sequence[pos + 1]]]
    two = [a + b for a, b in zip(first.request_tuple, second.request_tuple, strict=True)]
    return not beats(queue_key(state, q, two), q, bound)


def evicted_one(state: CycleState, q: int, i: int) -> None:
    evicted_members(state, q, [i], None)


def evicted_item(state: CycleState, q: int, item: Item) -> None:
    evicted_members(state, q, item.members, item)


def evicted_members(state: CycleState, q: int, members: list[int], item: Item | None) -> None:
    """All members back on their nodes, or all preempted (an extra also when its core was).
    Members that gave way to a job of a higher class earlier in the cycle are preempted
    already."""
    if state.evictions.settled[members[0]]:
        if item is not None:
            item.failed = True
        return
    if _fits_back(state, q, members, item):
        _put_back(state, q, members)
        return
    if item is not None:
        item.failed = True
    jobs, space, facts = state.jobs, state.nodes.space, state.shapes.facts
    for i in members:
        s = jobs.shape[i]
        space.drop_evicted(int(jobs.node[i]), state.shapes.requests[s], int(jobs.class_priority[i]))
        evicted_settled(state, np.array([i]))
        change_usage(state, q, facts[s].request_tuple, -1)
        state.placing.preempted.add(i)


def _fits_back(state: CycleState, q: int, members: list[int], item: Item | None) -> bool:
    if item is not None and item.parent is not None and item.parent.failed:
        return False
    if class_limit(state, q, members) is not None:
        return False
    jobs, space, requests = state.jobs, state.nodes.space, state.shapes.requests
    if len(members) == 1:
        n = int(jobs.node[members[0]])
        return bool((space.held[n] + requests[jobs.shape[members[0]]] <= space.capacity[n]).all())
    extra: dict[int, IntArray] = {}
    for i in members:
        n = int(jobs.node[i])
        r = requests[jobs.shape[i]]
        have = extra.get(n, np.zeros(space.n_dims, dtype=np.int64))
        if not (space.held[n] + have + r <= space.capacity[n]).all():
            return False
        extra[n] = have + r
    return True


def _put_back(state: CycleState, q: int, members: list[int]) -> None:
    jobs, space, queues = state.jobs, state.nodes.space, state.queues
    for i in members:
        n = int(jobs.node[i])
        s = jobs.shape[i]
        shape = state.shapes.facts[s]
        space.put_back_one(n, state.shapes.requests[s], int(jobs.class_priority[i]))
        evicted_settled(state, np.array([i]))
        queues.allocation[q] = [
            a + b for a, b in zip(queues.allocation[q], shape.request_tuple, strict=True)
        ]
        charge_class(state, q, shape.class_name, shape.request_tuple)
