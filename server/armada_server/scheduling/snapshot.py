"""From what the database holds to the scheduler's snapshot, and its decisions back."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from itertools import compress, repeat
from operator import attrgetter
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from armada_core import scheduling as s
from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.jobs.gangs import GangSpec, gang_of
from armada_core.scheduling.model import intern_kind, intern_shape, kind_key, next_serial, shape_key
from armada_server.config import PriorityClassConfig
from armada_server.executors.capabilities import unhonoured
from armada_server.scheduling.running_views import RunningViews, pod_group_members, serials_of
from armada_server.storage.scheduling_reads import (
    ExecutorNodes,
    QueuedJob,
    RunningJob,
    SchedulingState,
    TerminatingRun,
)


@dataclass(frozen=True)
class Placement:
    executor: str
    node: str
    pool: str


def node_id(executor: str, node: str) -> str:
    return f"{executor}/{node}"


_RESOURCES: dict[tuple[tuple[str, str], ...], s.Resources] = {}


def _resources(values: Mapping[str, str]) -> s.Resources:
    """Parsed resource lists, shared: clusters have few distinct shapes, and parsing
    Kubernetes quantities (with fractions) was most of the cost of building a snapshot."""
    key = tuple(sorted(values.items()))
    found = _RESOURCES.get(key)
    if found is None:
        if len(_RESOURCES) >= 100_000:
            _RESOURCES.clear()
        found = _RESOURCES[key] = s.Resources.from_k8s(dict(key))
    return found


def _static(spec: submit_pb2.Job) -> tuple[dict[str, Any], GangSpec | None]:
    """The scheduler's fields that the spec alone decides (all but the id), and the gang."""
    pod = spec.pod_specs[0] if spec.pod_specs else spec.pod_spec
    gang = gang_of(spec.annotations)
    affinity = pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    lifetime = spec.annotations.get(ann.LIFETIME)
    selector = dict(pod.nodeSelector)
    if spec.annotations.get(ann.POOL):
        selector[ann.POOL] = spec.annotations[ann.POOL]
    return {
        "queue": spec.queue,
        "priority_class": pod.priorityClassName,
        "requests": _resources(
            {k: v.string for k, v in spec.scheduling_resource_requirements.requests.items()}
        ),
        "node_selector": selector,
        "tolerations": tuple(
            s.Toleration(key=t.key, operator=t.operator or "Equal", value=t.value, effect=t.effect)
            for t in pod.tolerations
        ),
        "affinity": tuple(
            s.NodeSelectorTerm(
                tuple(
                    s.NodeSelectorRequirement(e.key, e.operator, tuple(e.values))
                    for e in term.matchExpressions
                )
            )
            for term in affinity.nodeSelectorTerms
        ),
        "gang_id": gang.id if gang else None,
        "gang_uniformity_label": (gang.node_uniformity_label or None) if gang else None,
        "gang_max_hops": gang.max_hops if gang else None,
        "gang_role": (gang.role or None) if gang else None,
        "gang_role_min": gang.role_minimum if gang else None,
        "gang_role_max_hops": gang.role_max_hops if gang else None,
        "lifetime": float(lifetime) if lifetime else None,
    }, gang


def _make(
    job_id: str,
    static: dict[str, Any],
    gang: GangSpec | None,
    *,
    priority: float,
    submitted_at: datetime,
    node: str | None = None,
    started_at: datetime | None = None,
    avoid_node: str | None = None,
    gang_cardinality: int | None = None,
    excess_flow: int = 0,
) -> s.Job:
    cardinality = minimum = None
    if gang is not None:
        # A retried generation is formed from the members still to run.
        cardinality = min(gang.cardinality, gang_cardinality or gang.cardinality)
        minimum = min(gang.minimum_cardinality, cardinality)
    return s.Job(
        id=job_id,
        **static,
        priority=int(priority),
        submit_time=submitted_at.timestamp(),
        avoid_node=avoid_node,
        gang_cardinality=cardinality or 1,
        gang_min_cardinality=minimum,
        start_time=started_at.timestamp() if started_at else None,
        node=node,
        excess_flow=excess_flow,
    )


