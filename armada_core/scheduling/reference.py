"""Reference scheduler: a plain transcription of the seed-000 cycle, one job and one node at a time.

It is deliberately simple and slow. It is the oracle the fast implementation is tested
against, so every tie is broken explicitly:

* nodes are ordered by the values of gang uniformity labels, then id (``node_order``); best
  fit takes the least free resources left (compared in resource order: cpu, memory, gpu,
  ...), then the node order;
* where jobs of a lower class give way, the node is chosen by the victims it needs, and
  urgency preempts a minimal set of them (``_by_victims``, ``_preempt_for``, SEMANTICS.md);
* queues compete on (-priority-class priority of the head gang, cost after the gang / weight,
  queue name): more urgent work first, progressive filling among equals (see SEMANTICS.md);
* jobs inside a queue: by class priority, highest first; among equals, evicted gangs, then
  evicted members above a gang's minimum, then queued gangs; each by (job priority, [start
  time,] submit time, job id).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from . import reasons
from .constraints import node_admits, node_order
from .fairness import CostModel, protected_queues, resource_dims, usage_offsets
from .model import Job, Node, PriorityClass, SchedulingResult, Snapshot
from .ratelimit import allowance

INF = float("inf")

EVICTED = 0  # an evicted gang (or its members up to the gang's minimum)
EXTRA = 1  # one evicted gang member above the gang's minimum
QUEUED = 2


@dataclass
class _Item:
    kind: int
    queue: str
    members: list[Job]
    priority: int  # lowest class priority among members
    total: list[int]
    parent: _Item | None = None  # the evicted core an EXTRA member belongs to
    failed: bool = False


@dataclass
class _NodeState:
    node: Node
    index: int
    capacity: list[int]
    #: Jobs holding their space: job id -> (requests, hold priority). INF cannot be displaced.
    fixed: dict[str, tuple[list[int], float]] = field(default_factory=dict)
    #: Evicted jobs not yet re-placed: job id -> (requests, class priority).
    evicted: dict[str, tuple[list[int], int]] = field(default_factory=dict)


@dataclass
class _State:
    nodes: list[_NodeState]
    alloc: dict[str, list[int]]
    alloc_by_class: dict[tuple[str, str], list[int]]
    new_total: list[int]
    new_count: int
    scheduled: dict[str, str]
    preempted: set[str]
    #: New jobs scheduled per queue (what the rate limits count).
    new_by_queue: dict[str, int] = field(default_factory=dict)


def _vec(job: Job, dims: tuple[str, ...]) -> list[int]:
    return [job.requests.get(d, 0) for d in dims]


def _add(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def _sub(a: list[int], b: list[int]) -> list[int]:
    return [x - y for x, y in zip(a, b, strict=True)]


def _fits(free: list[int], req: list[int]) -> bool:
    return all(f >= r for f, r in zip(free, req, strict=True))


def queued_order(job: Job, pcs: dict[str, PriorityClass]) -> tuple:
    return (-pcs[job.priority_class].priority, job.priority, job.submit_time, job.id)


def running_order(job: Job, pcs: dict[str, PriorityClass]) -> tuple:
    start = job.start_time if job.start_time is not None else 0.0
    return (-pcs[job.priority_class].priority, job.priority, start, job.submit_time, job.id)


def reference_schedule(snapshot: Snapshot) -> SchedulingResult:
    """Run one scheduling cycle the slow, obvious way."""
    return _Reference(snapshot).run()


class _Reference:
    def __init__(self, snapshot: Snapshot):
        self.snap = snapshot
        self.cfg = snapshot.config
        self.dims = resource_dims(snapshot)
        self.pcs = {pc.name: pc for pc in snapshot.priority_classes}
        self.queues = {q.name: q for q in snapshot.queues}
        gang_labels = (j.gang_uniformity_label for j in snapshot.jobs if j.gang_id is not None)
        nodes = node_order(snapshot.nodes, gang_labels)
        self.node_index = {n.id: i for i, n in enumerate(nodes)}
        totals = [0] * len(self.dims)
        for n in nodes:
            if not n.cordoned:
                totals = _add(totals, _vec_res(n, self.dims))
        self.totals = totals
        self.costs = CostModel.build(self.dims, totals, self.cfg.resource_multipliers)
        self.result = SchedulingResult()
        self.state = _State(
            nodes=[_NodeState(n, i, _vec_res(n, self.dims)) for i, n in enumerate(nodes)],
            alloc=defaultdict(lambda: [0] * len(self.dims)),
            alloc_by_class=defaultdict(lambda: [0] * len(self.dims)),
            new_total=[0] * len(self.dims),
            new_count=0,
            scheduled=self.result.scheduled,
            preempted=self.result.preempted,
        )
        # Running gang id -> all its running members, for preempting gangs as a unit.
        self.running_gangs: dict[tuple[str, str], list[Job]] = {}
        self.hold_of: dict[str, float] = {}
        self.running_jobs: dict[str, Job] = {}
        self.rate_global = allowance(
            self.cfg.scheduling_rate, self.cfg.scheduling_burst, snapshot.rate_tokens
        )

    # --- helpers ------------------------------------------------------------------------

    def pcp(self, job: Job) -> int:
        return self.pcs[job.priority_class].priority

    def preemptible(self, job: Job) -> bool:
        if self.pcs[job.priority_class].preemptible:
            return True
        if job.lifetime is not None and job.start_time is not None:
            return self.snap.now - job.start_time >= job.lifetime
        return False

    def running_order_or_id(self, job: Job) -> tuple:
        if job.priority_class in self.pcs:
            return running_order(job, self.pcs)
        return (0, 0, 0.0, 0.0, job.id)

    def queue_key_cost(self, queue: str, extra: list[int] | None = None) -> float:
        alloc = self.state.alloc[queue]
        if extra is not None:
            alloc = _add(alloc, extra)
        return (self.costs.cost(alloc) + self.offsets[queue]) / self.weights[queue]

    # --- the cycle ----------------------------------------------------------------------

    def run(self) -> SchedulingResult:
        snap = self.snap
        running: list[Job] = []
        queued: list[Job] = []
        for job in sorted(snap.jobs, key=lambda j: j.id):
            if job.node is not None:
                if job.node in self.node_index:
                    running.append(job)
            elif job.queue not in self.queues:
                self.result.failed[job.id] = reasons.UNKNOWN_QUEUE
            elif job.priority_class not in self.pcs:
                self.result.failed[job.id] = reasons.UNKNOWN_PRIORITY_CLASS
            else:
                queued.append(job)

        def accounted(job: Job) -> bool:
            return job.queue in self.queues and job.priority_class in self.pcs

        active = sorted({j.queue for j in queued} | {j.queue for j in running if accounted(j)})
        self.weights = {q: self.queues[q].weight for q in active}
        start_alloc = {q: [0] * len(self.dims) for q in active}
        demand_alloc = {q: [0] * len(self.dims) for q in active}
        for job in running:
            if accounted(job):
                start_alloc[job.queue] = _add(start_alloc[job.queue], _vec(job, self.dims))
        for q in active:
            demand_alloc[q] = list(start_alloc[q])
        for job in queued:
            demand_alloc[job.queue] = _add(demand_alloc[job.queue], _vec(job, self.dims))
        shares = {q: self.costs.cost(start_alloc[q]) for q in active}
        demands = {q: self.costs.cost(demand_alloc[q]) for q in active}
        protected = protected_queues(shares, self.weights, demands, self.cfg.protected_fraction)
        self.offsets = usage_offsets(
            {q: self.queues[q].decayed_usage for q in active},
            shares,
            snap.usage_elapsed,
            self.cfg.usage_half_life,
        )

        # Eviction: running gangs (single jobs are gangs of one) that may be preempted to fair
        # share go back to their queue; everything else keeps holding its node.
        units: dict[tuple[str, str, str], list[Job]] = defaultdict(list)
        for job in running:
            if job.gang_id is None:
                units[(job.queue, "job", job.id)].append(job)
            else:
                units[(job.queue, "gang", job.gang_id)].append(job)
        items: dict[str, list[_Item]] = defaultdict(list)
        for key in sorted(units):
            members = units[key]
            members.sort(key=lambda j: self.running_order_or_id(j))
            for j in members:
                self.running_gangs[j.id] = members
                self.running_jobs[j.id] = j
            hold = INF
            if all(accounted(j) for j in members) and all(self.preemptible(j) for j in members):
                if members[0].queue not in protected:
                    self._evict(members, items)
                    continue
                # A protected preemptible gang can still give way to more urgent jobs.
                hold = float(min(self.pcp(j) for j in members))
            for job in members:
                self._hold(job, hold)

        # Queued jobs, grouped into gangs.
        gangs: dict[tuple[str, str], list[Job]] = defaultdict(list)
        for job in queued:
            if self.queues[job.queue].cordoned:
                self.result.unscheduled[job.id] = reasons.QUEUE_CORDONED
                continue
            gangs[(job.queue, job.gang_id if job.gang_id is not None else "\0" + job.id)].append(
                job
            )
        for (queue, _), members in sorted(gangs.items()):
            members.sort(key=lambda j: queued_order(j, self.pcs))
            cardinality = members[0].gang_cardinality if members[0].gang_id is not None else 1
            if len(members) > cardinality:
                for j in members:
                    self.result.failed[j.id] = reasons.GANG_TOO_MANY
                continue
            if len(members) < cardinality:
                for j in members:
                    self.result.unscheduled[j.id] = reasons.gang_incomplete(
                        len(members), cardinality
                    )
                continue
            items[queue].append(self._item(QUEUED, queue, members))

        order = {
            EVICTED: lambda it: running_order(it.members[0], self.pcs),
            EXTRA: lambda it: running_order(it.members[0], self.pcs),
            QUEUED: lambda it: queued_order(it.members[0], self.pcs),
        }
        for queue in items:
            # Class priority first (seed 000's order); among equals, running jobs before queued.
            items[queue].sort(
                key=lambda it: (-self.pcp(it.members[0]), it.kind, order[it.kind](it))
            )
            self._lookback(items[queue])

        # Progressive filling.
        while True:
            best: tuple | None = None
            for queue in sorted(items):
                if not items[queue]:
                    continue
                head = items[queue][0]
                key = (-head.priority, self.queue_key_cost(queue, head.total), queue)
                if best is None or key < best:
                    best = key
            if best is None:
                break
            item = items[best[2]].pop(0)
            if item.kind == QUEUED:
                self._schedule_queued(item)
            else:
                self._replace_evicted(item)

        alloc = self.state.alloc  # gang attempts may have replaced the state object
        self.result.rate_consumed = {q: n for q, n in self.state.new_by_queue.items() if n}
        for q in self.queues:
            self.result.queue_costs[q] = self.costs.cost(alloc[q]) if q in alloc else 0.0
        return self.result

    def _item(self, kind: int, queue: str, members: list[Job], parent=None) -> _Item:
        total = [0] * len(self.dims)
        for j in members:
            total = _add(total, _vec(j, self.dims))
        priority = min(self.pcp(j) for j in members)
        return _Item(kind, queue, members, priority, total, parent)

    def _evict(self, members: list[Job], items: dict[str, list[_Item]]) -> None:
        queue = members[0].queue
        for job in members:
            ns = self.state.nodes[self.node_index[job.node]]  # type: ignore[index]
            ns.evicted[job.id] = (_vec(job, self.dims), self.pcp(job))
        minimum = max(1, min(members[0].min_cardinality, len(members)))
        if members[0].gang_id is None:
            minimum = len(members)
        core = self._item(EVICTED, queue, members[:minimum])
        items[queue].append(core)
        for job in members[minimum:]:
            items[queue].append(self._item(EXTRA, queue, [job], parent=core))

    def _hold(self, job: Job, hold: float) -> None:
        st = self.state
        vec = _vec(job, self.dims)
        ns = st.nodes[self.node_index[job.node]]  # type: ignore[index]
        ns.fixed[job.id] = (vec, hold)
        self.hold_of[job.id] = hold
        if job.queue in self.queues and job.priority_class in self.pcs:
            st.alloc[job.queue] = _add(st.alloc[job.queue], vec)
            key = (job.queue, job.priority_class)
            st.alloc_by_class[key] = _add(st.alloc_by_class[key], vec)

    def _lookback(self, queue_items: list[_Item]) -> None:
        """Keep the queued gangs that start within the queue's first ``max_queue_lookback``
        queued jobs (in the queue's order); the rest wait for a later cycle, unattempted."""
        lookback = self.cfg.max_queue_lookback
        if lookback is None:
            return
        seen = 0
        kept = []
        for it in queue_items:
            if it.kind == QUEUED:
                if seen >= lookback:
                    for j in it.members:
                        self.result.unscheduled[j.id] = reasons.queue_lookback(lookback)
                    continue
                seen += len(it.members)
            kept.append(it)
        queue_items[:] = kept

    # --- limits ------------------------------------------------------------------------

    def _rate_limit(self, item: _Item) -> str | None:
        """Token buckets: the whole gang must fit in what is left of each."""
        st = self.state
        size = len(item.members)
        if self.rate_global is not None and st.new_count + size > self.rate_global:
            return reasons.GLOBAL_RATE_LIMIT
        cfg = self.cfg
        own = allowance(
            cfg.queue_scheduling_rate,
            cfg.queue_scheduling_burst,
            self.snap.queue_rate_tokens.get(item.queue),
        )
        if own is not None and st.new_by_queue.get(item.queue, 0) + size > own:
            return reasons.QUEUE_RATE_LIMIT
        return None

    def _class_limit(self, item: _Item) -> str | None:
        by_class: dict[str, list[int]] = {}
        for j in item.members:
            by_class[j.priority_class] = _add(
                by_class.get(j.priority_class, [0] * len(self.dims)), _vec(j, self.dims)
            )
        for pc_name in sorted(by_class):
            limits = self.pcs[pc_name].max_fraction_per_queue
            have = _add(self.state.alloc_by_class[(item.queue, pc_name)], by_class[pc_name])
            for i, d in enumerate(self.dims):
                if d in limits and have[i] > limits[d] * self.totals[i]:
                    return reasons.queue_class_limit(pc_name)
        return None

    def _cycle_limit(self, item: _Item) -> str | None:
        st = self.state
        cap = self.cfg.max_jobs_per_cycle
        if cap is not None and st.new_count + len(item.members) > cap:
            return reasons.MAX_JOBS_PER_CYCLE
        limits = self.cfg.max_fraction_per_cycle
        for i, d in enumerate(self.dims):
            if d in limits and st.new_total[i] + item.total[i] > limits[d] * self.totals[i]:
                return reasons.MAX_RESOURCES_PER_CYCLE
        return None

    # --- evicted jobs go back to their own node, or are preempted ---------------------

    def _replace_evicted(self, item: _Item) -> None:
        st = self.state
        ok = not (item.parent is not None and item.parent.failed)
        if ok and self._class_limit(item) is not None:
            ok = False
        placed: list[tuple[_NodeState, Job, list[int]]] = []
        if ok:
            for job in item.members:
                ns = st.nodes[self.node_index[job.node]]  # type: ignore[index]
                vec = _vec(job, self.dims)
                if _fits(self._free_fixed(ns, -INF), vec):
                    ns.fixed[job.id] = (vec, INF)
                    placed.append((ns, job, vec))
                else:
                    ok = False
                    break
        if ok:
            for ns, job, vec in placed:
                del ns.evicted[job.id]
                self._account(job, vec, +1)
            return
        for ns, job, _ in placed:
            del ns.fixed[job.id]
        item.failed = True
        for job in item.members:
            ns = st.nodes[self.node_index[job.node]]  # type: ignore[index]
            del ns.evicted[job.id]
            st.preempted.add(job.id)

    def _account(self, job: Job, vec: list[int], sign: int) -> None:
        st = self.state
        delta = vec if sign > 0 else [-v for v in vec]
        st.alloc[job.queue] = _add(st.alloc[job.queue], delta)
        key = (job.queue, job.priority_class)
        st.alloc_by_class[key] = _add(st.alloc_by_class[key], delta)

    # --- free resources at the different displacement levels ---------------------------

    def _free_all(self, ns: _NodeState) -> list[int]:
        free = list(ns.capacity)
        for vec, _ in ns.fixed.values():
            free = _sub(free, vec)
        for vec, _ in ns.evicted.values():
            free = _sub(free, vec)
        return free

    def _free_evicted_level(self, ns: _NodeState, level: float) -> list[int]:
        """Free if evicted jobs of class priority <= level give way."""
        free = list(ns.capacity)
        for vec, _ in ns.fixed.values():
            free = _sub(free, vec)
        for vec, pcp in ns.evicted.values():
            if pcp > level:
                free = _sub(free, vec)
        return free

    def _free_fixed(self, ns: _NodeState, level: float) -> list[int]:
        """Free if every evicted job, and held jobs of priority <= level, give way."""
        free = list(ns.capacity)
        for vec, hold in ns.fixed.values():
            if hold > level:
                free = _sub(free, vec)
        return free

    # --- node selection -------------------------------------------------------------------

    def _select_node(
        self, job: Job, allowed: set[int] | None
    ) -> tuple[_NodeState, tuple[int, float], float | None] | str:
        st = self.state
        vec = _vec(job, self.dims)
        candidates = [
            ns
            for ns in st.nodes
            if (allowed is None or ns.index in allowed) and node_admits(job, ns.node)
        ]
        if not candidates:
            return reasons.NO_MATCHING_NODE
        if not any(_fits(ns.capacity, vec) for ns in candidates):
            return reasons.TOO_LARGE

        def best(free_of) -> _NodeState | None:
            chosen, chosen_key = None, None
            for ns in candidates:
                free = free_of(ns)
                if _fits(free, vec):
                    key = (free, ns.index)
                    if chosen_key is None or key < chosen_key:
                        chosen, chosen_key = ns, key
            return chosen

        found = best(self._free_all)
        if found is not None:
            return found, (0, 0.0), None
        own = self.pcp(job)
        evicted_levels = sorted({pcp for ns in st.nodes for _, pcp in ns.evicted.values()})
        for level in evicted_levels:
            if level < own:
                found = self._by_victims(candidates, vec, level, evicted=True)
            else:
                found = best(lambda ns, lv=level: self._free_evicted_level(ns, lv))
            if found is not None:
                return found, (1, float(level)), None
        hold_levels = sorted({h for ns in st.nodes for _, h in ns.fixed.values() if h < own})
        for level in hold_levels:
            found = self._by_victims(candidates, vec, level, evicted=False)
            if found is not None:
                return found, (2, float(level)), level
        return reasons.NO_CAPACITY

    # --- victims ------------------------------------------------------------------------

    def _fraction(self, queue: str) -> float:
        """The queue's fraction of its fair share (up to a common factor): cost of what it
        holds or may still get back (its evicted jobs not yet re-placed), per weight."""
        usage = self.state.alloc[queue]
        for ns in self.state.nodes:
            for jid, (vec, _) in ns.evicted.items():
                if self.running_jobs[jid].queue == queue:
                    usage = _add(usage, vec)
        return (self.costs.cost(usage) + self.offsets[queue]) / self.weights[queue]

    def _victims_on(
        self, ns: _NodeState, level: float, evicted: bool
    ) -> list[tuple[tuple[float, float, str], str, list[int]]]:
        """Jobs on the node that may give way at ``level``, as (group, job id, requests) in
        the order they are taken: lowest class priority, then the queue furthest above its
        fair share (then queue name), then the most recently ordered job."""
        fractions: dict[str, float] = {}

        def group(job: Job, priority: float) -> tuple[float, float, str]:
            if job.queue not in fractions:
                fractions[job.queue] = self._fraction(job.queue)
            return (priority, -fractions[job.queue], job.queue)

        out = []
        if evicted:
            for jid, (vec, pcp) in ns.evicted.items():
                if pcp <= level:
                    out.append((self.running_jobs[jid], float(pcp), vec))
        else:
            for jid, (vec, hold) in ns.fixed.items():
                if hold <= level:
                    out.append((self.running_jobs[jid], hold, vec))
        out.sort(key=lambda t: running_order(t[0], self.pcs), reverse=True)
        keyed = [(group(j, p), j.id, vec) for j, p, vec in out]
        keyed.sort(key=lambda t: t[0])
        return keyed

    def _by_victims(
        self, candidates: list[_NodeState], vec: list[int], level: float, evicted: bool
    ) -> _NodeState | None:
        """The node to displace on, chosen by the victims it needs (seed 000): the least
        protected job that must give way (lowest class priority, then the queue furthest
        above its fair share), then best fit at the level, then node order."""
        chosen, chosen_key = None, None
        for ns in candidates:
            if evicted:
                free = self._free_evicted_level(ns, level)
                room = self._free_all(ns)
            else:
                free = self._free_fixed(ns, level)
                room = self._free_fixed(ns, -INF)
            if not _fits(free, vec):
                continue
            worst: tuple = ()
            for grp, _, v in self._victims_on(ns, level, evicted):
                if _fits(room, vec):
                    break
                room = _add(room, v)
                worst = grp
            key = (worst, free, ns.index)
            if chosen_key is None or key < chosen_key:
                chosen, chosen_key = ns, key
        return chosen

    def _place(self, job: Job, allowed: set[int] | None) -> tuple[int, float] | str:
        """Place one queued job on the chosen node, preempting by urgency if needed."""
        chosen = self._select_node(job, allowed)
        if isinstance(chosen, str):
            return chosen
        ns, rank, urgency_level = chosen
        vec = _vec(job, self.dims)
        if urgency_level is not None:
            self._preempt_for(job, ns, vec, urgency_level)
        ns.fixed[job.id] = (vec, INF)
        self._account(job, vec, +1)
        st = self.state
        st.scheduled[job.id] = ns.node.id
        st.new_count += 1
        st.new_by_queue[job.queue] = st.new_by_queue.get(job.queue, 0) + 1
        st.new_total = _add(st.new_total, vec)
        return rank

    def _preempt_for(self, job: Job, ns: _NodeState, vec: list[int], level: float) -> None:
        """Urgency preemption of a minimal set: victims are taken in order until the job fits,
        then any victim that a later one made unnecessary is put back (latest first)."""
        st = self.state
        room = self._free_fixed(ns, -INF)
        taken: list[list[Job]] = []
        seen: set[str] = set()
        for _, jid, _ in self._victims_on(ns, level, evicted=False):
            if _fits(room, vec):
                break
            if jid in seen:
                continue
            unit = self.running_gangs[jid]
            seen.update(m.id for m in unit)
            taken.append(unit)
            room = _add(room, self._on_node(unit, ns))
        keep = [True] * len(taken)
        for k in range(len(taken) - 2, -1, -1):
            back = _sub(room, self._on_node(taken[k], ns))
            if _fits(back, vec):
                room = back
                keep[k] = False
        for unit in (u for u, kept in zip(taken, keep, strict=True) if kept):
            for member in unit:
                owner = st.nodes[self.node_index[member.node]]  # type: ignore[index]
                held = owner.fixed.pop(member.id)
                self._account(member, held[0], -1)
                st.preempted.add(member.id)

    def _on_node(self, unit: list[Job], ns: _NodeState) -> list[int]:
        """What the members of a running gang hold on one node."""
        total = [0] * len(self.dims)
        for member in unit:
            if member.node == ns.node.id:
                total = _add(total, _vec(member, self.dims))
        return total

    # --- queued gangs ---------------------------------------------------------------------

    def _schedule_queued(self, item: _Item) -> None:
        members = item.members
        reason = self._cycle_limit(item) or self._rate_limit(item) or self._class_limit(item)
        if reason is not None:
            for j in members:
                self.result.unscheduled[j.id] = reason
            return
        if len(members) == 1 and members[0].gang_id is None:
            outcome = self._place(members[0], None)
            if isinstance(outcome, str):
                self.result.unscheduled[members[0].id] = outcome
            return
        minimum = max(1, min(members[0].min_cardinality, len(members)))
        label = members[0].gang_uniformity_label
        if label is None:
            saved = self._save()
            attempt = self._try_gang(members, minimum, None)
            if isinstance(attempt, str):
                self._restore(saved)
                for j in members:
                    self.result.unscheduled[j.id] = reasons.gang_failed(attempt)
                return
            self._finish_gang(members, attempt[0])
            return
        values = sorted(
            {ns.node.labels[label] for ns in self.state.nodes if label in ns.node.labels}
        )
        best_key, best_value = None, None
        for value in values:
            allowed = {ns.index for ns in self.state.nodes if ns.node.labels.get(label) == value}
            saved = self._save()
            attempt = self._try_gang(members, minimum, allowed)
            if not isinstance(attempt, str):
                placed, worst = attempt
                leftover = [0] * len(self.dims)
                for ns in self.state.nodes:
                    if ns.index in allowed:
                        leftover = _add(leftover, self._free_all(ns))
                key = (-len(placed), worst, leftover, value)
                if best_key is None or key < best_key:
                    best_key, best_value = key, value
            self._restore(saved)
        if best_value is None:
            for j in members:
                self.result.unscheduled[j.id] = reasons.gang_uniformity_failed(label)
            return
        allowed = {ns.index for ns in self.state.nodes if ns.node.labels.get(label) == best_value}
        attempt = self._try_gang(members, minimum, allowed)
        assert not isinstance(attempt, str)
        self._finish_gang(members, attempt[0])

    def _save(self) -> _State:
        st = self.state
        alloc = defaultdict(lambda: [0] * len(self.dims))
        alloc.update({k: list(v) for k, v in st.alloc.items()})
        by_class = defaultdict(lambda: [0] * len(self.dims))
        by_class.update({k: list(v) for k, v in st.alloc_by_class.items()})
        return _State(
            nodes=[
                _NodeState(ns.node, ns.index, ns.capacity, dict(ns.fixed), dict(ns.evicted))
                for ns in st.nodes
            ],
            alloc=alloc,
            alloc_by_class=by_class,
            new_total=list(st.new_total),
            new_count=st.new_count,
            scheduled=dict(st.scheduled),
            preempted=set(st.preempted),
            new_by_queue=dict(st.new_by_queue),
        )

    def _restore(self, saved: _State) -> None:
        self.state = saved
        # The result shares these collections with the state.
        self.result.scheduled = saved.scheduled
        self.result.preempted = saved.preempted

    def _try_gang(
        self, members: list[Job], minimum: int, allowed: set[int] | None
    ) -> tuple[set[str], tuple[int, float]] | str:
        placed: set[str] = set()
        worst = (0, 0.0)
        first_reason: str | None = None
        for job in members:
            outcome = self._place(job, allowed)
            if isinstance(outcome, str):
                first_reason = first_reason or outcome
                if minimum == len(members):
                    return outcome
                continue
            placed.add(job.id)
            worst = max(worst, outcome)
        if len(placed) < minimum:
            return first_reason or reasons.NO_CAPACITY
        return placed, worst

    def _finish_gang(self, members: list[Job], placed: set[str]) -> None:
        for j in members:
            if j.id not in placed:
                self.result.failed[j.id] = reasons.GANG_ELASTIC_REST


def _vec_res(node: Node, dims: tuple[str, ...]) -> list[int]:
    return [node.capacity.get(d, 0) for d in dims]
