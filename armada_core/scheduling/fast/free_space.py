"""Free space on the nodes: numpy arrays per displacement level plus a sorted index.

Free resources exist at several levels (see ``reference``): everything held, evicted jobs of
low class priority giving way, and protected preemptible jobs giving way to urgency. The
arrays answer any level in one vectorised expression; the sorted index answers the common
question "least-free node that fits, nothing displaced" in O(log n) plus a short scan, which
keeps the cost of one placement independent of the number of nodes.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

INF = float("inf")

#: Arrays of the fast scheduler: rows, counts and resource vectors (int64, so every
#: comparison is exact), flags, and class or hold priorities (float64: +inf never gives way).
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]

#: A node in the index: its free resources (in dimension order), then its node index.
IndexEntry = tuple[int, ...]
#: Where a scan of one index partition stopped: entries before it were seen not to fit.
ScanStop = tuple[float, ...]


def scatter_add(out: IntArray, rows: IntArray, vals: IntArray, sign: int = 1) -> None:
    """out[rows[k]] += sign * vals[k], exactly, with repeated rows accumulating."""
    if len(rows) == 0:
        return
    peak = int(np.abs(vals).max()) if vals.size else 0
    if peak * len(rows) < 2**53:
        # Float sums are exact below 2**53, and bincount is far faster than ufunc.at.
        n = out.shape[0]
        for d in range(out.shape[1]):
            col = np.bincount(rows, weights=vals[:, d], minlength=n)
            out[:, d] += sign * col.astype(np.int64)
    elif sign > 0:
        np.add.at(out, rows, vals)
    else:
        np.subtract.at(out, rows, vals)


def fit_counts(free: IntArray, req: IntArray, limit: int) -> IntArray:
    """How many copies of ``req`` fit in each row of ``free`` (capped at ``limit``)."""
    positive = req > 0
    counts = np.full(free.shape[0], limit, dtype=np.int64)
    if positive.any():
        per_dim = free[:, positive] // req[positive]
        counts = np.minimum(counts, per_dim.min(axis=1))
    zero_dims = ~positive
    if zero_dims.any():
        counts[(free[:, zero_dims] < 0).any(axis=1)] = 0
    return np.maximum(counts, 0)


def best_fit_order(free: IntArray, idx: IntArray) -> IntArray:
    """Positions ordered by (free resources lexicographically, node index)."""
    keys = [idx] + [free[:, d] for d in range(free.shape[1] - 1, -1, -1)]
    return np.lexsort(keys)


#: An entry that moves up to this many places shifts those; one moving further is taken out
#: and put back (the list's tail moves twice, at memory speed).
_SHIFT_AT_MOST = 256


class ScanMemo:
    """How far the best-fit scans for one job shape have come (``FreeSpace.best_fit``)."""

    __slots__ = ("fitting", "grow_epoch", "moved_seen", "stops")

    def __init__(self) -> None:
        #: The ``FreeSpace.grow_epoch`` the stops hold for (-1: none yet).
        self.grow_epoch = -1
        #: Index partition -> where its scan stopped: of the entries before it, only those
        #: in ``fitting`` fit.
        self.stops: dict[int, ScanStop] = {}
        #: Index partition -> a heap of entries before its stop seen to fit. One is current
        #: while its node's entry still equals it; the others are left to fall out.
        self.fitting: dict[int, list[IndexEntry]] = {}
        #: How much of ``FreeSpace.moved`` the stops have caught up with.
        self.moved_seen = 0


@dataclass(slots=True)
class SavedSpace:
    """A copy of what placing changes, for undoing tentative work."""

    held: IntArray
    evicted_total: IntArray
    evicted: dict[int, IntArray]
    displaceable: dict[float, IntArray]
    #: How long the index's undo log was: entries past it are undone.
    logged: int


class FreeSpace:
    """Per node: capacity, what holds space, what was evicted and may come back, what may be
    displaced; and the best-fit index of free space with nothing displaced."""

    def __init__(self, capacity: IntArray, partition: IntArray, indexed: BoolArray):
        n, d = capacity.shape
        self.n_nodes, self.n_dims = n, d
        self.capacity = capacity
        #: Every job holding its space.
        self.held = np.zeros((n, d), dtype=np.int64)
        #: Class priority -> evicted jobs not yet back; and their sum.
        self.evicted: dict[int, IntArray] = {}
        self.evicted_total = np.zeros((n, d), dtype=np.int64)
        #: Finite hold priority -> held jobs that give way to urgency above it.
        self.displaceable: dict[float, IntArray] = {}
        #: Index partition of each node, -1 when not indexed (cordoned).
        self.partition = partition
        self.partition_of: list[int] = partition.tolist()
        self.indexed = indexed
        #: Per partition, its nodes' entries, sorted; and each node's current entry.
        self.index: dict[int, list[IndexEntry]] = {}
        self.entry: list[IndexEntry | None] = [None] * n
        #: Bumped whenever free space (nothing displaced) grows, invalidating "nothing fits".
        self.grow_epoch = 0
        #: Nodes whose index entry changed, in order (lets per-shape scan memos catch up).
        self.moved: list[int] = []
        #: While tentative work runs (``trials`` deep): each index change as (node, entry
        #: before). Undoing a trial's few changes costs far less than copying the index
        #: (thousands of entries) for every trial a gang or pod group makes.
        self.trials = 0
        self.undo_log: list[tuple[int, IndexEntry]] | None = None

    # --- index ---------------------------------------------------------------------------

    def build_index(self) -> None:
        free = self.capacity - self.held - self.evicted_total
        nodes = np.nonzero(self.indexed)[0]
        # Every indexed node in index order at once (numpy's sort, not Python's of tuples),
        # the entries made by zip a column at a time; each partition takes its own in order.
        order = nodes[best_fit_order(free[nodes], nodes)]
        node_list = order.tolist()
        in_order = list(zip(*free[order].T.tolist(), node_list, strict=True))
        parts = self.partition[order]
        if len(parts) and (parts == parts[0]).all():
            self.index[int(parts[0])] = in_order
        else:
            for p in np.unique(parts).tolist():
                self.index[p] = [in_order[k] for k in np.flatnonzero(parts == p).tolist()]
        entries = self.entry
        for i, entry in zip(node_list, in_order, strict=True):
            entries[i] = entry

    def _reindex(self, i: int, taken: tuple[int, ...] | None = None) -> None:
        """Move node ``i`` to its new place in the index (``taken``: what was just placed)."""
        old = self.entry[i]
        if old is None:
            return
        self.moved.append(i)
        if self.undo_log is not None:
            self.undo_log.append((i, old))
        entries = self.index[self.partition_of[i]]
        pos = bisect.bisect_left(entries, old)
        if taken is not None:
            # Its free space shrank (no dimension grew), so the entry moves towards the front:
            # only the entries it passes shift, not the whole tail twice.
            new = self.entry[i] = (*map(operator.sub, old, taken), i)
            at = bisect.bisect_left(entries, new, 0, pos)
            if pos - at <= _SHIFT_AT_MOST:
                entries[at + 1 : pos + 1] = entries[at:pos]
                entries[at] = new
            else:  # two moves of the tail's pointers cost less than copying that many
                del entries[pos]
                entries.insert(at, new)
            return
        del entries[pos]
        new = self.entry[i] = (
            *(self.capacity[i] - self.held[i] - self.evicted_total[i]).tolist(),
            i,
        )
        bisect.insort(entries, new)

    def best_fit(
        self,
        req: tuple[int, ...],
        partitions: list[int],
        mask: BoolArray | None,
        memo: ScanMemo,
    ) -> IndexEntry | None:
        """Least-free indexed node where ``req`` fits without displacing anything.

        ``memo`` (one per job shape) remembers, per partition, where the last scan stopped:
        every entry before that point was seen not to fit, or is kept in a heap of fitting
        ones. Entries only move towards the front when their free space shrinks, and such
        moves are in ``moved``, so a later call puts the moved entries that still fit before
        the stop on the heap and takes the heap's least current entry, or else resumes the
        scan at the stop: an entry is scanned past once, however often the nodes before it
        change. Growth of free space (``grow_epoch``) resets the memo.
        """
        ge = operator.ge
        current = self.entry
        if memo.grow_epoch != self.grow_epoch:
            stops: dict[int, ScanStop] = {}
            fitting: dict[int, list[IndexEntry]] = {}
            memo.grow_epoch = self.grow_epoch
            memo.stops, memo.fitting = stops, fitting
            memo.moved_seen = len(self.moved)
        else:
            stops, fitting = memo.stops, memo.fitting
            seen = memo.moved_seen
            if seen < len(self.moved):
                part = self.partition_of
                for m in set(self.moved[seen:]):
                    entry = current[m]
                    if entry is None:
                        continue
                    p = part[m]
                    stopped_at = stops.get(p)
                    if (
                        stopped_at is not None
                        and entry < stopped_at
                        and all(map(ge, entry, req))
                        and (mask is None or mask[m])
                    ):
                        heapq.heappush(fitting.setdefault(p, []), entry)
                memo.moved_seen = len(self.moved)
        best: IndexEntry | None = None
        first: ScanStop = (req[0],)
        for p in partitions:
            heap = fitting.get(p)
            while heap and current[heap[0][-1]] != heap[0]:
                heapq.heappop(heap)  # its node has moved on since
            if heap:
                # The least fitting entry before the stop, and none after it is less.
                if best is None or heap[0] < best:
                    best = heap[0]
                continue
            entries = self.index.get(p)
            if not entries:
                continue
            k = bisect.bisect_left(entries, stops.get(p, first))
            n = len(entries)
            stop: ScanStop = (INF,)
            while k < n:
                entry = entries[k]
                if best is not None and entry > best:
                    stop = entry
                    break
                if all(map(ge, entry, req)) and (mask is None or mask[entry[-1]]):
                    best = entry
                    stop = entry
                    break
                k += 1
            stops[p] = stop
        return best

    # --- free resources at each level ------------------------------------------------------

    def free(self, rows: IntArray) -> IntArray:
        """Stage 1, no displacement: capacity - held - evicted not yet back."""
        return self.capacity[rows] - self.held[rows] - self.evicted_total[rows]

    def free_evicted_giving_way(self, rows: IntArray, level: float) -> IntArray:
        """Stage 2, fair share: free if evicted jobs of class priority <= level give way."""
        free = self.capacity[rows] - self.held[rows]
        for priority, arr in self.evicted.items():
            if priority > level:
                free -= arr[rows]
        return free

    def free_held_giving_way(self, rows: IntArray, level: float) -> IntArray:
        """Stage 3, urgency: free if every evicted job, and held jobs of hold priority <=
        level, give way."""
        free = self.capacity[rows] - self.held[rows]
        for hold, arr in self.displaceable.items():
            if hold <= level:
                free += arr[rows]
        return free

    # --- changes ---------------------------------------------------------------------------

    def place(
        self,
        i: int,
        req: IntArray,
        hold: float,
        count: int = 1,
        req_tuple: tuple[int, ...] | None = None,
    ) -> None:
        """``count`` jobs of request ``req`` hold space on node ``i`` at ``hold``."""
        self.held[i] += req if count == 1 else req * count
        if hold != INF:
            arr = self.displaceable.get(hold)
            if arr is None:
                arr = self.displaceable[hold] = np.zeros((self.n_nodes, self.n_dims), np.int64)
            arr[i] += req * count
        if req_tuple is None or count == 1:
            taken = req_tuple
        else:
            taken = tuple(v * count for v in req_tuple)
        self._reindex(i, taken)

    def place_many(self, nodes: IntArray, counts: IntArray, req: IntArray) -> None:
        """Place ``counts[k]`` copies of ``req`` on ``nodes[k]`` (distinct nodes)."""
        self.held[nodes] += counts[:, None] * req
        self.moved.extend(nodes.tolist())
        rows = (self.capacity[nodes] - self.held[nodes] - self.evicted_total[nodes]).tolist()
        changed: dict[int, list[int]] = {}
        log = self.undo_log
        for i, row in zip(nodes.tolist(), rows, strict=True):
            old = self.entry[i]
            if old is None:
                continue
            if log is not None:
                log.append((i, old))
            changed.setdefault(int(self.partition[i]), []).append(i)
            self.entry[i] = (*row, i)
        for p, members in changed.items():
            entries = self.index[p]
            if len(members) * 16 > len(entries):
                entries[:] = sorted(
                    entry
                    for i in np.flatnonzero(self.partition == p)
                    if (entry := self.entry[i]) is not None
                )
            else:
                stale = set(members)
                entries[:] = [e for e in entries if e[-1] not in stale]
                for i in members:
                    moved = self.entry[i]
                    assert moved is not None
                    bisect.insort(entries, moved)

    def release(self, i: int, req: IntArray, hold: float) -> None:
        """A job holding space on node ``i`` at ``hold`` is preempted."""
        self.held[i] -= req
        if hold != INF:
            self.displaceable[hold][i] -= req
        self.grow_epoch += 1
        self._reindex(i)

    def add_evicted(self, rows: IntArray, reqs: IntArray, priorities: IntArray) -> None:
        """Evicted jobs reserve their space on their nodes, per class priority."""
        levels = np.unique(priorities).tolist()
        for priority in levels:
            sel = priorities == priority
            arr = self.evicted.setdefault(
                int(priority), np.zeros((self.n_nodes, self.n_dims), dtype=np.int64)
            )
            if len(levels) == 1:
                scatter_add(arr, rows, reqs)
            else:
                scatter_add(arr, rows[sel], reqs[sel])
        total = np.zeros((self.n_nodes, self.n_dims), np.int64)
        for arr in self.evicted.values():
            total = total + arr
        self.evicted_total = total

    def put_back_evicted(self, rows: IntArray, reqs: IntArray, priority: int) -> None:
        """Evicted jobs back on their nodes: free space (nothing displaced) is unchanged."""
        if len(rows) == 1:
            self.put_back_one(int(rows[0]), reqs[0], priority)
            return
        scatter_add(self.evicted[priority], rows, reqs, -1)
        scatter_add(self.evicted_total, rows, reqs, -1)
        scatter_add(self.held, rows, reqs)

    def put_back_one(self, i: int, req: IntArray, priority: int) -> None:
        """One evicted job goes back on node ``i``."""
        self.evicted[priority][i] -= req
        self.evicted_total[i] -= req
        self.held[i] += req

    def drop_evicted(self, i: int, req: IntArray, priority: int) -> None:
        """An evicted job on node ``i`` is preempted: its space is free."""
        self.evicted[priority][i] -= req
        self.evicted_total[i] -= req
        self.grow_epoch += 1
        self._reindex(i)

    # --- tentative work ----------------------------------------------------------------------

    def save(self) -> SavedSpace:
        """Begin tentative work (trials nest): ended by ``restore`` or ``keep``."""
        if self.undo_log is None:
            self.undo_log = []
        self.trials += 1
        return SavedSpace(
            self.held.copy(),
            self.evicted_total.copy(),
            {k: v.copy() for k, v in self.evicted.items()},
            {k: v.copy() for k, v in self.displaceable.items()},
            len(self.undo_log),
        )

    def restore(self, saved: SavedSpace) -> None:
        """Undo tentative work. Epochs only move forward, so caches never see a stale state."""
        self.held = saved.held
        self.evicted_total = saved.evicted_total
        self.evicted = saved.evicted
        self.displaceable = saved.displaceable
        log = self.undo_log
        assert log is not None
        for i, old in reversed(log[saved.logged :]):
            entries = self.index[self.partition_of[i]]
            current = self.entry[i]
            assert current is not None
            del entries[bisect.bisect_left(entries, current)]
            bisect.insort(entries, old)
            self.entry[i] = old
        del log[saved.logged :]
        self.grow_epoch += 1
        self.keep()

    def keep(self) -> None:
        """End tentative work, keeping it (as part of the enclosing trial's, if any)."""
        self.trials -= 1
        if self.trials == 0:
            self.undo_log = None
