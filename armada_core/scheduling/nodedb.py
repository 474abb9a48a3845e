"""Node state for the fast scheduler: numpy arrays per displacement level plus a sorted index.

Free resources exist at several levels (see ``reference``): everything held, evicted jobs of
low class priority giving way, and protected preemptible jobs giving way to urgency. The
arrays answer any level in one vectorised expression; the sorted index answers the common
question "least-free node that fits, nothing displaced" in O(log n) plus a short scan, which
keeps the cost of one placement independent of the number of nodes.
"""

from __future__ import annotations

import bisect
import operator

import numpy as np

INF = float("inf")


def scatter_add(out: np.ndarray, rows: np.ndarray, vals: np.ndarray, sign: int = 1) -> None:
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


def fit_counts(free: np.ndarray, req: np.ndarray, limit: int) -> np.ndarray:
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


def best_fit_order(free: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Positions ordered by (free resources lexicographically, node index)."""
    keys = [idx] + [free[:, d] for d in range(free.shape[1] - 1, -1, -1)]
    return np.lexsort(keys)


class NodeDb:
    def __init__(self, capacity: np.ndarray, partition: np.ndarray, indexed: np.ndarray):
        n, d = capacity.shape
        self.n, self.d = n, d
        self.cap = capacity
        self.fixed = np.zeros((n, d), dtype=np.int64)  # every job holding its space
        self.evicted_total = np.zeros((n, d), dtype=np.int64)
        self.evicted: dict[int, np.ndarray] = {}  # class priority -> pending evicted jobs
        self.holds: dict[float, np.ndarray] = {}  # finite hold priority -> displaceable jobs
        self.partition = partition  # index partition of each node, -1 when not indexed
        self.part_of: list[int] = partition.tolist()
        self.indexed = indexed
        self.index: dict[int, list[tuple[int, ...]]] = {}
        self.entry: list[tuple[int, ...] | None] = [None] * n
        #: Bumped whenever free space (nothing displaced) grows, invalidating "nothing fits".
        self.grow_epoch = 0
        #: Nodes whose index entry changed, in order (lets per-shape scan memos catch up).
        self.log: list[int] = []

    # --- index ---------------------------------------------------------------------------

    def build_index(self) -> None:
        free = self.cap - self.fixed - self.evicted_total
        rows = free.tolist()
        for p in np.unique(self.partition[self.indexed]).tolist():
            self.index[p] = []
        for i in np.nonzero(self.indexed)[0].tolist():
            entry = (*rows[i], i)
            self.entry[i] = entry
            self.index[int(self.partition[i])].append(entry)
        for entries in self.index.values():
            entries.sort()

    def _reindex(self, i: int, taken: tuple[int, ...] | None = None) -> None:
        """Move node ``i`` to its new place in the index (``taken``: what was just placed)."""
        old = self.entry[i]
        if old is None:
            return
        self.log.append(i)
        entries = self.index[self.part_of[i]]
        pos = bisect.bisect_left(entries, old)
        del entries[pos]
        if taken is not None:
            new = (*map(operator.sub, old, taken), i)
        else:
            new = (*(self.cap[i] - self.fixed[i] - self.evicted_total[i]).tolist(), i)
        self.entry[i] = new
        bisect.insort(entries, new)

    def best_free(
        self,
        req: tuple[int, ...],
        partitions: list[int],
        mask: np.ndarray | None,
        memo: dict | None = None,
    ) -> tuple[int, ...] | None:
        """Least-free indexed node where ``req`` fits without displacing anything.

        ``memo`` (one per job shape) remembers, per partition, where the last scan stopped.
        Every entry before that point was seen not to fit; entries only move towards the
        front when their free space shrinks, and such moves are in ``log``, so a later scan
        checks the logged nodes and resumes where it stopped instead of starting over.
        Growth of free space (``grow_epoch``) resets the memo.
        """
        ge = operator.ge
        best = None
        if memo is None or memo.get("epoch") != self.grow_epoch:
            starts: dict[int, tuple] = {}
            if memo is not None:
                memo.clear()
                memo["epoch"] = self.grow_epoch
                memo["starts"] = starts
                memo["ptr"] = len(self.log)
        else:
            starts = memo["starts"]
            ptr = memo["ptr"]
            if ptr < len(self.log):
                part = self.partition
                for m in set(self.log[ptr:]):
                    entry = self.entry[m]
                    p = int(part[m])
                    stop = starts.get(p)
                    if (
                        entry is not None
                        and stop is not None
                        and entry < stop
                        and all(map(ge, entry, req))
                        and (mask is None or mask[m])
                    ):
                        # A fitting entry moved in front of the stop: the stop moves to it,
                        # keeping "nothing before a stop fits" true for the next scan.
                        starts[p] = entry
                        if best is None or entry < best:
                            best = entry
                memo["ptr"] = len(self.log)
        first = (req[0],)
        for p in partitions:
            entries = self.index.get(p)
            if not entries:
                continue
            begin = starts.get(p, first)
            k = bisect.bisect_left(entries, begin)
            n = len(entries)
            stop = (INF,)
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
            starts[p] = stop
        return best

    # --- free resources at each level ------------------------------------------------------

    def free_all(self, rows: np.ndarray) -> np.ndarray:
        return self.cap[rows] - self.fixed[rows] - self.evicted_total[rows]

    def free_evicted_level(self, rows: np.ndarray, level: float) -> np.ndarray:
        free = self.cap[rows] - self.fixed[rows]
        for pcp, arr in self.evicted.items():
            if pcp > level:
                free -= arr[rows]
        return free

    def free_hold_level(self, rows: np.ndarray, level: float) -> np.ndarray:
        free = self.cap[rows] - self.fixed[rows]
        for hold, arr in self.holds.items():
            if hold <= level:
                free += arr[rows]
        return free

    # --- mutations -------------------------------------------------------------------------

    def add_fixed(
        self,
        i: int,
        req: np.ndarray,
        hold: float,
        count: int = 1,
        req_t: tuple[int, ...] | None = None,
    ) -> None:
        self.fixed[i] += req * count
        if hold != INF:
            self.holds.setdefault(hold, np.zeros((self.n, self.d), dtype=np.int64))[i] += (
                req * count
            )
        taken = None if req_t is None else tuple(v * count for v in req_t)
        self._reindex(i, taken)

    def add_fixed_many(self, nodes: np.ndarray, counts: np.ndarray, req: np.ndarray) -> None:
        """Place ``counts[k]`` copies of ``req`` on ``nodes[k]`` (distinct nodes)."""
        self.fixed[nodes] += counts[:, None] * req
        self.log.extend(nodes.tolist())
        rows = (self.cap[nodes] - self.fixed[nodes] - self.evicted_total[nodes]).tolist()
        changed: dict[int, list[int]] = {}
        for i, row in zip(nodes.tolist(), rows, strict=True):
            if self.entry[i] is None:
                continue
            changed.setdefault(int(self.partition[i]), []).append(i)
            self.entry[i] = (*row, i)
        for p, members in changed.items():
            entries = self.index[p]
            if len(members) * 16 > len(entries):
                entries[:] = sorted(
                    self.entry[i]
                    for i in np.flatnonzero(self.partition == p)
                    if self.entry[i] is not None
                )
            else:
                stale = set(members)
                entries[:] = [e for e in entries if e[-1] not in stale]
                for i in members:
                    bisect.insort(entries, self.entry[i])

    def remove_fixed(self, i: int, req: np.ndarray, hold: float) -> None:
        self.fixed[i] -= req
        if hold != INF:
            self.holds[hold][i] -= req
        self.grow_epoch += 1
        self._reindex(i)

    def add_evicted(self, rows: np.ndarray, reqs: np.ndarray, pcps: np.ndarray) -> None:
        levels = np.unique(pcps).tolist()
        for pcp in levels:
            sel = pcps == pcp
            arr = self.evicted.setdefault(int(pcp), np.zeros((self.n, self.d), dtype=np.int64))
            if len(levels) == 1:
                scatter_add(arr, rows, reqs)
            else:
                scatter_add(arr, rows[sel], reqs[sel])
        self.evicted_total = sum(self.evicted.values(), np.zeros((self.n, self.d), np.int64))

    def replace_evicted(self, rows: np.ndarray, reqs: np.ndarray, pcp: int) -> None:
        """Evicted jobs back on their nodes: free space (nothing displaced) is unchanged."""
        if len(rows) == 1:
            r = int(rows[0])
            self.evicted[pcp][r] -= reqs[0]
            self.evicted_total[r] -= reqs[0]
            self.fixed[r] += reqs[0]
            return
        scatter_add(self.evicted[pcp], rows, reqs, -1)
        scatter_add(self.evicted_total, rows, reqs, -1)
        scatter_add(self.fixed, rows, reqs)

    def drop_evicted(self, i: int, req: np.ndarray, pcp: int) -> None:
        self.evicted[pcp][i] -= req
        self.evicted_total[i] -= req
        self.grow_epoch += 1
        self._reindex(i)

    # --- tentative work ----------------------------------------------------------------------

    def save(self) -> tuple:
        return (
            self.fixed.copy(),
            self.evicted_total.copy(),
            {k: v.copy() for k, v in self.evicted.items()},
            {k: v.copy() for k, v in self.holds.items()},
            {k: list(v) for k, v in self.index.items()},
            list(self.entry),
        )

    def restore(self, saved: tuple) -> None:
        """Undo tentative work. Epochs only move forward, so caches never see a stale state."""
        (
            self.fixed,
            self.evicted_total,
            self.evicted,
            self.holds,
            self.index,
            self.entry,
        ) = saved
        self.grow_epoch += 1
