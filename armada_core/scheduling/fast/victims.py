"""Placing with displacement (SEMANTICS.md, stages 2 and 3): choosing a node by the victims
it needs, and urgency preemption of a minimal set of victims.

Victims are taken by class priority (a held gang: its hold priority), then their queue's
fraction of fair share, highest first, then queue name, then the most recently ordered job.
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from operator import itemgetter

import numpy as np

from .order import running_order
from .queues import add_class, fraction, use
from .state import CycleState, Shape, sum_by


def urgency_possible(st: CycleState, own: int) -> bool:
    """Whether a job of class priority ``own`` may displace anything by urgency: held jobs
    or evicted jobs of a lower class priority (chosen by victims, one at a time)."""
    db = st.db
    return any(h < own and arr.any() for h, arr in db.holds.items()) or any(
        p < own and arr.any() for p, arr in db.evicted.items()
    )


def urgency(st: CycleState, sh: Shape, cands: np.ndarray) -> tuple[int, float] | None:
    """Stage 3: the node and the hold level at which held jobs give way to this job."""
    for level in sorted(h for h in st.db.holds if h < sh.pcp):
        n = by_victims(st, sh, cands, level, evicted=False)
        if n is not None:
            return n, level
    return None


def by_victims(
    st: CycleState, sh: Shape, cands: np.ndarray, level: float, evicted: bool
) -> int | None:
    """The node to displace on at ``level``, chosen by the victims it needs: the node whose
    last victim comes earliest in victim order, then least free, then node order."""
    db = st.db
    free_at = db.free_evicted_level if evicted else db.free_hold_level
    free = free_at(cands, level)
    ok = (free >= sh.req).all(axis=1)
    if not ok.any():
        return None
    sub = cands[ok]
    free = free[ok]
    room = db.free_all(sub) if evicted else db.cap[sub] - db.fixed[sub]
    worst = np.where((room >= sh.req).all(axis=1), -1, len(sub) + 10**9)
    for k, (_, arr) in enumerate(_groups(st, level, evicted)):
        room = room + arr[sub]
        fits = (room >= sh.req).all(axis=1)
        worst = np.where(fits & (worst > k), np.minimum(worst, k), worst)
    keys = [sub] + [free[:, d] for d in range(free.shape[1] - 1, -1, -1)] + [worst]
    return int(sub[np.lexsort(keys)[0]])


def _groups(st: CycleState, level: float, evicted: bool) -> list[tuple[tuple, np.ndarray]]:
    """Per node, what each (class priority, queue) that may give way at ``level`` holds,
    in the order victims are taken: lowest priority, the queue furthest above its fair
    share, then queue name."""
    nn = len(st.nodes)
    found: list[tuple[float, int, np.ndarray]] = []
    if evicted:
        for pcp in sorted(p for p in st.db.evicted if p <= level):
            groups = st.ev_groups.get(pcp)
            if groups is None:
                rows = np.flatnonzero(st.evicted_mask & ~st.ev_gone & (st.job_pcp == pcp))
                groups = st.ev_groups[pcp] = _by_queue(st, rows, nn)
            found += [(float(pcp), q, arr) for q, arr in groups.items()]
    else:
        if st.hold_groups is None or st.hold_groups[0] != st.hold_epoch:
            rows = st.displaceable
            if st.preempted:
                rows = rows[~np.isin(rows, np.fromiter(st.preempted, dtype=np.int64))]
            by_hold: dict[tuple[float, int], np.ndarray] = {}
            for h in np.unique(st.hold[rows]).tolist():
                sel = rows[st.hold[rows] == h]
                for q, arr in _by_queue(st, sel, nn).items():
                    by_hold[(float(h), q)] = arr
            st.hold_groups = (st.hold_epoch, by_hold)
        found += [(h, q, arr) for (h, q), arr in st.hold_groups[1].items() if h <= level]
    nq = len(st.qnames)
    keyed = [((p, c // nq, -fraction(st, c % nq), st.qnames[c % nq]), arr) for p, c, arr in found]
    keyed.sort(key=itemgetter(0))
    return keyed


def victim_code(st: CycleState, rows: np.ndarray) -> np.ndarray:
    """Per row, its victim group besides priority: ``queue + queues * flag``, where the flag
    is 0 for an elastic member of a role group (taken first) and 1 for any other job."""
    nq = len(st.qnames)
    if st.elastic is None:
        return st.qidx[rows] + nq
    return st.qidx[rows] + nq * (~st.elastic[rows]).astype(np.int64)


def _by_queue(st: CycleState, rows: np.ndarray, nn: int) -> dict[int, np.ndarray]:
    """What each victim group (``victim_code``) holds per node."""
    out: dict[int, np.ndarray] = {}
    qs = victim_code(st, rows)
    for q in np.unique(qs).tolist():
        sel = rows[qs == q]
        out[int(q)] = sum_by(st.run_node[sel], st.shape_of_job[sel], nn, st.req)
    return out


def preempt_for(st: CycleState, sh: Shape, n: int, level: float) -> None:
    """Urgency preemption on node ``n``: victims in order until the job fits, then every
    victim but the last, latest first, put back if the job still fits without it."""
    victims = _victims_on(st, n, level)
    room = st.db.cap[n] - st.db.fixed[n]
    taken: list[list[int]] = []
    seen: set[int] = set()
    for v in victims:
        if (room >= sh.req).all():
            break
        if v in seen:
            continue
        # A victim's whole gang goes, but for members already taken (an elastic member gives
        # way alone, before its group).
        whole = st.unit_of.get(v, [v])
        unit = [m for m in whole if m not in seen and m not in st.preempted]
        seen.update(unit)
        room = room + _unit_on(st, unit, n)
        if len(whole) > 1:
            # The group goes: its elastic members taken before go with it (put back alone,
            # they would run on without their group).
            rows = set(whole)
            for k, earlier in enumerate(taken):
                if earlier and all(m in rows for m in earlier):
                    unit, taken[k] = earlier + unit, []
        taken.append(unit)
    keep = [True] * len(taken)
    for k in range(len(taken) - 2, -1, -1):
        back = room - _unit_on(st, taken[k], n)
        if (back >= sh.req).all():
            room = back
            keep[k] = False
    for unit, kept in zip(taken, keep, strict=True):
        if kept:
            for member in unit:
                _preempt(st, member)
    st.new_epoch()


def _victims_on(st: CycleState, n: int, level: float) -> list[int]:
    """Jobs on node ``n`` that give way at ``level``, in victim order."""
    if st.by_node is None:
        st.by_node = defaultdict(list)
        for i in st.displaceable.tolist():
            st.by_node[int(st.run_node[i])].append(i)
    hold, qidx = st.hold, st.qidx
    victims = [i for i in st.by_node[n] if hold[i] <= level and i not in st.preempted]
    victims.sort(key=partial(running_order, st), reverse=True)
    fractions: dict[int, float] = {}
    for i in victims:
        q = int(qidx[i])
        if q not in fractions:
            fractions[q] = fraction(st, q)
    el = st.elastic
    victims.sort(
        key=lambda i: (
            hold[i],
            0 if el is not None and el[i] else 1,
            -fractions[int(qidx[i])],
            st.qnames[int(qidx[i])],
        )
    )
    return victims


def _preempt(st: CycleState, member: int) -> None:
    """A held job stops: its space, its queue's allocation and usage, its hold group."""
    s = st.shape_of_job[member]
    sh = st.shapes[s]
    n, h, q = int(st.run_node[member]), float(st.hold[member]), int(st.qidx[member])
    st.db.remove_fixed(n, st.req[s], h)
    st.alloc[q] = [a - b for a, b in zip(st.alloc[q], sh.req_t, strict=True)]
    use(st, q, sh.req_t, -1)
    if st.hold_groups is not None and st.hold_groups[0] == st.hold_epoch:
        code = int(victim_code(st, np.array([member]))[0])
        st.hold_groups[1][(h, code)][n] -= st.req[s]
    add_class(st, q, sh.pc, list(sh.req_t), -1)
    st.preempted.add(member)
    if st.journal is not None:
        st.journal.append(("pre", member))


def _unit_on(st: CycleState, unit: list[int], n: int) -> np.ndarray:
    """What the members of a running gang hold on node ``n``."""
    out = np.zeros(st.db.d, dtype=np.int64)
    for m in unit:
        if int(st.run_node[m]) == n:
            out = out + st.req[st.shape_of_job[m]]
    return out