def _job(spec: submit_pb2.Job, **kw: Any) -> s.Job:
    static, gang = _static(spec)
    return _make(spec.id, static, gang, **kw)


def spec_view(spec: submit_pb2.Job) -> s.Job:
    """The scheduler's view of a job not yet stored, as its spec alone decides it:
    submission checks a job against the nodes as the scheduler will see them."""
    return _job(spec, priority=0, submitted_at=_EPOCH)


_EPOCH = datetime.fromtimestamp(0, UTC)


# Spec bytes after the job id -> _static of that spec. Jobs submitted together usually differ
# only in their ids, and parsing and converting 100,000 specs was most of a first cycle.
# The key (QueuedJob.spec_key) is the serialised spec without its id.
_SPECS: dict[bytes, tuple[dict[str, Any], GangSpec | None]] = {}


def _static_of(
    j: QueuedJob | RunningJob | TerminatingRun, key: bytes | None = None
) -> tuple[dict[str, Any], GangSpec | None]:
    """_static of a stored job's spec, converted once per distinct spec (`key`: its
    `spec_key`, when the caller has it)."""
    key = j.spec_key if key is None else key
    if key is None:
        return _static(j.spec)
    found = _SPECS.get(key)
    if found is None:
        if len(_SPECS) >= 10_000:
            _SPECS.clear()
        found = _SPECS[key] = _static(j.spec)
    return found


# A view by its spec's key and what else decides its shape and kind: jobs submitted together
# share a spec, and the first cycle of a million made a million views through Job's
# constructor at about 8 us each, where a copy of one of them takes 3.
_TEMPLATES: dict[tuple[object, ...], s.Job] = {}
_TEMPLATES_KEPT = 10_000


def _convert(j: QueuedJob | RunningJob, **kw: Any) -> s.Job:
    key = j.spec_key
    if key is None:
        return _job(j.spec, **kw)
    like = (key, kw.get("avoid_node"), kw.get("gang_cardinality"), kw.get("node") is not None)
    template = _TEMPLATES.get(like)
    if template is None:
        view = _make(j.id, *_static_of(j, key), **kw)
        if len(_TEMPLATES) >= _TEMPLATES_KEPT:
            _TEMPLATES.clear()
        _TEMPLATES[like] = view
        return view
    started = kw.get("started_at")
    return _moved(
        template,
        id=j.id,
        priority=int(kw["priority"]),
        avoid_node=template.avoid_node,  # part of the template's key
        submit_time=kw["submitted_at"].timestamp(),
        node=kw.get("node"),
        start_time=started.timestamp() if started else None,
        excess_flow=kw.get("excess_flow", 0),
    )


CAPABILITY_LABEL = "armadaproject.io/capabilities"
# (spec key, the executors' distinct declarations) -> the declarations the spec needs avoided.
_AVOIDED: dict[tuple[bytes | str, tuple[tuple[str, ...], ...]], tuple[str, ...]] = {}


def _capability_kinds(state: SchedulingState) -> tuple[tuple[str, ...], ...]:
    """The executors' distinct declarations of what they cannot honour, in a fixed order."""
    return tuple(sorted({e.unsupported for e in state.executors}))


def _honoured(
    sources: list[QueuedJob], jobs: list[s.Job], classes: tuple[tuple[str, ...], ...]
) -> list[s.Job]:
    """Queued jobs keep off the nodes of executors that cannot honour their specs.

    Submission refuses a job no executor of its pool can run; in a pool whose executors
    differ (local processes beside a Kubernetes cluster), the job must also be placed where
    it can run. Nodes carry their executor's class of declaration as a label, and a job that
    a class cannot honour gets a requirement `NotIn` that class (on every affinity term)."""
    if len(classes) < 2:
        return jobs  # one kind of executor: submission decided
    out = []
    for source, job in zip(sources, jobs, strict=True):
        avoided = _avoided(source, classes)
        if avoided:
            requirement = s.NodeSelectorRequirement(CAPABILITY_LABEL, "NotIn", avoided)
            terms = job.affinity or (s.NodeSelectorTerm(()),)
            job = dataclasses.replace(
                job,
                affinity=tuple(
                    s.NodeSelectorTerm((*t.match_expressions, requirement)) for t in terms
                ),
            )
        out.append(job)
    return out


