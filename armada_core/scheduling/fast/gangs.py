"""Placing queued gangs (SEMANTICS.md, Placing and Topology): all or nothing down to the
gang's minimum cardinality, on one value of the uniformity label when it has one, in one
domain of the narrowest topology level that holds it when levels are configured.

A gang of identical members that cannot displace anything is placed by simulation, without
touching the state until it is known to fit. Any other gang is placed member by member like
the reference, tentatively (``_begin``/``_rollback``) when it may not fit or when label values
are compared. A gang shape that fits nowhere is remembered until something is preempted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reasons, topology
from ..nodedb import INF, best_fit_order, fit_counts
from .limits import class_limit, cycle_limit, gang_charges, gang_limit, take_charges
from .nodes import place_one, static
from .outcomes import commit_run, fail_rows
from .state import CycleState, Item, Shape
from .victims import urgency_possible


def queued_gang(st: CycleState, q: int, item: Item) -> None:
    """Limits for the gang as a whole, then its placement (or its jobs' reason)."""
    members = item.members
    reason = cycle_limit(st, q, item) or class_limit(st, q, members) or gang_limit(st, q, item)
    if reason is not None:
        fail_rows(st, np.array(members), reason)
        return
    charges = gang_charges(st, q, item)
    if item.late:
        i = members[0]
        if isinstance(place_one(st, q, i, item.allowed), str):
            st.result.unscheduled[st.ids[i]] = _elastic_reason(st, i)
        else:
            take_charges(st, q, members, charges)
        return
    if topology.applies(st.cfg.topology_levels, len(members)):
        _topology_gang(st, q, item, charges)
        return
    _plain_gang(st, q, item, charges)


def _elastic_reason(st: CycleState, i: int) -> str:
    job = st.jobs[i]
    return reasons.elastic_waits(job.gang_id or "", job.gang_role or "")


def _plain_gang(st: CycleState, q: int, item: Item, charges: dict[int, int]) -> None:
    """A gang placed without topology: anywhere, or on one value of its uniformity label;
    the members placed take their budget ``charges``."""
    members = item.members
    shapes = {int(st.shape_of_job[i]) for i in members}
    if len(shapes) == 1 and not item.core:
        s = shapes.pop()
        sh = st.shapes[s]
        if sh.cands is None:
            static(st, sh, s)
        if not urgency_possible(st, sh.pcp):
            _identical_gang(st, q, item, s, sh, charges)
            return
        if _cannot_fit(st, item, s, sh):
            return
    _generic_gang(st, q, item, charges)


def labels(st: CycleState, label: str) -> tuple[list[str], np.ndarray]:
    """The label's values, sorted, and each node's value index (-1 without the label)."""
    return st.node_labels.column(label)


def _room_per_value(
    sh: Shape, free: np.ndarray, of: np.ndarray, n_values: int, want: int
) -> np.ndarray:
    """How many members fit on each label value's candidate nodes, given their ``free``."""
    perm = fit_counts(free, sh.req, want)
    cv = of[sh.cands]
    has = cv >= 0
    return np.bincount(cv[has], weights=perm[has], minlength=n_values)


def _failed_before(st: CycleState, item: Item, cache_key: tuple) -> bool:
    """The same gang shape failed in this shrink epoch: fail with the same reason."""
    cached = st.gang_cache.get(cache_key)
    if cached is not None and cached[0] == st.shrink_epoch:
        fail_rows(st, np.array(item.members), cached[1])
        return True
    return False


def _fail(st: CycleState, item: Item, cache_key: tuple, reason: str) -> None:
    st.gang_cache[cache_key] = (st.shrink_epoch, reason)
    fail_rows(st, np.array(item.members), reason)


def _cannot_fit(st: CycleState, item: Item, s: int, sh: Shape) -> bool:
    """Fail a gang of identical members at once when even displacing everything that
    may be displaced leaves too little room (for each label value, if uniform)."""
    want = len(item.members)
    cache_key = (s, want, item.minimum, item.label, "urgent")
    if _failed_before(st, item, cache_key):
        return True
    db = st.db
    if item.label is None:
        if sh.static_reason is not None:
            reason = reasons.gang_failed(sh.static_reason)
        else:
            free = db.free_hold_level(sh.cands, sh.pcp - 0.5)
            if int(fit_counts(free, sh.req, want).sum()) >= item.minimum:
                return False
            reason = reasons.gang_failed(reasons.NO_CAPACITY)
    else:
        values, of = labels(st, item.label)
        if len(values) and len(sh.cands):
            free = db.free_hold_level(sh.cands, sh.pcp - 0.5)
            if (_room_per_value(sh, free, of, len(values), want) >= item.minimum).any():
                return False
        reason = reasons.gang_uniformity_failed(item.label)
    _fail(st, item, cache_key, reason)
    return True


# --- identical members, nothing to displace by urgency: simulate, then apply --------------


def _identical_gang(
    st: CycleState, q: int, item: Item, s: int, sh: Shape, charges: dict[int, int]
) -> None:
    cache_key = (s, len(item.members), item.minimum, item.label)
    if _failed_before(st, item, cache_key):
        return
    found = _anywhere(st, item, sh) if item.label is None else _best_value(st, item, sh)
    if isinstance(found, str):
        _fail(st, item, cache_key, found)
        return
    _apply(st, q, item.members, found, charges)


def _anywhere(st: CycleState, item: Item, sh: Shape) -> list[tuple[int, int]] | str:
    """A placement on any candidate nodes (node, count), or the reason there is none."""
    if sh.static_reason is not None:
        return reasons.gang_failed(sh.static_reason)
    placed, _ = _simulate(st, sh, sh.cands, len(item.members))
    if sum(c for _, c in placed) < item.minimum:
        return reasons.gang_failed(reasons.NO_CAPACITY)
    return placed


def _best_value(st: CycleState, item: Item, sh: Shape) -> list[tuple[int, int]] | str:
    """A placement on one label value (or the reason there is none): the value with the most
    members placed, then the lowest worst stage, then the least free resources left on the
    value's nodes, then the smallest value."""
    assert item.label is not None
    values, of = labels(st, item.label)
    want = len(item.members)
    best_key, best_placed = None, None
    cands = sh.cands
    db = st.db
    if len(values) and len(cands):
        free = db.cap[cands] - db.fixed[cands]
        room = _room_per_value(sh, free, of, len(values), want)
        cv = of[cands]
        for v in np.flatnonzero(room >= item.minimum).tolist():
            placed, worst = _simulate(st, sh, cands[cv == v], want)
            got = sum(c for _, c in placed)
            if got < item.minimum:
                continue
            value_nodes = np.flatnonzero(of == v)
            leftover = (db.free_all(value_nodes).sum(axis=0) - sh.req * got).tolist()
            key = (-got, worst, leftover, values[v])
            if best_key is None or key < best_key:
                best_key, best_placed = key, placed
    if best_placed is None:
        return reasons.gang_uniformity_failed(item.label)
    return best_placed


def _simulate(
    st: CycleState, sh: Shape, rows: np.ndarray, want: int
) -> tuple[list[tuple[int, int]], tuple]:
    """Sequential placement of identical members on ``rows`` (nothing displaced, then evicted
    levels), without touching the state: [(node, count)], worst rank."""
    db = st.db
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


def _apply(
    st: CycleState,
    q: int,
    members: list[int],
    placed: list[tuple[int, int]],
    charges: dict[int, int],
) -> None:
    """Commit a simulated placement; members beyond it (an elastic gang's rest) fail; the
    members placed take their budget charges."""
    nodes: list[int] = []
    for n, c in placed:
        nodes.extend([n] * c)
    s = st.shape_of_job[members[0]]
    for n, c in placed:
        st.db.add_fixed(n, st.req[s], INF, c)
    p = len(nodes)
    commit_run(st, q, st.shapes[s], np.array(members[:p]), nodes)
    take_charges(st, q, members[:p], charges)
    for i in members[p:]:
        st.result.failed[st.ids[i]] = reasons.GANG_ELASTIC_REST


# --- any gang: member by member, tentatively ------------------------------------------------


def _generic_gang(st: CycleState, q: int, item: Item, charges: dict[int, int]) -> None:
    members, minimum, label = item.members, item.minimum, item.label
    if label is None:
        saved = _begin(st)
        attempt = _try(st, q, members, minimum, None, item.core)
        if isinstance(attempt, str):
            _rollback(st, saved)
            fail_rows(st, np.array(members), reasons.gang_failed(attempt))
            return
        st.journal = None
        _elastic_rest(st, members, attempt[0], item.core)
        take_charges(st, q, [i for i in members if i in attempt[0]], charges)
        return
    values, of = labels(st, label)
    best_key, best_value = None, None
    for v, value in enumerate(values):
        allowed = of == v
        saved = _begin(st)
        attempt = _try(st, q, members, minimum, allowed, item.core)
        if not isinstance(attempt, str):
            placed, worst = attempt
            leftover = st.db.free_all(np.flatnonzero(allowed)).sum(axis=0).tolist()
            key = (-len(placed), worst, leftover, value)
            if best_key is None or key < best_key:
                best_key, best_value = key, v
        _rollback(st, saved)
    if best_value is None:
        fail_rows(st, np.array(members), reasons.gang_uniformity_failed(label))
        return
    attempt = _try(st, q, members, minimum, of == best_value, item.core)
    assert not isinstance(attempt, str)
    _elastic_rest(st, members, attempt[0], item.core)
    take_charges(st, q, [i for i in members if i in attempt[0]], charges)


def _try(
    st: CycleState,
    q: int,
    members: list[int],
    minimum: int,
    allowed: np.ndarray | None,
    core: int = 0,
) -> tuple[set[int], tuple] | str:
    """Place members in order; the placed set and worst stage rank, or the first reason
    (also when a member of a role group's ``core`` does not fit)."""
    placed: set[int] = set()
    worst = (0, 0.0)
    first_reason = None
    for k, i in enumerate(members):
        outcome = place_one(st, q, i, allowed)
        if isinstance(outcome, str):
            first_reason = first_reason or outcome
            if minimum == len(members) or k < core:
                return outcome
            continue
        placed.add(i)
        worst = max(worst, outcome)
    if len(placed) < minimum:
        return first_reason or reasons.NO_CAPACITY
    return placed, worst


def _elastic_rest(st: CycleState, members: list[int], placed: set[int], core: int = 0) -> None:
    """Members not placed fail, or in a role group wait for capacity in later cycles."""
    for i in members:
        if i not in placed:
            if core:
                st.result.unscheduled[st.ids[i]] = _elastic_reason(st, i)
            else:
                st.result.failed[st.ids[i]] = reasons.GANG_ELASTIC_REST


def _begin(st: CycleState) -> tuple:
    """Start tentative work: a copy of everything placing changes, and a journal for the
    result's entries."""
    st.journal = []
    return (
        st.new_epoch(),
        st.db.save(),
        [list(a) for a in st.alloc],
        {k: list(v) for k, v in st.alloc_class.items()},
        list(st.new_total),
        st.new_count,
        st.rebuild,
        [list(u) for u in st.usage],
        list(st.new_by_q),
        None if st.alloc_infinite is None else [list(a) for a in st.alloc_infinite],
    )


def _rollback(st: CycleState, saved: tuple) -> None:
    """Undo tentative work: the free space is again what it was at ``_begin``, and so are
    the answers remembered then (``CycleState.shrink_epoch``)."""
    epoch, db_saved, alloc, alloc_class, new_total, new_count, rebuild, usage, new_by_q, inf = saved
    st.alloc_infinite = inf
    st.usage = usage
    st.new_by_q = new_by_q
    st.hold_epoch += 1
    st.db.restore(db_saved)
    st.alloc, st.alloc_class = alloc, alloc_class
    st.new_total, st.new_count, st.rebuild = new_total, new_count, rebuild
    for entry in reversed(st.journal or []):
        if entry[0] == "sched":
            del st.result.scheduled[entry[1]]
        else:
            st.preempted.discard(entry[1])
    st.journal = None
    st.shrink_epoch = epoch


# --- topology: the narrowest domain that holds the gang -------------------------------------


def _topology_gang(st: CycleState, q: int, item: Item, charges: dict[int, int]) -> None:
    """A gang in one domain of the narrowest topology level that holds it, within its
    maximum hops (SEMANTICS.md, "Topology"), chosen exactly as the reference does: by most
    members placed, lowest worst stage, narrowest level, least free left on the domain's
    nodes, smallest key. Domains that could not hold the gang even if everything that may
    give way did are not tried. When no narrower domain holds it and the whole cluster is
    allowed, the gang is placed as without topology (the cluster level is exactly that). The
    members placed take their budget ``charges``."""
    members, minimum, label = item.members, item.minimum, item.label
    want = len(members)
    max_hops = st.jobs[members[0]].gang_max_hops
    topo, dom_of, rows_of = _topology(st, label, max_hops)
    shapes = {int(st.shape_of_job[i]) for i in members}
    sh: Shape | None = None
    s = -1
    if len(shapes) == 1 and not item.core:
        s = shapes.pop()
        sh = st.shapes[s]
        if sh.cands is None:
            static(st, sh, s)
    simulate = sh is not None and not urgency_possible(st, sh.pcp)
    cache_key = (s, want, minimum, label, "topology", max_hops)
    if simulate:
        known = st.gang_cache.get(cache_key)
        if known is not None and known[0] == st.shrink_epoch:
            # Failed before, or no narrower domain held it: as then.
            if known[1] is None:
                _plain_gang(st, q, item, charges)
            else:
                fail_rows(st, np.array(members), known[1])
            return
    db = st.db
    best_key: tuple | None = None
    best: Any = None
    for rank, level in enumerate(topo.levels):
        if level.label is None and best_key is None:
            if simulate:
                st.gang_cache[cache_key] = (st.shrink_epoch, None)
            _plain_gang(st, q, item, charges)
            return
        of = dom_of[rank]
        if sh is not None:
            d = _whole_without_displacing(st, sh, of, len(level.keys), want)
            if d is not None:
                # Beats every other domain of this level, and the narrower levels had no
                # such placement (or they would have stopped the search).
                placed, _ = _simulate(st, sh, sh.cands[of[sh.cands] == d], want)
                _apply(st, q, members, placed, charges)
                return
        for d in np.flatnonzero(_may_hold(st, item, sh, of, len(level.keys))).tolist():
            rows = rows_of[rank][d]
            if simulate:
                assert sh is not None
                placed, worst = _simulate(st, sh, sh.cands[of[sh.cands] == d], want)
                got = sum(c for _, c in placed)
                if got < minimum:
                    continue
                leftover = (db.free_all(rows).sum(axis=0) - sh.req * got).tolist()
                payload: Any = placed
            else:
                allowed = of == d
                saved = _begin(st)
                attempt = _try(st, q, members, minimum, allowed, item.core)
                if not isinstance(attempt, str):
                    got, worst = len(attempt[0]), attempt[1]
                    leftover = db.free_all(rows).sum(axis=0).tolist()
                _rollback(st, saved)
                if isinstance(attempt, str):
                    continue
                payload = allowed
            candidate = (-got, worst, rank, leftover, level.keys[d])
            if best_key is None or candidate < best_key:
                best_key, best = candidate, payload
        if best_key is not None and best_key[0] == -want and best_key[1] == (0, 0.0):
            break
    if best_key is None:
        assert topo.constrained and max_hops is not None
        reason = reasons.gang_hops(want, max_hops, topology.widest_label(topo))
        if simulate:
            _fail(st, item, cache_key, reason)
        else:
            fail_rows(st, np.array(members), reason)
        return
    if simulate:
        _apply(st, q, members, best, charges)
        return
    attempt = _try(st, q, members, minimum, best, item.core)
    assert not isinstance(attempt, str)
    _elastic_rest(st, members, attempt[0], item.core)
    take_charges(st, q, [i for i in members if i in attempt[0]], charges)


def _topology(
    st: CycleState, label: str | None, max_hops: int | None
) -> tuple[topology.GangTopology, list[np.ndarray], list[list[np.ndarray]]]:
    """The gang's levels (``topology.gang_topology``), each level's domain per node (-1:
    none) and each domain's node rows; built once per cycle for each label and maximum."""
    key = (label, max_hops)
    found = st.topo_cache.get(key)
    if found is None:
        topo = topology.gang_topology(st.node_labels, st.cfg.topology_levels, label, max_hops)
        dom_of, rows_of = [], []
        for level in topo.levels:
            of = np.full(len(st.nodes), -1, dtype=np.int64)
            rows = []
            for d, indices in enumerate(level.members):
                arr = np.array(indices, dtype=np.int64)
                of[arr] = d
                rows.append(arr)
            dom_of.append(of)
            rows_of.append(rows)
        found = st.topo_cache[key] = (topo, dom_of, rows_of)
    return found


def _whole_without_displacing(
    st: CycleState, sh: Shape, of: np.ndarray, n_domains: int, want: int
) -> int | None:
    """The domain of a level that the reference would pick when some domain holds the whole
    gang of identical members without displacing anything: members go to stage 1 while any
    node of the domain has room, and a node's room does not depend on the others, so such a
    domain is one whose nodes' stage-1 counts add up to the gang. Among them: the least free
    left on the domain's nodes, then the smallest key (domains are numbered in key order)."""
    db = st.db
    cands = sh.cands
    count = fit_counts(db.free_all(cands), sh.req, want)
    cv = of[cands]
    has = cv >= 0
    room = np.bincount(cv[has], weights=count[has], minlength=n_domains)
    ok = np.flatnonzero(room >= want)
    if len(ok) == 0:
        return None
    nodes = np.flatnonzero(of >= 0)
    total = np.zeros((n_domains, db.d), dtype=np.int64)
    np.add.at(total, of[nodes], db.free_all(nodes))
    left = total[ok] - sh.req * want
    order = np.lexsort([ok] + [left[:, k] for k in range(db.d - 1, -1, -1)])
    return int(ok[order[0]])


def _may_hold(
    st: CycleState, item: Item, sh: Shape | None, of: np.ndarray, n_domains: int
) -> np.ndarray:
    """Per domain, whether the gang's minimum could fit if everything that may give way to
    it did (an upper bound: a domain failing it cannot hold the gang)."""
    db = st.db
    if sh is not None:
        cands = sh.cands
        free = db.free_hold_level(cands, sh.pcp - 0.5)
        count = fit_counts(free, sh.req, len(item.members))
        cv = of[cands]
        has = cv >= 0
        room = np.bincount(cv[has], weights=count[has], minlength=n_domains)
        return room >= item.minimum
    top = max(int(st.job_pcp[i]) for i in item.members)
    nodes = np.flatnonzero(of >= 0)
    free = np.maximum(db.free_hold_level(nodes, top - 0.5), 0)
    total = np.zeros((n_domains, db.d), dtype=np.int64)
    np.add.at(total, of[nodes], free)
    need = np.sort(st.req[st.shape_of_job[item.members]], axis=0)[: item.minimum].sum(axis=0)
    return (total >= need).all(axis=1)
