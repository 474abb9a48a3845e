"""Fast scheduler: the same decisions as ``reference``, with work proportional to decisions.

How it stays fast without changing a single decision:

* jobs are grouped by interned shape and sorted once per cycle with numpy;
* queues sit in a heap keyed exactly like the reference's scan over queues; when a queue wins,
  the number of consecutive wins for a run of identical jobs (or of evicted jobs) is computed
  in one vectorised step, because the other queues' keys do not move meanwhile;
* identical jobs are placed by filling the best-fit node until full, then the next: for
  identical requests that equals placing them one by one;
* placements that displace nothing use a sorted index on free resources (``nodedb``);
* evicted jobs go back to their own nodes in vectorised batches; with nothing queued and
  every node holding its running jobs, one vectorised check decides that nothing moves;
* a shape (or gang shape) that fits nowhere is remembered until urgency preemption frees
  space, since free space at the most permissive level only shrinks in between.

Anything unusual (urgency preemption, heterogeneous gangs, class limits on evicted jobs) goes
through a general path that follows the reference step by step on the same numpy state.
"""

from __future__ import annotations

import heapq
import operator
import time
from collections import defaultdict
from fractions import Fraction
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from . import reasons
from .constraints import node_admits, node_order, taints_tolerated
from .fairness import CostModel, protected_queues, usage_offsets
from .model import DEFAULT_RESOURCE_ORDER, Job, SchedulingResult, Snapshot, shape_of
from .nodedb import INF, NodeDb, best_fit_order, fit_counts, scatter_add
from .ratelimit import allowance

EVICTED, EXTRA, QUEUED = 0, 1, 2
_PROBE = 64
_BULK = 256  # runs at least this long are placed with one vectorised fill
_WINDOW = 4096  # evicted jobs looked at per step, so that a step costs O(1) amortised


class _Complex:
    """A gang (queued or evicted core) or one evicted member above a gang's minimum."""

    __slots__ = ("failed", "kind", "label", "members", "minimum", "parent", "pcp", "total")

    def __init__(self, kind, members, minimum, label, pcp, total, parent=None):
        self.kind = kind
        self.members = members  # job indices in order
        self.minimum = minimum
        self.label = label
        self.pcp = pcp
        self.total = total  # python list of ints
        self.parent = parent
        self.failed = False


class _Shape:
    """Per-cycle facts about one job shape."""

    __slots__ = (
        "a_exhausted",
        "cands",
        "constrained",
        "fail",
        "mask",
        "memo",
        "parts",
        "pc",
        "pc_known",
        "pcp",
        "preemptible",
        "req",
        "req_t",
        "static_reason",
    )


def fast_schedule(snapshot: Snapshot, timings: dict[str, float] | None = None) -> SchedulingResult:
    """Run one scheduling cycle; decisions are identical to ``reference_schedule``.

    ``timings``, when given, receives the seconds spent in each phase.
    """
    return _Fast(snapshot, timings).run()


def _dims(snapshot: Snapshot, shape_keys: list[tuple]) -> tuple[str, ...]:
    names: set[str] = set()
    for node in snapshot.nodes:
        names.update(node.capacity)
    for key in shape_keys:
        names.update(key[0])
    order = snapshot.config.resource_names
    known = list(order) if order is not None else [n for n in DEFAULT_RESOURCE_ORDER if n in names]
    return tuple(known + sorted(names - set(known)))


def _sum_by(target: np.ndarray, shape: np.ndarray, n: int, req: np.ndarray) -> np.ndarray:
    """Exact per-target sums of the requests of jobs (given by shape), as an (n, dims) array."""
    s = req.shape[0]
    if len(target) == 0:
        return np.zeros((n, req.shape[1]), dtype=np.int64)
    if n * s <= 4_000_000:
        counts = np.bincount(target * s + shape, minlength=n * s).reshape(n, s)
        return counts.astype(np.int64) @ req
    out = np.zeros((n, req.shape[1]), dtype=np.int64)
    np.add.at(out, target, req[shape])
    return out


def _pick(values: list, rows: np.ndarray) -> list:
    """values[rows] for a Python list, at C speed."""
    if len(rows) == 0:
        return []
    if len(rows) == 1:
        return [values[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(values))


def _stable_order(columns: list[np.ndarray], ids: list[str], anchor: np.ndarray) -> np.ndarray:
    """Positions ordered by the columns (first is primary), ties broken by the id of each
    position's anchor job."""
    rows = np.arange(len(anchor))
    if len(rows) == 0:
        return rows
    keys = [c[rows] for c in reversed(columns)]
    order = rows[np.lexsort(keys)]
    if len(order) < 2:
        return order
    same = np.ones(len(order) - 1, dtype=bool)
    for c in columns:
        v = c[order]
        same &= v[1:] == v[:-1]
    if not same.any():
        return order
    out = order.copy()
    # Groups of equal numeric keys: sort each by id, as the reference does.
    starts = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))) == 1)
    ends = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))) == -1)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        group = out[s : e + 1].tolist()
        group.sort(key=lambda i: ids[int(anchor[i])])
        out[s : e + 1] = group
    return out