def _avoided(job: QueuedJob, classes: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    key = (job.spec_key or job.id, classes)
    found = _AVOIDED.get(key)
    if found is None:
        if len(_AVOIDED) >= 10_000:
            _AVOIDED.clear()
        pod = job.spec.pod_specs[0] if job.spec.pod_specs else job.spec.pod_spec
        found = _AVOIDED[key] = tuple(
            f"c{i}"
            for i, unsupported in enumerate(classes)
            if unsupported and unhonoured(pod, unsupported)
        )
    return found


def _avoidable(nodes: Sequence[s.Node]) -> Callable[[QueuedJob], str | None]:
    """A retry avoids the node its last run failed on, unless that node is the only one the
    job could run on (a pool of one node): the job would otherwise wait for ever. The nodes
    are counted for the first retry asked about (most cycles have none)."""

    @cache
    def counted() -> tuple[dict[str, int], dict[str, str], int]:
        counts: dict[str, int] = {}  # pool -> nodes
        pools: dict[str, str] = {}  # node -> pool
        for n in nodes:
            if not n.cordoned:
                pool = n.labels.get(ann.POOL, "")
                counts[pool] = counts.get(pool, 0) + 1
                pools[n.id] = pool
        return counts, pools, sum(counts.values())

    def avoided(j: QueuedJob) -> str | None:
        counts, pools, total = counted()
        node = j.avoid_node
        pool = j.spec.annotations.get(ann.POOL)
        candidates = counts.get(pool, 0) if pool else total
        if node in pools and (not pool or pools[node] == pool):
            candidates -= 1
        return node if candidates > 0 else None

    return avoided


def _held(terminating: Sequence[TerminatingRun], broken: dict[str, str]) -> dict[str, s.Resources]:
    """What runs on their way out still hold, per node id."""
    held: dict[str, s.Resources] = {}
    for run in terminating:
        try:
            requests = _static_of(run)[0]["requests"]
        except Exception:  # unreadable: it holds nothing we can count
            continue
        held[run.node] = held[run.node] + requests if run.node in held else requests
    return held


def _with_roles(
    jobs: list[s.Job], ended: Mapping[tuple[str, str], Mapping[str, int]], members: list[int]
) -> list[s.Job]:
    """Pod group members (at `members` among `jobs`) carry every role their group has
    (`Job.gang_roles`): those of its members in the snapshot and of those that ended
    (`ended`, read from storage)."""
    if not members:
        return jobs
    seen: dict[tuple[str, str | None], dict[str, int]] = {}
    for i in members:
        j = jobs[i]
        assert j.gang_role is not None
        key = (j.queue, j.gang_id)
        known = seen.get(key)
        if known is None:
            known = seen[key] = dict(ended.get((j.queue, j.gang_id or ""), {}))
        known[j.gang_role] = max(known.get(j.gang_role, 0), j.gang_role_min or 0)
    out = list(jobs)
    for i in members:
        j = out[i]
        out[i] = dataclasses.replace(
            j, gang_roles=tuple(sorted(seen[(j.queue, j.gang_id)].items()))
        )
    return out


def _with_succeeded(
    jobs: list[s.Job], succeeded: Mapping[tuple[str, str], Mapping[str, int]], members: list[int]
) -> list[s.Job]:
    """Pod group members carry how many members of each role of their group succeeded
    (`Job.gang_succeeded`, read from storage): they keep their role's minimum, though the
    snapshot holds only queued and running jobs."""
    out = jobs
    for i in members:
        j = jobs[i]
        done = succeeded.get((j.queue, j.gang_id or ""))
        if done:
            if out is jobs:
                out = list(jobs)
            out[i] = dataclasses.replace(j, gang_succeeded=tuple(sorted(done.items())))
    return out


# What the snapshot made of a job, by id: whether it was queued or running, what the view
# depends on that can change, the view, and the row it was made from (the leader holds a
# job's row object until the job changes: storage/held_jobs.py).
Made = tuple[type, tuple[object, ...], s.Job, object]


class _Views:
    """The scheduler's view of each stored job, reusing the previous cycle's (`cache`).

    A job still queued (or running) as it was is not converted again; a job that only moved
    (queued -> running, started) keeps everything its spec decides. Specs never change after
    submission, so what is compared is what the database may change. A job whose conversion
    raises is left out, with the reason in `broken`.

    With `changed` (the ids of every job whose row changed since the cache was made, as the
    leader's held jobs know them), the cache is kept and only those jobs' entries are
    renewed or dropped; without, it is rebuilt from the views this cycle uses. A backlog's
    million unchanged jobs then cost a lookup each, not a million entries written again."""

    def __init__(
        self,
        cache: dict[str, Made],
        broken: dict[str, str],
        changed: Collection[str] | None,
        kept: RunningViews | None = None,
    ) -> None:
        self.cache = cache
        self.broken = broken
        self.changed = changed
        self.kept = RunningViews() if kept is None else kept
        # The views made or renewed this cycle (all of them used, without `changed`).
        self.used: dict[str, Made] = {}

    def queued(self, j: QueuedJob, avoid_node: str | None) -> s.Job | None:
        made = self.cache.get(j.id)
        if made is not None and made[3] is j and j.avoid_node is None:
            self.used[j.id] = made  # the same row: nothing the view depends on changed
            return made[2]
        key = (j.priority, j.submitted_at, avoid_node, j.gang_cardinality)
        kept = self._kept(j, key)
        if kept is not None:
            return kept
        return self._make(
            j,
            key,
            priority=j.priority,
            submitted_at=j.submitted_at,
            avoid_node=avoid_node,
            gang_cardinality=j.gang_cardinality,
        )

    def queued_all(
        self, jobs: Sequence[QueuedJob], avoidable: Callable[[QueuedJob], str | None]
    ) -> tuple[list[QueuedJob], list[s.Job]]:
        """The views of the queued `jobs` that have one, and the jobs they were made of. A
        backlog's jobs are mostly the same rows as last cycle, each holding the view made of
        it (`QueuedJob.view`): those are taken in C; the others are made here."""
        views: list[s.Job | None] = list(map(attrgetter("view"), jobs))
        missing = list(compress(range(len(views)), map(operator.is_, views, repeat(None))))
        for i in missing:
            j = jobs[i]
            view = self.queued(j, j.avoid_node and avoidable(j))
            if view is not None and j.avoid_node is None:
                # The view is the row's alone (a plain queued job's view depends on nothing
                # else), so the row holds it for as long as the leader holds the row.
                object.__setattr__(j, "view", view)
            views[i] = view
        if all(views[i] is not None for i in missing):
            return list(jobs), cast(list[s.Job], views)
        pairs = [(j, v) for j, v in zip(jobs, views, strict=True) if v is not None]
        return [j for j, _ in pairs], [v for _, v in pairs]

    def running_all(
        self, state: SchedulingState, placements: Mapping[str, object]
    ) -> tuple[list[s.Job], list[int], NDArray[np.int64]]:
        """The views of the running jobs (in order of id) on known nodes (`placements`) that
        have one, where the pod groups' members are among them, and their serials. Where the
        leader's held jobs say which changed since the views kept (`RunningViews`), those
        are patched; else, as in queued_all, a job still the same row as last cycle holds
        its view, taken in C. What is returned is kept for the next cycle: not to be
        changed."""
        kept, marks, by_id = self.kept, state.held_marks, state.running_by_id
        changed = self.changed
        if (
            changed is not None
            and by_id is not None
            and marks is not None
            and kept.follows(marks[0], placements)
        ):
            kept.patch(changed, by_id, placements, self.running, marks[1])
            return kept.views, kept.places(kept.in_groups), kept.serials
        kept.clear()
        jobs = list(state.running)
        if not set(map(attrgetter("node"), jobs)) <= placements.keys():
            jobs = [j for j in jobs if j.node in placements]
        views: list[s.Job | None] = list(map(attrgetter("view"), jobs))
        missing = list(compress(range(len(views)), map(operator.is_, views, repeat(None))))
        for i in missing:
            j = jobs[i]
            view = views[i] = self.running(j)
            if view is not None:
                object.__setattr__(j, "view", view)  # a running job's view is its row's alone
        made = [v for v in views if v is not None]
        in_groups, serials = pod_group_members(made), serials_of(made)
        if len(made) == len(views) and by_id is not None and marks is not None:
            ids = list(map(attrgetter("id"), jobs))
            kept.keep(ids, made, serials, in_groups, placements.keys(), marks[1])
        return made, in_groups, serials

    def running(self, j: RunningJob) -> s.Job | None:
        made = self.cache.get(j.id)
        if made is not None and made[3] is j:
            if self.changed is None:
                self.used[j.id] = made
            return made[2]
        key = (j.priority, j.submitted_at, j.node, j.started_at, j.excess_flow)
        kept = self._kept(j, key)
        if kept is not None:
            return kept
        return self._make(
            j,
            key,
            priority=j.priority,
            submitted_at=j.submitted_at,
            node=j.node,
            started_at=j.started_at,
            excess_flow=j.excess_flow,
        )

    def _kept(self, j: QueuedJob | RunningJob, key: tuple[object, ...]) -> s.Job | None:
        """The previous cycle's view of `j`, if it was made from the same fields."""
        made = self.cache.get(j.id)
        if made is not None and made[0] is type(j) and made[1] == key:
            self.used[j.id] = made if made[3] is j else (*made[:3], j)
            return made[2]
        return None

    def _make(self, j: QueuedJob | RunningJob, key: tuple[object, ...], **kw: Any) -> s.Job | None:
        made = self.cache.get(j.id)
        try:
            before = made[2] if made is not None else None
            if before is not None and before.gang_id is None and kw.get("gang_cardinality") is None:
                started = kw.get("started_at")
                view = _moved(
                    before,
                    id=before.id,
                    priority=int(kw["priority"]),
                    submit_time=kw["submitted_at"].timestamp(),
                    avoid_node=kw.get("avoid_node"),
                    node=kw.get("node"),
                    start_time=started.timestamp() if started else None,
                    excess_flow=kw.get("excess_flow", 0),
                )
            else:
                view = _convert(j, **kw)
        except Exception as e:  # an error in one job's spec is that job's alone
            self.broken[j.id] = f"the scheduler cannot read the job: {type(e).__name__}: {e}"
            return None
        self.used[j.id] = (type(j), key, view, j)
        return view

    def keep(self) -> None:
        """Keep this cycle's views for the next: all of them, or, with `changed`, the
        cache with the views renewed and those of changed jobs not seen again dropped."""
        if self.changed is None:
            self.cache.clear()
        else:
            for job_id in self.changed:
                if job_id not in self.used:
                    self.cache.pop(job_id, None)
        self.cache.update(self.used)


# The fields a moved or copied view takes of its own; every other field is its spec's, or
# derived from the fields (the shape, the kind, the serial).
_OWN_FIELDS = ("id", "priority", "submit_time", "avoid_node", "node", "start_time", "excess_flow")


def _view_copier() -> Callable[..., s.Job]:
    """`_moved`, written out slot by slot from the view's class (as dataclasses writes its
    methods): one setter call per slot, past the frozen class's __setattr__. A loop over the
    27 slots cost 1.7 times as much, and a first cycle at a million queued copies a million."""
    slots = s.Job.__slots__
    lines = [
        f"def moved(before, *, {', '.join(_OWN_FIELDS)}):",
        "    after = new(Job)",
        "    v = values(before)",
        *(
            f"    set_{name}(after, {name if name in _OWN_FIELDS else f'v[{k}]'})"
            for k, name in enumerate(slots)
            if name not in ("kind_id", "serial")
        ),
        "    if avoid_node != before.avoid_node:",
        "        set_shape_id(after, intern_shape(shape_key(after)))",
        "    set_kind_id(after, intern_kind(kind_key(after)))",
        "    set_serial(after, next_serial())",
        "    return after",
    ]
    scope: dict[str, Any] = {f"set_{name}": getattr(s.Job, name).__set__ for name in slots}
    scope |= {
        "new": object.__new__,
        "Job": s.Job,
        "values": operator.attrgetter(*slots),
        "intern_shape": intern_shape,
        "shape_key": shape_key,
        "intern_kind": intern_kind,
        "kind_key": kind_key,
        "next_serial": next_serial,
    }
    exec("\n".join(lines), scope)  # the source is made above, from the class's slots
    return cast(Callable[..., s.Job], scope["moved"])


#: `before` with its own fields (`_OWN_FIELDS`, all given by keyword) set, as
#: dataclasses.replace makes it at a tenth of the cost (a cycle after 80,000 leases moves
#: 80,000 jobs): the fields are copied, not validated again, and the shape is interned
#: again only when the node to avoid changed (the kind, which holds whether the job runs,
#: always).
_moved = _view_copier()


@dataclass
class ExecutorViews:
    """The scheduler's views of one executor's nodes, and what they were made from."""

    made_from: tuple[str, bytes, frozenset[str], str]  # pool, stored nodes, cordons, class
    nodes: list[s.Node]
    placements: dict[str, Placement]  # node id -> where it lives
    by_node: dict[bytes, s.Node]  # each view by its node as reported, with its cordon


# Each executor's node views, kept between cycles: reused whole while the executor reports
# the same nodes with the same cordons (most cycles), else node by node where a node is
# reported the same. Views of 10,000 nodes took a part of every cycle to make.
NodeViews = dict[str, ExecutorViews]


def _nodes(
    state: SchedulingState, broken: dict[str, str], views: NodeViews | None
) -> tuple[list[s.Node], dict[str, Placement]]:
    """The scheduler's nodes, less what terminating runs still hold on them, and where each
    node id lives. `views` holds the last cycle's views of the nodes, and is left holding
    this cycle's."""
    placements: dict[str, Placement] = {}
    nodes: list[s.Node] = []
    kinds = _capability_kinds(state)
    before = {} if views is None else views
    made: NodeViews = {}
    for executor in state.executors:
        kind = f"c{kinds.index(executor.unsupported)}" if len(kinds) > 1 else ""
        viewed = made[executor.id] = _executor_views(executor, kind, before.get(executor.id))
        nodes += viewed.nodes
        placements.update(viewed.placements)
    held = _held(state.terminating, broken)
    if held:
        for i, node in enumerate(nodes):
            if node.id in held:
                capacity = {k: max(v - held[node.id].get(k), 0) for k, v in node.capacity.items()}
                nodes[i] = dataclasses.replace(node, capacity=s.Resources(capacity))
    if views is not None:
        views.clear()
        views.update(made)
    return nodes, placements


def _executor_views(
    executor: ExecutorNodes, kind: str, before: ExecutorViews | None
) -> ExecutorViews:
    """The views of `executor`'s nodes: `before` (the last cycle's) when made from the same
    stored nodes, cordons and capability class, else made node by node, reusing those of
    `before` whose node is reported the same."""
    made_from = (executor.pool, executor.stored, executor.cordoned, kind)
    if before is not None and executor.stored and before.made_from == made_from:
        return before
    reuse: dict[bytes, s.Node] = {}
    if before is not None and (before.made_from[0], before.made_from[3]) == (made_from[0], kind):
        reuse = before.by_node  # their labels (pool, capability class) are the same
    capability = {CAPABILITY_LABEL: kind} if kind else {}
    viewed = ExecutorViews(made_from, [], {}, {})
    for n in executor.nodes:
        reported = n.SerializeToString(deterministic=True)
        node = reuse.get(reported)
        if node is None:
            node = node_view(executor.id, executor.pool, n, capability)
        viewed.by_node[reported] = node
        viewed.nodes.append(node)
        viewed.placements[node.id] = Placement(executor.id, n.name, executor.pool)
    return viewed


def node_view(
    executor: str, pool: str, n: executor_pb2.Node, labels: Mapping[str, str] | None = None
) -> s.Node:
    """The scheduler's view of a node an executor reported: its pool is a label (as jobs name
    theirs in their node selector), with `labels` added; cordoned when Kubernetes marks it
    unschedulable (operators' cordons are applied on reading)."""
    return s.Node(
        id=node_id(executor, n.name),
        capacity=_resources(n.allocatable),
        labels={**n.labels, ann.POOL: pool, **(labels or {})},
        cordoned=n.unschedulable,
        taints=tuple(s.Taint(t.key, t.value, t.effect or "NoSchedule") for t in n.taints),
    )


def _jobs(
    state: SchedulingState,
    views: _Views,
    nodes: Sequence[s.Node],
    placements: Mapping[str, Placement],
) -> tuple[list[s.Job], list[int], NDArray[np.int64]]:
    """The running jobs on known nodes (each with what its run holds of its queue's
    excess-flow budget), then the queued ones (kept off executors that cannot honour them);
    where the pod groups' members are among them; and their serials."""
    running, members, serials = views.running_all(state, placements)
    sources, queued = views.queued_all(state.queued, _avoidable(nodes))
    queued = _honoured(sources, queued, _capability_kinds(state))
    members += [len(running) + i for i in pod_group_members(queued)]
    return running + queued, members, np.concatenate((serials, serials_of(queued)))


def build_snapshot(
    state: SchedulingState,
    classes: Sequence[PriorityClassConfig],
    now: datetime,
    config: s.SchedulingConfig | None = None,
    cache: dict[str, Made] | None = None,
    changed: Collection[str] | None = None,
    nodes_cache: NodeViews | None = None,
    running_cache: RunningViews | None = None,
    broken: dict[str, str] | None = None,
    class_caps: Mapping[str, Mapping[str, float]] | None = None,
    usage: Mapping[str, float] | None = None,
    usage_elapsed: float = 0.0,
) -> tuple[s.Snapshot, dict[str, Placement]]:
    """The scheduler's input, and where each node id lives.

    `config` carries the operator's scheduling options, `class_caps` the per-class,
    per-resource cap on the fraction of the cluster each queue may hold, and `usage` each
    queue's decayed usage as recorded `usage_elapsed` seconds ago (the scheduler is pure:
    the caller keeps usage between cycles). Running jobs hold what their run took of their
    queue's excess-flow budget (`Job.excess_flow`, kept on the run in storage). Members of
    pod groups carry every role their group has, with its minimum (`Job.gang_roles`),
    including roles whose members have all ended (`state.ended_roles`), and how many members
    of each role succeeded (`state.succeeded`), which keep their role
    (`Job.gang_succeeded`). All of it is read from storage, so a new leader knows it too.

    `cache` (kept by the caller between cycles) holds the scheduler's view of each job from
    the previous cycle, and `changed` the jobs whose rows changed since, if known (see
    _Views); `nodes_cache` the views of its nodes, `running_cache` those of its running jobs
    (patched by `changed` where the state says since when: `state.held_marks`).

    A job whose conversion raises is left out (with the reason in `broken`): one bad spec
    must not stop scheduling for everyone. Nodes lose the capacity that terminating runs
    still hold (`state.terminating`)."""
    broken = {} if broken is None else broken
    views = _Views(
        {} if cache is None else cache, broken, changed if cache else None, running_cache
    )
    nodes, placements = _nodes(state, broken, nodes_cache)
    jobs, members, serials = _jobs(state, views, nodes, placements)
    views.keep()
    jobs = _with_roles(jobs, state.ended_roles, members)
    if state.succeeded:
        jobs = _with_succeeded(jobs, state.succeeded, members)
    if members:  # made again with their groups' roles: new serials
        serials[members] = [jobs[i].serial for i in members]
    records = tuple(jobs)
    usage = usage or {}
    class_caps = class_caps or {}
    snapshot = s.Snapshot(
        queues=tuple(
            s.Queue(
                q.name, q.priority_factor or 1.0, q.cordoned, decayed_usage=usage.get(q.name, 0.0)
            )
            for q in state.queues
        ),
        priority_classes=tuple(
            s.PriorityClass(p.name, p.priority, p.preemptible, dict(class_caps.get(p.name, {})))
            for p in classes
        ),
        nodes=tuple(nodes),
        jobs=records,
        config=config or s.SchedulingConfig(),
        now=now.timestamp(),
        usage_elapsed=usage_elapsed,
        serials=s.KnownSerials(records, serials),
    )
    return snapshot, placements
