"""Order across queues (SEMANTICS.md): progressive filling, the cycle's main loop.

Queues sit in a heap keyed exactly like the reference's scan over queues: (-class priority of
the head, key with the head added, name rank). When a queue wins, how many consecutive items
it wins is computed at once (``queues.wins``), because the other queues' keys do not move
meanwhile.
"""

from __future__ import annotations

import heapq

from .gangs import queued_gang
from .nodes import queued_run
from .putback import evicted_batch, evicted_complex, evicted_run
from .queues import head
from .state import QUEUED, CycleState


def place_all(st: CycleState) -> None:
    """Take items from the winning queue until every queue's order is exhausted.

    Evicted jobs at the heads are put back in batches across queues when no per-queue class
    cap applies; a batch that comes out small backs off, since scanning costs.
    """
    heap = _heads(st)
    st.rebuild = False
    batch_ok = not any(pc.max_fraction_per_queue for pc in st.pcs.values())
    skip = 0
    while heap:
        if batch_ok and skip <= 0:
            q0 = heap[0][3]
            code0 = int(st.seq[q0][st.pos[q0]])
            if code0 >= 0 and st.evicted_mask[code0]:
                done, scanned = evicted_batch(st)
                if done:
                    heap = _heads(st)
                    skip = scanned // (8 * done)
                    continue
                skip = 64
        skip -= 1
        top = heapq.heappop(heap)
        q = top[3]
        _take(st, q, top[0], heap[0] if heap else None)
        if st.rebuild:
            # Costs of other queues changed (urgency preemption): every key is stale.
            st.rebuild = False
            heap = _heads(st)
            continue
        entry = head(st, q)
        if entry is not None:
            heapq.heappush(heap, entry)


def _heads(st: CycleState) -> list[tuple]:
    heap = [h for h in (head(st, q) for q in range(len(st.qnames))) if h]
    heapq.heapify(heap)
    return heap


def _take(st: CycleState, q: int, neg_p: int, bound: tuple | None) -> None:
    """Queue ``q`` won: decide its head item, or as many items of its head run as it wins
    before the next queue (``bound``) would."""
    pos = st.pos[q]
    code = int(st.seq[q][pos])
    if code < 0:
        item = st.complex[-1 - code]
        if item.kind == QUEUED:
            queued_gang(st, q, item)
        else:
            evicted_complex(st, q, item)
        st.pos[q] = pos + 1
    elif st.evicted_mask[code]:
        st.pos[q] = pos + evicted_run(st, q, neg_p, bound, pos)
    else:
        st.pos[q] = pos + queued_run(st, q, neg_p, bound, pos)
