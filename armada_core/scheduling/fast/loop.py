"""Order across queues (SEMANTICS.md): progressive filling, the cycle's main loop.

Queues sit in a heap keyed exactly like the reference's scan over queues: (-class priority of
the head, key with the head added, name rank). When a queue wins, how many consecutive items
it wins is computed at once (``queues.consecutive_wins``), because the other queues' keys do
not move meanwhile.
"""

from __future__ import annotations

import heapq

from .gangs import queued_gang
from .nodes import queued_run
from .putback import evicted_batch, evicted_item, evicted_run
from .queues import heap_entry
from .state import QUEUED, CycleState, HeapEntry


def place_all(state: CycleState) -> None:
    """Take items from the winning queue until every queue's order is exhausted.

    Evicted jobs at the heads are put back in batches across queues when no per-queue class
    cap applies; a batch that comes out small backs off, since scanning costs.
    """
    order, placing, evicted = state.order, state.placing, state.evictions.evicted
    sequence, position = order.sequence, order.position
    heap = _queue_heap(state)
    placing.heap_stale = False
    batch_ok = not state.class_caps
    skip = 0
    while heap:
        if batch_ok and skip <= 0:
            first = heap[0][3]
            code = int(sequence[first][position[first]])
            if code >= 0 and evicted[code]:
                done, scanned = evicted_batch(state)
                if done:
                    heap = _queue_heap(state)
                    skip = scanned // (8 * done)
                    continue
                skip = 64
        skip -= 1
        top = heapq.heappop(heap)
        q = top[3]
        _take_head(state, q, top[0], heap[0] if heap else None)
        entry, placing.next_entry = placing.next_entry, None
        if placing.heap_stale:
            # Costs of other queues changed (urgency preemption): every key is stale.
            placing.heap_stale = False
            heap = _queue_heap(state)
            continue
        if entry is None:
            entry = heap_entry(state, q)
        if entry is not None:
            heapq.heappush(heap, entry)


def _queue_heap(state: CycleState) -> list[HeapEntry]:
    heap = [h for h in (heap_entry(state, q) for q in range(len(state.queues.names))) if h]
    heapq.heapify(heap)
    return heap


def _take_head(state: CycleState, q: int, neg_priority: int, bound: HeapEntry | None) -> None:
    """Queue ``q`` won: decide its head item, or as many items of its head run as it wins
    before the next queue (``bound``) would."""
    order = state.order
    pos = order.position[q]
    code = int(order.sequence[q][pos])
    if code < 0:
        item = state.gangs.items[-1 - code]
        if item.kind == QUEUED:
            queued_gang(state, q, item)
        else:
            evicted_item(state, q, item)
        order.position[q] = pos + 1
    elif state.evictions.evicted[code]:
        order.position[q] = pos + evicted_run(state, q, neg_priority, bound, pos)
    else:
        order.position[q] = pos + queued_run(state, q, neg_priority, bound, pos)