class _Fast:
    def __init__(self, snapshot: Snapshot, timings: dict[str, float] | None = None):
        self.snap = snapshot
        self.cfg = snapshot.config
        self.result = SchedulingResult()
        self.timings = timings

    # ===================================================================== preparation ====

    def run(self) -> SchedulingResult:
        start = time.perf_counter()
        unchanged = self._prepare()
        prepared = time.perf_counter()
        if not unchanged:
            self._loop()
        looped = time.perf_counter()
        result = self.result if unchanged else self._finish()
        if self.timings is not None:
            self.timings["prepare"] = prepared - start
            self.timings["place"] = looped - prepared
            self.timings["finish"] = time.perf_counter() - looped
        return result

    def _prepare(self) -> bool:
        """Build the cycle's state; True when the cycle is already decided (``_unchanged``)."""
        snap, cfg = self.snap, self.cfg
        jobs = snap.jobs
        self.jobs = jobs
        nj = len(jobs)
        self.pcs = {pc.name: pc for pc in snap.priority_classes}
        self.queues = {q.name: q for q in snap.queues}
        self.qnames = sorted(self.queues)
        qrank = {name: i for i, name in enumerate(self.qnames)}
        nq = len(self.qnames)

        # Shapes.
        shape_ids = np.fromiter(map(attrgetter("shape_id"), jobs), dtype=np.int64, count=nj)
        uniq, local = np.unique(shape_ids, return_inverse=True)
        local = local.reshape(-1)
        keys = [shape_of(int(s)) for s in uniq.tolist()]
        self.shape_keys = keys
        self.dims = dims = _dims(snap, keys)
        nd = len(dims)
        self.shape_of_job = local
        self.shapes: list[_Shape] = []
        req = np.zeros((len(keys), nd), dtype=np.int64)
        for k, key in enumerate(keys):
            sh = _Shape()
            sh.req = np.array([key[0].get(d, 0) for d in dims], dtype=np.int64)
            req[k] = sh.req
            sh.req_t = tuple(sh.req.tolist())
            sh.pc = key[5]
            pc = self.pcs.get(sh.pc)
            sh.pc_known = pc is not None
            sh.pcp = pc.priority if pc is not None else 0
            sh.preemptible = pc.preemptible if pc is not None else False
            sh.cands = None
            sh.fail = None
            sh.a_exhausted = -1
            sh.memo = {}
            self.shapes.append(sh)
        self.req = req
        self.shape_pcp = np.array([sh.pcp for sh in self.shapes], dtype=np.int64)
        self.shape_known = np.array([sh.pc_known for sh in self.shapes], dtype=bool)
        class_names = sorted(self.pcs)
        class_rank = {n: i for i, n in enumerate(class_names)}
        self.class_names = class_names
        shape_class = np.array([class_rank.get(sh.pc, -1) for sh in self.shapes], dtype=np.int64)

        # Nodes.
        gang_ids = list(map(attrgetter("gang_id"), jobs))
        in_gang = np.fromiter(map(operator.is_not, gang_ids, repeat(None)), dtype=bool, count=nj)
        gang_labels = {jobs[i].gang_uniformity_label for i in np.flatnonzero(in_gang).tolist()}
        nodes = node_order(snap.nodes, gang_labels)
        self.nodes = nodes
        nn = len(nodes)
        node_index = {n.id: i for i, n in enumerate(nodes)}
        cap = np.array(
            [[n.capacity.get(d, 0) for d in dims] for n in nodes], dtype=np.int64
        ).reshape(nn, nd)
        cordoned = np.array([n.cordoned for n in nodes], dtype=bool)
        totals = cap[~cordoned].sum(axis=0) if nn else np.zeros(nd, dtype=np.int64)
        self.totals = [int(t) for t in totals.tolist()]
        self.costs = CostModel.build(dims, self.totals, cfg.resource_multipliers)
        self.cost_cols = np.array([t > 0 for t in self.totals], dtype=bool)
        self.cost_tot = np.array(self.totals, dtype=np.float64)[self.cost_cols]
        self.cost_mult = np.array(self.costs.multipliers, dtype=np.float64)[self.cost_cols]
        self.cap = cap

        # Jobs.
        lookup: defaultdict[str, int] = defaultdict(lambda: -1, qrank)
        qidx = np.fromiter(
            map(lookup.__getitem__, map(attrgetter("queue"), jobs)), dtype=np.int64, count=nj
        )
        node_names = list(map(attrgetter("node"), jobs))
        is_running = np.fromiter(
            map(operator.is_not, node_names, repeat(None)), dtype=bool, count=nj
        )
        known_pc = self.shape_known[local]
        job_pcp = self.shape_pcp[local]
        self.job_pcp = job_pcp

        running_rows = np.flatnonzero(is_running)
        run_node = np.full(nj, -1, dtype=np.int64)
        if len(running_rows):
            where: defaultdict[str | None, int] = defaultdict(lambda: -1, node_index)
            run_node[running_rows] = list(map(where.__getitem__, _pick(node_names, running_rows)))
        running_rows = running_rows[run_node[running_rows] >= 0]
        self.run_node = run_node
        accounted = np.zeros(nj, dtype=bool)
        accounted[running_rows] = (qidx[running_rows] >= 0) & known_pc[running_rows]
        if len(running_rows) == nj and self._unchanged(qidx, local, running_rows, accounted):
            return True

        part_keys: dict[tuple, int] = {}
        part_list = [-1] * nn
        present = (cap > 0).tolist()
        dim_sets: dict[tuple, frozenset] = {}
        for i, n in enumerate(nodes):
            if n.cordoned:
                continue
            flags = tuple(present[i])
            dims_present = dim_sets.get(flags)
            if dims_present is None:
                dims_present = frozenset(d for d, f in zip(dims, flags, strict=True) if f)
                dim_sets[flags] = dims_present
            part_list[i] = part_keys.setdefault((n.taints, dims_present), len(part_keys))
        partition = np.array(part_list, dtype=np.int64)
        self.part_info = {v: k for k, v in part_keys.items()}
        self.db = NodeDb(cap, partition, ~cordoned)

        self.ids = list(map(attrgetter("id"), jobs))
        result = self.result
        queued_rows = np.flatnonzero(~is_running)
        bad_queue = queued_rows[qidx[queued_rows] < 0]
        bad_pc = queued_rows[(qidx[queued_rows] >= 0) & ~known_pc[queued_rows]]
        ids = self.ids
        for i in sorted(bad_queue.tolist() + bad_pc.tolist(), key=lambda i: ids[i]):
            result.failed[ids[i]] = (
                reasons.UNKNOWN_QUEUE if qidx[i] < 0 else reasons.UNKNOWN_PRIORITY_CLASS
            )
        valid_queued = queued_rows[(qidx[queued_rows] >= 0) & known_pc[queued_rows]]

        # Fair share.
        active_q = np.unique(
            np.concatenate([qidx[valid_queued], qidx[running_rows[accounted[running_rows]]]])
        )
        active = [self.qnames[q] for q in active_q.tolist()]
        self.weights = {q: self.queues[q].weight for q in active}
        start = np.zeros((nq, nd), dtype=np.int64)
        acc_rows = running_rows[accounted[running_rows]]
        start += _sum_by(qidx[acc_rows], local[acc_rows], nq, req)
        demand = start.copy()
        demand += _sum_by(qidx[valid_queued], local[valid_queued], nq, req)
        qi = {name: qrank[name] for name in active}
        shares = {q: self.costs.cost(start[qi[q]].tolist()) for q in active}
        demands = {q: self.costs.cost(demand[qi[q]].tolist()) for q in active}
        protected = protected_queues(shares, self.weights, demands, cfg.protected_fraction)
        self.offsets = usage_offsets(
            {q: self.queues[q].decayed_usage for q in active},
            shares,
            snap.usage_elapsed,
            cfg.usage_half_life,
        )
        self.q_weight = [self.weights.get(n, 1.0) for n in self.qnames]
        self.q_offset = [self.offsets.get(n, 0.0) for n in self.qnames]
        prot = np.array([n in protected for n in self.qnames], dtype=bool)

        # Running jobs: preemptible, evicted or holding.
        preemptible = np.zeros(nj, dtype=bool)
        if len(running_rows):
            by_class = np.array([sh.preemptible for sh in self.shapes], dtype=bool)
            preemptible[running_rows] = by_class[local[running_rows]]
            now = snap.now
            # Only jobs not preemptible by class can become so through their lifetime.
            for i in running_rows[~preemptible[running_rows]].tolist():
                jb = jobs[i]
                if (
                    jb.lifetime is not None
                    and jb.start_time is not None
                    and now - jb.start_time >= jb.lifetime
                ):
                    preemptible[i] = True
        gang_running = running_rows[in_gang[running_rows]].tolist()
        single_running = running_rows
        if gang_running:
            mark = np.zeros(nj, dtype=bool)
            mark[gang_running] = True
            single_running = running_rows[~mark[running_rows]]
        hold = np.full(nj, INF)
        self.hold = hold
        single_ok = accounted[single_running] & preemptible[single_running]
        qs = qidx[single_running]
        evict_single = single_running[single_ok & ~prot[np.maximum(qs, 0)]]
        keep_pre = single_running[single_ok & prot[np.maximum(qs, 0)]]
        hold[keep_pre] = job_pcp[keep_pre].astype(np.float64)
        evicted_mask = np.zeros(nj, dtype=bool)
        evicted_mask[evict_single] = True
        self.unit_of: dict[int, list[int]] = {}
        complex_items: list[_Complex] = []
        complex_anchor: list[int] = []
        complex_kind: list[int] = []
        if gang_running:
            units: dict[tuple[str, str], list[int]] = defaultdict(list)
            for i in gang_running:
                units[(jobs[i].queue, gang_ids[i])].append(i)
            for key in sorted(units):
                members = units[key]
                members.sort(key=lambda i: self._running_order_or_id(i))
                for i in members:
                    self.unit_of[i] = members
                if all(accounted[i] and preemptible[i] for i in members):
                    if not prot[qidx[members[0]]]:
                        evicted_mask[members] = True
                        first = jobs[members[0]]
                        minimum = max(1, min(first.min_cardinality, len(members)))
                        core = self._complex(EVICTED, members[:minimum], minimum, None)
                        complex_items.append(core)
                        complex_anchor.append(members[0])
                        complex_kind.append(EVICTED)
                        for extra in members[minimum:]:
                            complex_items.append(self._complex(EXTRA, [extra], 1, None, core))
                            complex_anchor.append(extra)
                            complex_kind.append(EXTRA)
                        continue
                    hold[members] = float(min(int(job_pcp[i]) for i in members))
        self.evicted_mask = evicted_mask

        # Node state.
        db = self.db
        fixed_rows = running_rows[~evicted_mask[running_rows]]
        db.fixed += _sum_by(run_node[fixed_rows], local[fixed_rows], nn, req)
        finite = fixed_rows[np.isfinite(hold[fixed_rows])]
        for h in np.unique(hold[finite]).tolist():
            rows = finite[hold[finite] == h]
            arr = db.holds.setdefault(float(h), np.zeros((nn, nd), dtype=np.int64))
            scatter_add(arr, run_node[rows], req[local[rows]])
        self.displaceable = finite
        ev_rows = np.flatnonzero(evicted_mask)
        db.add_evicted(run_node[ev_rows], req[local[ev_rows]], job_pcp[ev_rows])
        db.build_index()
        self.by_node: dict[int, list[int]] | None = None

        # Queue allocation (what holds space now) per queue and per class.
        acc_fixed = fixed_rows[accounted[fixed_rows]]
        alloc = np.zeros((nq, nd), dtype=np.int64)
        alloc += _sum_by(qidx[acc_fixed], local[acc_fixed], nq, req)
        self.alloc = [row for row in alloc.tolist()]
        #: What each queue holds or may still get back (evicted, not yet re-placed): the
        #: basis of its fraction of fair share when victims are chosen.
        self.usage = [row for row in start.tolist()]
        #: Evicted jobs re-placed or dropped; per class priority, a counter of such changes.
        self.ev_gone = np.zeros(nj, dtype=bool)
        #: Per class priority, per queue: evicted jobs not yet re-placed, per node (built on
        #: first use, then kept up to date).
        self.ev_groups: dict[int, dict[int, np.ndarray]] = {}
        self.hold_epoch = 0
        self.hold_groups: tuple[int, dict[tuple[float, int], np.ndarray]] | None = None
        by_class = np.zeros((nq, max(len(class_names), 1), nd), dtype=np.int64)
        nc = by_class.shape[1]
        by_class += _sum_by(
            qidx[acc_fixed] * nc + shape_class[local[acc_fixed]], local[acc_fixed], nq * nc, req
        ).reshape(nq, nc, nd)
        self.alloc_class: dict[tuple[int, str], list[int]] = {}
        for q, c in zip(*np.nonzero(by_class.any(axis=2)), strict=True):
            self.alloc_class[(int(q), class_names[int(c)])] = by_class[q, c].tolist()
        self.new_total = [0] * nd
        self.new_count = 0
        #: New jobs per queue, and the rate limits' allowances (None: no limit).
        self.new_by_q = [0] * nq
        self.rate_global = allowance(cfg.scheduling_rate, cfg.scheduling_burst, snap.rate_tokens)
        self.q_rate = [
            allowance(
                cfg.queue_scheduling_rate,
                cfg.queue_scheduling_burst,
                snap.queue_rate_tokens.get(name),
            )
            for name in self.qnames
        ]
        self.shrink_epoch = 0
        self.gang_cache: dict[tuple, tuple[int, str]] = {}
        self.label_cache: dict[str, tuple[list[str], np.ndarray]] = {}
        self.preempted: set[int] = set()
        self.journal: list[tuple] | None = None

        # Queued work: cordoned queues, gangs, singles.
        self.qidx = qidx
        cordoned_q = np.array([self.queues[n].cordoned for n in self.qnames], dtype=bool)
        vq = valid_queued
        if len(vq) and cordoned_q.any():
            cq = vq[cordoned_q[qidx[vq]]]
            for i in cq.tolist():
                result.unscheduled[ids[i]] = reasons.QUEUE_CORDONED
            vq = vq[~cordoned_q[qidx[vq]]]
        gang_queued = vq[in_gang[vq]].tolist()
        single_queued = vq
        if gang_queued:
            mark = np.zeros(nj, dtype=bool)
            mark[gang_queued] = True
            single_queued = vq[~mark[vq]]
            gangs: dict[tuple[str, str], list[int]] = defaultdict(list)
            for i in gang_queued:
                gangs[(jobs[i].queue, gang_ids[i])].append(i)
            for key in sorted(gangs):
                members = gangs[key]
                members.sort(key=lambda i: self._queued_order(i))
                cardinality = jobs[members[0]].gang_cardinality
                if len(members) > cardinality:
                    for i in members:
                        result.failed[ids[i]] = reasons.GANG_TOO_MANY
                    continue
                if len(members) < cardinality:
                    for i in members:
                        result.unscheduled[ids[i]] = reasons.gang_incomplete(
                            len(members), cardinality
                        )
                    continue
                first = jobs[members[0]]
                minimum = max(1, min(first.min_cardinality, len(members)))
                item = self._complex(QUEUED, members, minimum, first.gang_uniformity_label)
                complex_items.append(item)
                complex_anchor.append(members[0])
                complex_kind.append(QUEUED)
        self.complex = complex_items

        # One ordered sequence of items per queue.
        n_single_ev = len(evict_single)
        anchors = np.concatenate(
            [
                evict_single,
                np.array(complex_anchor, dtype=np.int64),
                single_queued,
            ]
        ).astype(np.int64)
        kinds = np.concatenate(
            [
                np.full(n_single_ev, EVICTED, dtype=np.int64),
                np.array(complex_kind, dtype=np.int64),
                np.full(len(single_queued), QUEUED, dtype=np.int64),
            ]
        )
        codes = np.concatenate(
            [
                evict_single,
                -1 - np.arange(len(complex_anchor), dtype=np.int64),
                single_queued,
            ]
        ).astype(np.int64)
        self.seq: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * nq
        self.seg_end: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * nq
        self.pos = [0] * nq
        self.next_barrier: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * nq
        if len(anchors):
            priority = np.fromiter(map(attrgetter("priority"), jobs), dtype=np.int64, count=nj)
            submit = np.fromiter(map(attrgetter("submit_time"), jobs), dtype=np.float64, count=nj)
            start_t = np.zeros(nj, dtype=np.float64)
            run_list = running_rows.tolist()
            if run_list:
                starts = map(attrgetter("start_time"), _pick(jobs, running_rows))
                start_t[running_rows] = [0.0 if t is None else t for t in starts]
            # Columns per item (indexed by position in ``anchors``).
            cols = [
                qidx[anchors],
                -job_pcp[anchors],
                kinds,
                priority[anchors],
                np.where(kinds == QUEUED, 0.0, start_t[anchors]),
                submit[anchors],
            ]
            order = _stable_order(cols, ids, anchors)
            if cfg.max_queue_lookback is not None:
                sizes = np.concatenate(
                    [
                        np.zeros(n_single_ev, dtype=np.int64),
                        np.array(
                            [len(c.members) if c.kind == QUEUED else 0 for c in complex_items],
                            dtype=np.int64,
                        ),
                        np.ones(len(single_queued), dtype=np.int64),
                    ]
                )
                order = self._lookback(order, cols[0], sizes, codes)
                if len(order) == 0:
                    return False  # nothing left to order
            ordered_codes = codes[order]
            ordered_q = cols[0][order]
            # Run classes: identical queued shapes, or evicted singles of equal priority.
            cls = np.empty(len(order), dtype=np.int64)
            oc = ordered_codes
            single = oc >= 0
            safe = np.where(single, oc, 0)
            run_flag = is_running[safe] & single
            cls[:] = 2 * local[safe]
            cls[run_flag] = 2 * job_pcp[safe[run_flag]] + 1 + 2 * 10**9
            cls[~single] = -1 - np.arange(int((~single).sum()))
            bounds = np.flatnonzero(np.diff(ordered_q)) + 1
            for q_start, q_end in zip(
                np.concatenate(([0], bounds)).tolist(),
                np.concatenate((bounds, [len(order)])).tolist(),
                strict=True,
            ):
                q = int(ordered_q[q_start])
                seq = ordered_codes[q_start:q_end]
                c = cls[q_start:q_end]
                change = np.flatnonzero(c[1:] != c[:-1]) + 1
                ends = np.concatenate((change, [len(seq)]))
                seg = np.repeat(ends, np.diff(np.concatenate(([0], ends))))
                self.seq[q] = seq
                self.seg_end[q] = seg
                # Next position that is not an evicted single job (the end of a batch).
                ev = (seq >= 0) & is_running[np.where(seq >= 0, seq, 0)]
                idx = np.where(ev, len(seq), np.arange(len(seq)))
                self.next_barrier[q] = np.minimum.accumulate(idx[::-1])[::-1]
        return False

    def _lookback(
        self, order: np.ndarray, qcol: np.ndarray, sizes: np.ndarray, codes: np.ndarray
    ) -> np.ndarray:
        """Drop the queued items that start beyond the queue's first ``max_queue_lookback``
        queued jobs (``order`` is grouped by queue), giving their jobs the lookback reason."""
        lookback = self.cfg.max_queue_lookback
        assert lookback is not None
        sz = sizes[order]
        q = qcol[order]
        before = np.cumsum(sz) - sz
        starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
        lengths = np.diff(np.concatenate((starts, [len(q)])))
        before -= np.repeat(before[starts], lengths)
        beyond = (sz > 0) & (before >= lookback)
        if not beyond.any():
            return order
        reason = reasons.queue_lookback(lookback)
        dropped = codes[order[beyond]]
        self._fail_rows(dropped[dropped >= 0], reason)
        for c in dropped[dropped < 0].tolist():
            self._fail_rows(np.array(self.complex[-1 - c].members), reason)
        return order[~beyond]

    def _unchanged(
        self, qidx: np.ndarray, shape: np.ndarray, rows: np.ndarray, accounted: np.ndarray
    ) -> bool:
        """Decide a steady state in one vectorised step.

        With nothing queued, evicted jobs compete only for their own nodes. If every node holds
        all its running jobs and no queue exceeds a per-class cap with all of its jobs, each
        evicted job fits back whatever the order of re-placement, so nothing is scheduled or
        preempted, whichever queues are protected. Otherwise the full cycle decides.
        """
        req, nq = self.req, len(self.qnames)
        held = _sum_by(self.run_node[rows], shape[rows], len(self.nodes), req)
        if (held > self.cap).any():
            return False
        acc = rows[accounted[rows]]
        alloc = _sum_by(qidx[acc], shape[acc], nq, req)
        for pc in self.pcs.values():
            if not pc.max_fraction_per_queue:
                continue
            mine = acc[np.array([sh.pc == pc.name for sh in self.shapes], dtype=bool)[shape[acc]]]
            by_queue = _sum_by(qidx[mine], shape[mine], nq, req).tolist()
            for d, name in enumerate(self.dims):
                if name not in pc.max_fraction_per_queue:
                    continue
                limit = pc.max_fraction_per_queue[name] * self.totals[d]
                if any(row[d] > limit for row in by_queue):
                    return False
        costs = alloc.tolist()
        for k, name in enumerate(self.qnames):
            self.result.queue_costs[name] = self.costs.cost(costs[k])
        return True

    def _complex(self, kind, members, minimum, label, parent=None) -> _Complex:
        total = self.req[self.shape_of_job[members]].sum(axis=0).tolist()
        pcp = int(min(int(self.job_pcp[i]) for i in members))
        return _Complex(kind, members, minimum, label, pcp, total, parent)

    def _queued_order(self, i: int) -> tuple:
        j = self.jobs[i]
        return (-int(self.job_pcp[i]), j.priority, j.submit_time, j.id)

    def _running_order(self, i: int) -> tuple:
        j = self.jobs[i]
        start = j.start_time if j.start_time is not None else 0.0
        return (-int(self.job_pcp[i]), j.priority, start, j.submit_time, j.id)

    def _running_order_or_id(self, i: int) -> tuple:
        if self.shapes[self.shape_of_job[i]].pc_known:
            return self._running_order(i)
        return (0, 0, 0.0, 0.0, self.jobs[i].id)

    # ===================================================================== queue keys ====

    def _key(self, q: int, extra: list[int] | np.ndarray | None) -> float:
        alloc = self.alloc[q]
        if extra is not None:
            alloc = [a + int(b) for a, b in zip(alloc, extra, strict=True)]
        return (self.costs.cost(alloc) + self.q_offset[q]) / self.q_weight[q]

    def _keys(self, q: int, cum: np.ndarray) -> np.ndarray:
        """Keys after adding each prefix (rows of ``cum``), with the reference's float ops."""
        alloc = np.asarray(self.alloc[q], dtype=np.int64) + cum
        if not self.cost_cols.any():
            costs = np.zeros(len(cum))
        else:
            shares = alloc[:, self.cost_cols].astype(np.float64) * self.cost_mult / self.cost_tot
            costs = np.maximum(shares.max(axis=1), 0.0)
        return (costs + self.q_offset[q]) / self.q_weight[q]

    def _head(self, q: int) -> tuple | None:
        pos = self.pos[q]
        seq = self.seq[q]
        if pos >= len(seq):
            return None
        code = int(seq[pos])
        if code < 0:
            item = self.complex[-1 - code]
            return (-item.pcp, self._key(q, item.total), q, q)
        sh = self.shapes[self.shape_of_job[code]]
        return (-sh.pcp, self._key(q, sh.req_t), q, q)

    def _wins(self, q: int, neg_p: int, bound: tuple | None, reqs: np.ndarray) -> int:
        """How many of the next items (requests ``reqs``) q takes before another queue wins."""
        m = len(reqs)
        if bound is None or neg_p < bound[0]:
            return m
        bkey, brank = bound[1], bound[2]
        if m >= 2:
            # Most pops in a busy cluster win once: settle that without numpy.
            two = [int(x) for x in reqs[0] + reqs[1]]
            key = self._key(q, two)
            if not (key < bkey or (key == bkey and q < brank)):
                return 1
        done = 0
        base = np.zeros(self.db.d, dtype=np.int64)
        step = _PROBE
        while done < m:
            chunk = reqs[done : done + step]
            cum = np.cumsum(chunk, axis=0) + base
            keys = self._keys(q, cum)
            win = (keys < bkey) | ((keys == bkey) & (q < brank))
            lost = np.flatnonzero(~win)
            if len(lost):
                return done + int(lost[0])
            done += len(chunk)
            base = cum[-1]
            step *= 4
        return m

    # ===================================================================== main loop ====

    def _loop(self) -> None:
        self.heap: list[tuple] = []
        for q in range(len(self.qnames)):
            head = self._head(q)
            if head is not None:
                self.heap.append(head)
        heapq.heapify(self.heap)
        heap = self.heap
        self.rebuild = False
        self.batch_ok = not any(pc.max_fraction_per_queue for pc in self.pcs.values())
        skip = 0
        while heap:
            if self.batch_ok and skip <= 0:
                q0 = heap[0][3]
                code0 = int(self.seq[q0][self.pos[q0]])
                if code0 >= 0 and self.evicted_mask[code0]:
                    done, scanned = self._evicted_batch()
                    if done:
                        heap[:] = [h for h in (self._head(k) for k in range(len(self.qnames))) if h]
                        heapq.heapify(heap)
                        # Scanning costs; back off when batches come out small.
                        skip = scanned // (8 * done)
                        continue
                    skip = 64
            skip -= 1
            top = heapq.heappop(heap)
            q = top[3]
            bound = heap[0] if heap else None
            seq = self.seq[q]
            pos = self.pos[q]
            code = int(seq[pos])
            if code < 0:
                item = self.complex[-1 - code]
                if item.kind == QUEUED:
                    self._queued_gang(q, item)
                else:
                    self._evicted_complex(q, item)
                self.pos[q] = pos + 1
            elif self.evicted_mask[code]:
                self.pos[q] = pos + self._evicted_run(q, top[0], bound, pos)
            else:
                self.pos[q] = pos + self._queued_run(q, top[0], bound, pos)
            if self.rebuild:
                self.rebuild = False
                heap[:] = [h for h in (self._head(k) for k in range(len(self.qnames))) if h]
                heapq.heapify(heap)
                continue
            head = self._head(q)
            if head is not None:
                heapq.heappush(heap, head)

    # --- evicted jobs ---------------------------------------------------------------------

    def _evicted_batch(self, window: int = 4096) -> tuple[int, int]:
        """Re-place every evicted job that comes before the next other event, in one step.

        Evicted jobs only return to their own nodes; until a queued job is placed they cannot
        take each other's space (checked below per node), so the order among them is
        irrelevant and all that matters is which of them precede the first other event.
        """
        barrier: tuple | None = None
        spans = []
        scanned = 0
        for q in range(len(self.qnames)):
            seq = self.seq[q]
            p0 = self.pos[q]
            if p0 >= len(seq):
                continue
            e = int(self.next_barrier[q][p0])
            cut = min(e, p0 + window)
            rows = seq[p0:cut]
            cum = None
            if len(rows):
                cum = np.cumsum(self.req[self.shape_of_job[rows]], axis=0)
                scanned += len(rows)
            if cut < len(seq):
                code = int(seq[cut])
                if code < 0:
                    item = self.complex[-1 - code]
                    pcp, total = item.pcp, np.asarray(item.total, dtype=np.int64)
                else:
                    pcp, total = int(self.job_pcp[code]), self.req[self.shape_of_job[code]]
                extra = total if cum is None else cum[-1] + total
                key = (-pcp, float(self._keys(q, extra[None, :])[0]), q)
                if barrier is None or key < barrier:
                    barrier = key
            if len(rows):
                spans.append((q, p0, rows, cum))
        picked = []
        for q, _start, rows, cum in spans:
            neg = -self.job_pcp[rows]
            keys = self._keys(q, cum)
            if barrier is None:
                count = len(rows)
            else:
                b0, b1, b2 = barrier
                before = (neg < b0) | ((neg == b0) & ((keys < b1) | ((keys == b1) & (q < b2))))
                bad = np.flatnonzero(~before)
                count = int(bad[0]) if len(bad) else len(rows)
            if count:
                picked.append((q, rows[:count], cum[count - 1]))
        if not picked:
            return 0, scanned
        all_rows = np.concatenate([r for _, r, _ in picked])
        nodes = self.run_node[all_rows]
        reqs = self.req[self.shape_of_job[all_rows]]
        db = self.db
        need = np.zeros((db.n, db.d), dtype=np.int64)
        scatter_add(need, nodes, reqs)
        touched = need.any(axis=1)
        if not (db.fixed[touched] + need[touched] <= db.cap[touched]).all():
            return 0, scanned
        pcps = self.job_pcp[all_rows]
        self._ev_done(all_rows)
        for pcp in np.unique(pcps).tolist():
            sel = pcps == pcp
            db.replace_evicted(nodes[sel], reqs[sel], int(pcp))
        for q, rows, total in picked:
            self.alloc[q] = [a + b for a, b in zip(self.alloc[q], total.tolist(), strict=True)]
            shapes = self.shape_of_job[rows]
            for sid in np.unique(shapes).tolist():
                vec = (self.req[sid] * int((shapes == sid).sum())).tolist()
                self._add_class(q, self.shapes[sid].pc, vec)
            self.pos[q] += len(rows)
        return len(all_rows), scanned

    def _evicted_run(self, q: int, neg_p: int, bound: tuple | None, pos: int) -> int:
        end = min(int(self.seg_end[q][pos]), pos + _WINDOW)
        rows = self.seq[q][pos:end]
        shapes = self.shape_of_job[rows]
        limited = any(
            self.pcs[self.shapes[s].pc].max_fraction_per_queue for s in set(shapes.tolist())
        )
        if limited:
            self._evicted_one(q, int(rows[0]))
            return 1
        reqs = self.req[shapes]
        k = max(1, self._wins(q, neg_p, bound, reqs))
        rows, reqs, shapes = rows[:k], reqs[:k], shapes[:k]
        nodes = self.run_node[rows]
        db = self.db
        if k == 1:
            n = int(nodes[0])
            fits = bool((db.fixed[n] + reqs[0] <= db.cap[n]).all())
        else:
            touched, inverse = np.unique(nodes, return_inverse=True)
            need = np.zeros((len(touched), db.d), dtype=np.int64)
            scatter_add(need, inverse.reshape(-1), reqs)
            fits = bool((db.fixed[touched] + need <= db.cap[touched]).all())
        if not fits:
            self._evicted_one(q, int(rows[0]))
            return 1
        pcp = int(self.job_pcp[rows[0]])
        db.replace_evicted(nodes, reqs, pcp)
        self._ev_done(rows)
        total = reqs.sum(axis=0).tolist()
        self.alloc[q] = [a + b for a, b in zip(self.alloc[q], total, strict=True)]
        for s in np.unique(shapes).tolist():
            sel = reqs[shapes == s].sum(axis=0).tolist()
            self._add_class(q, self.shapes[s].pc, sel)
        return k

    def _ev_done(self, rows: np.ndarray) -> None:
        """Evicted jobs re-placed or dropped: no longer victims of displacement."""
        self.ev_gone[rows] = True
        if not self.ev_groups:
            return
        if len(rows) == 1:
            i = int(rows[0])
            groups = self.ev_groups.get(int(self.job_pcp[i]))
            if groups is not None:
                groups[int(self.qidx[i])][int(self.run_node[i])] -= self.req[self.shape_of_job[i]]
            return
        pcps = self.job_pcp[rows]
        for pcp in np.unique(pcps).tolist():
            groups = self.ev_groups.get(int(pcp))
            if groups is None:
                continue
            sel = rows[pcps == pcp]
            qs = self.qidx[sel]
            for q in np.unique(qs).tolist():
                mine = sel[qs == q]
                scatter_add(groups[q], self.run_node[mine], self.req[self.shape_of_job[mine]], -1)

    def _add_class(self, q: int, pc: str, vec: list[int], sign: int = 1) -> None:
        key = (q, pc)
        cur = self.alloc_class.get(key)
        if cur is None:
            cur = [0] * len(vec)
        self.alloc_class[key] = [a + sign * b for a, b in zip(cur, vec, strict=True)]

    def _class_limit(self, q: int, members: list[int]) -> str | None:
        by_class: dict[str, list[int]] = {}
        for i in members:
            sh = self.shapes[self.shape_of_job[i]]
            cur = by_class.get(sh.pc, [0] * len(self.dims))
            by_class[sh.pc] = [a + b for a, b in zip(cur, sh.req_t, strict=True)]
        for pc_name in sorted(by_class):
            limits = self.pcs[pc_name].max_fraction_per_queue
            if not limits:
                continue
            base = self.alloc_class.get((q, pc_name), [0] * len(self.dims))
            for d, name in enumerate(self.dims):
                if (
                    name in limits
                    and base[d] + by_class[pc_name][d] > limits[name] * self.totals[d]
                ):
                    return reasons.queue_class_limit(pc_name)
        return None

    def _evicted_one(self, q: int, i: int) -> None:
        self._evicted_members(q, [i], None)

    def _evicted_complex(self, q: int, item: _Complex) -> None:
        self._evicted_members(q, item.members, item)

    def _evicted_members(self, q: int, members: list[int], item: _Complex | None) -> None:
        db = self.db
        ok = not (item is not None and item.parent is not None and item.parent.failed)
        if ok and self._class_limit(q, members) is not None:
            ok = False
        if ok:
            extra: dict[int, np.ndarray] = {}
            for i in members:
                n = int(self.run_node[i])
                r = self.req[self.shape_of_job[i]]
                have = extra.get(n, np.zeros(db.d, dtype=np.int64))
                if not (db.fixed[n] + have + r <= db.cap[n]).all():
                    ok = False
                    break
                extra[n] = have + r
        if ok:
            for i in members:
                n = int(self.run_node[i])
                s = self.shape_of_job[i]
                r = self.req[s]
                db.replace_evicted(np.array([n]), r[None, :], int(self.job_pcp[i]))
                self._ev_done(np.array([i]))
                self.alloc[q] = [
                    a + b for a, b in zip(self.alloc[q], self.shapes[s].req_t, strict=True)
                ]
                self._add_class(q, self.shapes[s].pc, list(self.shapes[s].req_t))
            return
        if item is not None:
            item.failed = True
        for i in members:
            n = int(self.run_node[i])
            db.drop_evicted(n, self.req[self.shape_of_job[i]], int(self.job_pcp[i]))
            self._ev_done(np.array([i]))
            self._use(q, self.shapes[self.shape_of_job[i]].req_t, -1)
            self.preempted.add(i)

    # --- queued single jobs ---------------------------------------------------------------

    def _fail_rows(self, rows: np.ndarray, reason: str) -> None:
        if len(rows) == 1:
            self.result.unscheduled[self.ids[int(rows[0])]] = reason
        elif len(rows):
            picked = itemgetter(*rows.tolist())(self.ids)
            self.result.unscheduled.update(dict.fromkeys(picked, reason))

    def _queued_run(self, q: int, neg_p: int, bound: tuple | None, pos: int) -> int:
        end = int(self.seg_end[q][pos])
        rows = self.seq[q][pos:end]
        m = len(rows)
        s = int(self.shape_of_job[rows[0]])
        sh = self.shapes[s]
        if sh.cands is None:
            self._static(sh, s)
        c_lim, lim_reason = self._run_limits(q, sh, m)
        if c_lim == 0:
            self._fail_rows(rows, lim_reason)  # type: ignore[arg-type]
            return m
        if sh.fail is not None and sh.fail[0] == self.shrink_epoch:
            # Failures change nothing, so every job of the run passes the limits and fails.
            self._fail_rows(rows, sh.fail[1])
            return m
        k = max(1, self._wins(q, neg_p, bound, _Repeat(sh.req, min(m, c_lim))))
        n_try = min(k, c_lim, m)
        placed, reason, stopped = self._place_identical(sh, s, rows[:n_try])
        p = len(placed)
        if p:
            self._commit_run(q, sh, rows[:p], placed)
        if stopped:
            # Either an urgency preemption changed other queues' costs, or placement paused
            # before one: re-evaluate every queue from here.
            self.rebuild = True
            return p
        if p < n_try:
            sh.fail = (self.shrink_epoch, reason)
            self._fail_rows(rows[p:], reason)  # type: ignore[arg-type]
            return m
        if n_try == m:
            return m
        if n_try == k:
            return p
        self._fail_rows(rows[p:], lim_reason)  # type: ignore[arg-type]
        return m

    def _commit_run(self, q: int, sh: _Shape, rows: np.ndarray, placed: list[int]) -> None:
        p = len(placed)
        ids = self.ids
        if p == 1:
            self.result.scheduled[ids[int(rows[0])]] = self.nodes[placed[0]].id
        else:
            node_ids = [self.nodes[n].id for n in placed]
            self.result.scheduled.update(
                zip((ids[i] for i in rows.tolist()), node_ids, strict=True)
            )
        if self.journal is not None:
            self.journal.extend(("sched", ids[i]) for i in rows.tolist())
        alloc = self.alloc[q]
        new_total = self.new_total
        by_class = self.alloc_class.get((q, sh.pc))
        if by_class is None:
            by_class = self.alloc_class[(q, sh.pc)] = [0] * len(alloc)
        usage = self.usage[q]
        for d, v in enumerate(sh.req_t):
            if v:
                v *= p
                alloc[d] += v
                new_total[d] += v
                by_class[d] += v
                usage[d] += v
        self.new_count += p
        self.new_by_q[q] += p

    def _run_limits(self, q: int, sh: _Shape, m: int) -> tuple[int, str | None]:
        cfg = self.cfg
        c_jobs = m
        if cfg.max_jobs_per_cycle is not None:
            c_jobs = max(0, min(m, cfg.max_jobs_per_cycle - self.new_count))
        c_res = m
        for d, name in enumerate(self.dims):
            if name in cfg.max_fraction_per_cycle:
                limit = cfg.max_fraction_per_cycle[name] * self.totals[d]
                c_res = min(c_res, _count_within(self.new_total[d], sh.req_t[d], limit, m))
        c_cls = m
        limits = self.pcs[sh.pc].max_fraction_per_queue
        if limits:
            base = self.alloc_class.get((q, sh.pc), [0] * len(self.dims))
            for d, name in enumerate(self.dims):
                if name in limits:
                    limit = limits[name] * self.totals[d]
                    c_cls = min(c_cls, _count_within(base[d], sh.req_t[d], limit, m))
        c_rate = m
        if self.rate_global is not None:
            c_rate = max(0, min(m, self.rate_global - self.new_count))
        c_qrate = m
        own = self.q_rate[q]
        if own is not None:
            c_qrate = max(0, min(m, own - self.new_by_q[q]))
        b = min(c_jobs, c_res, c_rate, c_qrate, c_cls, m)
        if b >= m:
            return m, None
        if c_jobs == b:
            return b, reasons.MAX_JOBS_PER_CYCLE
        if c_res == b:
            return b, reasons.MAX_RESOURCES_PER_CYCLE
        if c_rate == b:
            return b, reasons.GLOBAL_RATE_LIMIT
        if c_qrate == b:
            return b, reasons.QUEUE_RATE_LIMIT
        return b, reasons.queue_class_limit(sh.pc)

    # --- static constraints ---------------------------------------------------------------

    def _static(self, sh: _Shape, s: int) -> None:
        requests, selector, tolerations, affinity, avoid, pc = self.shape_keys[s]
        parts = [
            p for p, (taints, _) in self.part_info.items() if taints_tolerated(taints, tolerations)
        ]
        base = np.isin(self.db.partition, np.array(parts, dtype=np.int64)) & self.db.indexed
        constrained = bool(selector) or bool(affinity) or avoid is not None
        if constrained:
            probe = Job(
                "",
                "",
                pc,
                requests,
                node_selector=dict(selector),
                tolerations=tolerations,
                affinity=affinity,
                avoid_node=avoid,
            )
            mask = base.copy()
            for i in np.flatnonzero(base).tolist():
                mask[i] = node_admits(probe, self.nodes[i])
        else:
            mask = base
        sh.constrained = constrained
        sh.mask = mask if constrained else None
        sh.cands = np.flatnonzero(mask)
        needed = {d for d, v in zip(self.dims, sh.req_t, strict=True) if v > 0}
        sh.parts = [p for p in parts if needed <= self.part_info[p][1]]
        if len(sh.cands) == 0:
            sh.static_reason = reasons.NO_MATCHING_NODE
        elif not (self.cap[sh.cands] >= sh.req).all(axis=1).any():
            sh.static_reason = reasons.TOO_LARGE
        else:
            sh.static_reason = None

    # --- placing identical jobs -------------------------------------------------------------

    def _place_identical(
        self, sh: _Shape, s: int, rows: np.ndarray
    ) -> tuple[list[int], str | None, bool]:
        """Place up to len(rows) identical jobs as the reference would one by one."""
        if sh.static_reason is not None:
            return [], sh.static_reason, False
        want = len(rows)
        db = self.db
        placed: list[int] = []
        if sh.a_exhausted != db.grow_epoch and want >= _BULK and sh.mask is None:
            # Many identical jobs: one vectorised best-fit fill instead of index lookups.
            cands = sh.cands
            free = db.free_all(cands)
            counts = fit_counts(free, sh.req, want)
            ok = np.flatnonzero(counts > 0)
            if len(ok):
                order = ok[best_fit_order(free[ok], cands[ok])]
                taken = np.minimum(np.cumsum(counts[order]), want)
                used = np.diff(np.concatenate(([0], taken)))
                keep = used > 0
                nodes, used = cands[order][keep], used[keep]
                db.add_fixed_many(nodes, used, sh.req)
                placed = np.repeat(nodes, used).tolist()
            if len(placed) < want:
                sh.a_exhausted = db.grow_epoch
        if sh.a_exhausted != db.grow_epoch:
            while len(placed) < want:
                entry = db.best_free(sh.req_t, sh.parts, sh.mask, sh.memo)
                if entry is None:
                    sh.a_exhausted = db.grow_epoch
                    break
                n = entry[-1]
                c = _fit_count(entry, sh.req_t, want - len(placed))
                db.add_fixed(n, sh.req, INF, c, sh.req_t)
                placed.extend([n] * c)
        if len(placed) < want and db.evicted:
            for level in sorted(db.evicted):
                if level < sh.pcp:
                    # Displacing less urgent evicted jobs: one job at a time, on the node
                    # chosen by its victims, whose order depends on the queues' usage.
                    n = self._by_victims(sh, sh.cands, level, evicted=True)
                    if n is None:
                        continue
                    db.add_fixed(n, sh.req, INF)
                    placed.append(n)
                    return placed, None, True
                got = self._fill_level(sh, want - len(placed), level)
                placed.extend(got)
                if len(placed) == want:
                    break
        if len(placed) == want:
            return placed, None, False
        if placed:
            # Urgency victims are ordered by their queues' current cost, which must include
            # the jobs just placed: commit those first and come back for the rest.
            return placed, None, True
        i = int(rows[len(placed)])
        chosen = self._urgency(i, sh, sh.cands)
        if chosen is None:
            return placed, reasons.NO_CAPACITY, False
        self._preempt_for(sh, chosen[0], chosen[1])
        db.add_fixed(chosen[0], sh.req, INF)
        placed.append(chosen[0])
        return placed, None, True

    def _fill_level(self, sh: _Shape, want: int, level: float, rows=None) -> list[int]:
        """Fill best-fit nodes at one evicted level; returns the nodes used, in order."""
        db = self.db
        cands = sh.cands if rows is None else rows
        free = db.free_evicted_level(cands, level)
        counts = fit_counts(free, sh.req, want)
        ok = counts > 0
        if not ok.any():
            return []
        sub = cands[ok]
        order = best_fit_order(free[ok], sub)
        out: list[int] = []
        for n, c in zip(sub[order].tolist(), counts[ok][order].tolist(), strict=True):
            c = min(c, want - len(out))
            db.add_fixed(n, sh.req, INF, c)
            out.extend([n] * c)
            if len(out) == want:
                break
        return out

    def _urgency(self, i: int, sh: _Shape, cands: np.ndarray) -> tuple[int, float] | None:
        own = sh.pcp
        db = self.db
        for level in sorted(h for h in db.holds if h < own):
            n = self._by_victims(sh, cands, level, evicted=False)
            if n is not None:
                return n, level
        return None

    # --- victims ------------------------------------------------------------------------------

    def _use(self, q: int, req: tuple[int, ...], sign: int) -> None:
        self.usage[q] = [a + sign * b for a, b in zip(self.usage[q], req, strict=True)]

    def _fraction(self, q: int) -> float:
        """The queue's fraction of its fair share, up to a common factor (see reference)."""
        return (self.costs.cost(self.usage[q]) + self.q_offset[q]) / self.q_weight[q]

    def _groups(self, level: float, evicted: bool) -> list[tuple[tuple, np.ndarray]]:
        """Per node, what each (class priority, queue) that may give way at ``level`` holds,
        in the order victims are taken: lowest priority, the queue furthest above its fair
        share, then queue name."""
        nn = len(self.nodes)
        found: list[tuple[float, int, np.ndarray]] = []
        if evicted:
            for pcp in sorted(p for p in self.db.evicted if p <= level):
                groups = self.ev_groups.get(pcp)
                if groups is None:
                    rows = np.flatnonzero(self.evicted_mask & ~self.ev_gone & (self.job_pcp == pcp))
                    groups = self.ev_groups[pcp] = self._by_queue(rows, nn)
                found += [(float(pcp), q, arr) for q, arr in groups.items()]
        else:
            if self.hold_groups is None or self.hold_groups[0] != self.hold_epoch:
                rows = self.displaceable
                if self.preempted:
                    rows = rows[~np.isin(rows, np.fromiter(self.preempted, dtype=np.int64))]
                by_hold: dict[tuple[float, int], np.ndarray] = {}
                for h in np.unique(self.hold[rows]).tolist():
                    sel = rows[self.hold[rows] == h]
                    for q, arr in self._by_queue(sel, nn).items():
                        by_hold[(float(h), q)] = arr
                self.hold_groups = (self.hold_epoch, by_hold)
            found += [(h, q, arr) for (h, q), arr in self.hold_groups[1].items() if h <= level]
        keyed = [((p, -self._fraction(q), self.qnames[q]), arr) for p, q, arr in found]
        keyed.sort(key=itemgetter(0))
        return keyed

    def _by_queue(self, rows: np.ndarray, nn: int) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        qs = self.qidx[rows]
        for q in np.unique(qs).tolist():
            sel = rows[qs == q]
            out[int(q)] = _sum_by(self.run_node[sel], self.shape_of_job[sel], nn, self.req)
        return out

    def _by_victims(self, sh: _Shape, cands: np.ndarray, level: float, evicted: bool) -> int | None:
        """The node to displace on, chosen by the victims it needs (see reference)."""
        db = self.db
        free_at = db.free_evicted_level if evicted else db.free_hold_level
        free = free_at(cands, level)
        ok = (free >= sh.req).all(axis=1)
        if not ok.any():
            return None
        sub = cands[ok]
        free = free[ok]
        room = db.free_all(sub) if evicted else db.cap[sub] - db.fixed[sub]
        worst = np.where((room >= sh.req).all(axis=1), -1, len(sub) + 10**9)
        for k, (_, arr) in enumerate(self._groups(level, evicted)):
            room = room + arr[sub]
            fits = (room >= sh.req).all(axis=1)
            worst = np.where(fits & (worst > k), np.minimum(worst, k), worst)
        keys = [sub] + [free[:, d] for d in range(free.shape[1] - 1, -1, -1)] + [worst]
        return int(sub[np.lexsort(keys)[0]])

    def _preempt_for(self, sh: _Shape, n: int, level: float) -> None:
        """Urgency preemption of a minimal set (see reference ``_preempt_for``)."""
        db = self.db
        if self.by_node is None:
            self.by_node = defaultdict(list)
            for i in self.displaceable.tolist():
                self.by_node[int(self.run_node[i])].append(i)
        victims = [i for i in self.by_node[n] if self.hold[i] <= level and i not in self.preempted]
        victims.sort(key=self._running_order, reverse=True)
        fractions: dict[int, float] = {}
        for i in victims:
            q = int(self.qidx[i])
            if q not in fractions:
                fractions[q] = self._fraction(q)
        victims.sort(
            key=lambda i: (
                self.hold[i],
                -fractions[int(self.qidx[i])],
                self.qnames[int(self.qidx[i])],
            )
        )
        room = db.cap[n] - db.fixed[n]
        taken: list[list[int]] = []
        seen: set[int] = set()
        for v in victims:
            if (room >= sh.req).all():
                break
            if v in seen:
                continue
            unit = self.unit_of.get(v, [v])
            seen.update(unit)
            taken.append(unit)
            room = room + self._unit_on(unit, n)
        keep = [True] * len(taken)
        for k in range(len(taken) - 2, -1, -1):
            back = room - self._unit_on(taken[k], n)
            if (back >= sh.req).all():
                room = back
                keep[k] = False
        for unit, kept in zip(taken, keep, strict=True):
            if not kept:
                continue
            for member in unit:
                ms = self.shape_of_job[member]
                db.remove_fixed(int(self.run_node[member]), self.req[ms], float(self.hold[member]))
                mq = int(self.qidx[member])
                self.alloc[mq] = [
                    a - b for a, b in zip(self.alloc[mq], self.shapes[ms].req_t, strict=True)
                ]
                self._use(mq, self.shapes[ms].req_t, -1)
                if self.hold_groups is not None and self.hold_groups[0] == self.hold_epoch:
                    arr = self.hold_groups[1][(float(self.hold[member]), mq)]
                    arr[int(self.run_node[member])] -= self.req[ms]
                self._add_class(mq, self.shapes[ms].pc, list(self.shapes[ms].req_t), -1)
                self.preempted.add(member)
                if self.journal is not None:
                    self.journal.append(("pre", member))
        self.shrink_epoch += 1

    def _unit_on(self, unit: list[int], n: int) -> np.ndarray:
        """What the members of a running gang hold on node ``n``."""
        out = np.zeros(self.db.d, dtype=np.int64)
        for m in unit:
            if int(self.run_node[m]) == n:
                out = out + self.req[self.shape_of_job[m]]
        return out

    # --- queued gangs -------------------------------------------------------------------------

    def _queued_gang(self, q: int, item: _Complex) -> None:
        members = item.members
        reason = self._cycle_limit(q, item) or self._class_limit(q, members)
        if reason is not None:
            self._fail_rows(np.array(members), reason)
            return
        shapes = {int(self.shape_of_job[i]) for i in members}
        if len(shapes) == 1:
            s = shapes.pop()
            sh = self.shapes[s]
            if sh.cands is None:
                self._static(sh, s)
            if not self._urgency_possible(sh.pcp):
                self._identical_gang(q, item, s, sh)
                return
            if self._gang_cannot_fit(item, s, sh):
                return
        self._generic_gang(q, item)

    def _gang_cannot_fit(self, item: _Complex, s: int, sh: _Shape) -> bool:
        """Fail a gang of identical members at once when even displacing everything that
        may be displaced leaves too little room (for each label value, if uniform)."""
        members = item.members
        want = len(members)
        needed = want if item.minimum == want else item.minimum
        key = (s, want, item.minimum, item.label, "urgent")
        cached = self.gang_cache.get(key)
        if cached is not None and cached[0] == self.shrink_epoch:
            self._fail_rows(np.array(members), cached[1])
            return True
        db = self.db
        cands = sh.cands
        if item.label is None:
            if sh.static_reason is not None:
                reason = reasons.gang_failed(sh.static_reason)
            else:
                room = int(fit_counts(db.free_hold_level(cands, sh.pcp - 0.5), sh.req, want).sum())
                if room >= needed:
                    return False
                reason = reasons.gang_failed(reasons.NO_CAPACITY)
        else:
            values, of = self._labels(item.label)
            if len(values) and len(cands):
                perm = fit_counts(db.free_hold_level(cands, sh.pcp - 0.5), sh.req, want)
                cv = of[cands]
                has = cv >= 0
                room = np.bincount(cv[has], weights=perm[has], minlength=len(values))
                if (room >= needed).any():
                    return False
            reason = reasons.gang_uniformity_failed(item.label)
        self.gang_cache[key] = (self.shrink_epoch, reason)
        self._fail_rows(np.array(members), reason)
        return True

    def _cycle_limit(self, q: int, item: _Complex) -> str | None:
        """Per-cycle limits, then the rate limits: a gang must fit whole in each."""
        cfg = self.cfg
        if (
            cfg.max_jobs_per_cycle is not None
            and self.new_count + len(item.members) > cfg.max_jobs_per_cycle
        ):
            return reasons.MAX_JOBS_PER_CYCLE
        for d, name in enumerate(self.dims):
            if (
                name in cfg.max_fraction_per_cycle
                and self.new_total[d] + item.total[d]
                > cfg.max_fraction_per_cycle[name] * self.totals[d]
            ):
                return reasons.MAX_RESOURCES_PER_CYCLE
        size = len(item.members)
        if self.rate_global is not None and self.new_count + size > self.rate_global:
            return reasons.GLOBAL_RATE_LIMIT
        own = self.q_rate[q]
        if own is not None and self.new_by_q[q] + size > own:
            return reasons.QUEUE_RATE_LIMIT
        return None

    def _urgency_possible(self, own: int) -> bool:
        """Whether a job of class priority ``own`` may displace anything by urgency: held jobs
        or evicted jobs of a lower class priority (chosen by victims, one at a time)."""
        db = self.db
        return any(h < own and arr.any() for h, arr in db.holds.items()) or any(
            p < own and arr.any() for p, arr in db.evicted.items()
        )

    def _labels(self, label: str) -> tuple[list[str], np.ndarray]:
        found = self.label_cache.get(label)
        if found is None:
            values = sorted({n.labels[label] for n in self.nodes if label in n.labels})
            pos = {v: k for k, v in enumerate(values)}
            of = np.array([pos.get(n.labels.get(label), -1) for n in self.nodes], dtype=np.int64)
            found = (values, of)
            self.label_cache[label] = found
        return found

    def _simulate(self, sh: _Shape, rows: np.ndarray, want: int) -> tuple[list[tuple], tuple]:
        """Sequential placement of identical members on ``rows`` (A, then evicted levels),
        without touching the state: [(node, count)], worst rank."""
        db = self.db
        placed: list[tuple[int, int]] = []
        taken = np.zeros((len(rows), db.d), dtype=np.int64)
        worst = (0, 0.0)
        levels: list[tuple[tuple[int, float], Any]] = [((0, 0.0), None)]
        levels += [((1, float(lv)), lv) for lv in sorted(db.evicted)]
        got = 0
        for rank, lv in levels:
            if got == want:
                break
            free = db.free_all(rows) if lv is None else db.free_evicted_level(rows, lv)
            free = free - taken
            counts = fit_counts(free, sh.req, want - got)
            ok = np.flatnonzero(counts > 0)
            if len(ok) == 0:
                continue
            order = ok[best_fit_order(free[ok], rows[ok])]
            for k in order.tolist():
                c = min(int(counts[k]), want - got)
                placed.append((int(rows[k]), c))
                taken[k] += sh.req * c
                got += c
                worst = max(worst, rank)
                if got == want:
                    break
        return placed, worst

    def _identical_gang(self, q: int, item: _Complex, s: int, sh: _Shape) -> None:
        members = item.members
        want, minimum, label = len(members), item.minimum, item.label
        cache_key = (s, want, minimum, label)
        cached = self.gang_cache.get(cache_key)
        if cached is not None and cached[0] == self.shrink_epoch:
            self._fail_rows(np.array(members), cached[1])
            return
        if label is None:
            if sh.static_reason is not None:
                reason = reasons.gang_failed(sh.static_reason)
                self.gang_cache[cache_key] = (self.shrink_epoch, reason)
                self._fail_rows(np.array(members), reason)
                return
            placed, _ = self._simulate(sh, sh.cands, want)
            got = sum(c for _, c in placed)
            needed = want if minimum == want else minimum
            if got < needed:
                reason = reasons.gang_failed(reasons.NO_CAPACITY)
                self.gang_cache[cache_key] = (self.shrink_epoch, reason)
                self._fail_rows(np.array(members), reason)
                return
            self._apply_gang(q, members, placed)
            return
        values, of = self._labels(label)
        best_key, best_placed = None, None
        needed = want if minimum == want else minimum
        cands = sh.cands
        db = self.db
        if len(values) and len(cands):
            perm = fit_counts(db.cap[cands] - db.fixed[cands], sh.req, want)
            cv = of[cands]
            has = cv >= 0
            room = np.bincount(cv[has], weights=perm[has], minlength=len(values))
            for v in np.flatnonzero(room >= needed).tolist():
                rows = cands[cv == v]
                placed, worst = self._simulate(sh, rows, want)
                got = sum(c for _, c in placed)
                if got < needed:
                    continue
                value_nodes = np.flatnonzero(of == v)
                leftover = (db.free_all(value_nodes).sum(axis=0) - sh.req * got).tolist()
                key = (-got, worst, leftover, values[v])
                if best_key is None or key < best_key:
                    best_key, best_placed = key, placed
        if best_placed is None:
            reason = reasons.gang_uniformity_failed(label)
            self.gang_cache[cache_key] = (self.shrink_epoch, reason)
            self._fail_rows(np.array(members), reason)
            return
        self._apply_gang(q, members, best_placed)

    def _apply_gang(self, q: int, members: list[int], placed: list[tuple[int, int]]) -> None:
        nodes: list[int] = []
        for n, c in placed:
            nodes.extend([n] * c)
        db = self.db
        for n, c in placed:
            s = self.shape_of_job[members[0]]
            db.add_fixed(n, self.req[s], INF, c)
        sh = self.shapes[self.shape_of_job[members[0]]]
        p = len(nodes)
        self._commit_run(q, sh, np.array(members[:p]), nodes)
        for i in members[p:]:
            self.result.failed[self.ids[i]] = reasons.GANG_ELASTIC_REST

    # --- the general path: one member at a time, exactly like the reference -----------------

    def _select(self, i: int, allowed: np.ndarray | None) -> tuple[int, tuple, float | None] | str:
        s = int(self.shape_of_job[i])
        sh = self.shapes[s]
        if sh.cands is None:
            self._static(sh, s)
        cands = sh.cands
        if allowed is not None:
            cands = cands[allowed[cands]]
            if len(cands) == 0:
                return reasons.NO_MATCHING_NODE
            if not (self.cap[cands] >= sh.req).all(axis=1).any():
                return reasons.TOO_LARGE
        elif sh.static_reason is not None:
            return sh.static_reason
        db = self.db
        if allowed is None:
            entry = db.best_free(sh.req_t, sh.parts, sh.mask, sh.memo)
            if entry is not None:
                return entry[-1], (0, 0.0), None
        else:
            free = db.free_all(cands)
            ok = (free >= sh.req).all(axis=1)
            if ok.any():
                return int(cands[ok][best_fit_order(free[ok], cands[ok])[0]]), (0, 0.0), None
        for level in sorted(db.evicted):
            if level < sh.pcp:
                found = self._by_victims(sh, cands, level, evicted=True)
                if found is not None:
                    return found, (1, float(level)), None
                continue
            free = db.free_evicted_level(cands, level)
            ok = (free >= sh.req).all(axis=1)
            if ok.any():
                n = int(cands[ok][best_fit_order(free[ok], cands[ok])[0]])
                return n, (1, float(level)), None
        chosen = self._urgency(i, sh, cands)
        if chosen is not None:
            return chosen[0], (2, float(chosen[1])), chosen[1]
        return reasons.NO_CAPACITY

    def _place_one(self, q: int, i: int, allowed: np.ndarray | None) -> tuple | str:
        chosen = self._select(i, allowed)
        if isinstance(chosen, str):
            return chosen
        n, rank, level = chosen
        sh = self.shapes[self.shape_of_job[i]]
        if level is not None:
            self._preempt_for(sh, n, level)
            self.rebuild = True
        self.db.add_fixed(n, sh.req, INF)
        self._commit_run(q, sh, np.array([i]), [n])
        return rank

    def _begin(self) -> tuple:
        self.journal = []
        return (
            self.db.save(),
            [list(a) for a in self.alloc],
            {k: list(v) for k, v in self.alloc_class.items()},
            list(self.new_total),
            self.new_count,
            self.rebuild,
            [list(u) for u in self.usage],
            list(self.new_by_q),
        )

    def _rollback(self, saved: tuple) -> None:
        db_saved, alloc, alloc_class, new_total, new_count, rebuild, usage, new_by_q = saved
        self.usage = usage
        self.new_by_q = new_by_q
        self.hold_epoch += 1
        self.db.restore(db_saved)
        self.alloc, self.alloc_class = alloc, alloc_class
        self.new_total, self.new_count, self.rebuild = new_total, new_count, rebuild
        for entry in reversed(self.journal or []):
            if entry[0] == "sched":
                del self.result.scheduled[entry[1]]
            else:
                self.preempted.discard(entry[1])
        self.journal = None
        self.shrink_epoch += 1

    def _try_gang(self, q: int, members: list[int], minimum: int, allowed) -> tuple | str:
        placed: set[int] = set()
        worst = (0, 0.0)
        first_reason = None
        for i in members:
            outcome = self._place_one(q, i, allowed)
            if isinstance(outcome, str):
                first_reason = first_reason or outcome
                if minimum == len(members):
                    return outcome
                continue
            placed.add(i)
            worst = max(worst, outcome)
        if len(placed) < minimum:
            return first_reason or reasons.NO_CAPACITY
        return placed, worst

    def _generic_gang(self, q: int, item: _Complex) -> None:
        members, minimum, label = item.members, item.minimum, item.label
        if label is None:
            saved = self._begin()
            attempt = self._try_gang(q, members, minimum, None)
            if isinstance(attempt, str):
                self._rollback(saved)
                self._fail_rows(np.array(members), reasons.gang_failed(attempt))
                return
            self.journal = None
            self._finish_gang(members, attempt[0])
            return
        values, of = self._labels(label)
        best_key, best_value = None, None
        for v, value in enumerate(values):
            allowed = of == v
            saved = self._begin()
            attempt = self._try_gang(q, members, minimum, allowed)
            if not isinstance(attempt, str):
                placed, worst = attempt
                leftover = self.db.free_all(np.flatnonzero(allowed)).sum(axis=0).tolist()
                key = (-len(placed), worst, leftover, value)
                if best_key is None or key < best_key:
                    best_key, best_value = key, v
            self._rollback(saved)
        if best_value is None:
            self._fail_rows(np.array(members), reasons.gang_uniformity_failed(label))
            return
        attempt = self._try_gang(q, members, minimum, of == best_value)
        assert not isinstance(attempt, str)
        self._finish_gang(members, attempt[0])

    def _finish_gang(self, members: list[int], placed: set[int]) -> None:
        for i in members:
            if i not in placed:
                self.result.failed[self.ids[i]] = reasons.GANG_ELASTIC_REST

    # ===================================================================== output ====

    def _finish(self) -> SchedulingResult:
        result = self.result
        ids = self.ids
        result.preempted = {ids[i] for i in self.preempted}
        result.rate_consumed = {self.qnames[k]: n for k, n in enumerate(self.new_by_q) if n}
        for q in self.queues:
            k = self.qnames.index(q)
            result.queue_costs[q] = self.costs.cost(self.alloc[k])
        return result


class _Repeat:
    """The same request ``count`` times, without materialising it unless sliced."""

    __slots__ = ("count", "req")

    def __init__(self, req: np.ndarray, count: int):
        self.req, self.count = req, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.count)
            return np.broadcast_to(self.req, (max(0, stop - start), len(self.req)))
        return self.req


def _fit_count(entry: tuple[int, ...], req: tuple[int, ...], limit: int) -> int:
    count = limit
    for f, r in zip(entry, req, strict=False):
        if r > 0:
            count = min(count, f // r)
        elif f < 0:
            return 0
    return max(count, 0)


def _count_within(have: int, step: int, limit: float, m: int) -> int:
    """Largest c <= m with have + c * step <= limit, compared exactly like Python does."""
    if step == 0:
        return m if have <= limit else 0
    room = Fraction(limit) - have
    if room < 0:
        return 0
    return min(m, int(room // step))


__all__ = ["fast_schedule"]
