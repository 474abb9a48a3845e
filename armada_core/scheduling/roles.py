"""Elastic pod groups (SEMANTICS.md, "Elastic pod groups"), the part both implementations share.

A pod group is a gang whose members name a role (``Job.gang_role``) and the role's minimum
(``Job.gang_role_min``). What a group's state means for this cycle (a role below its minimum,
which running members are elastic, where a waiting member may go) depends only on the
snapshot, so it is decided here once, on plain jobs, and each implementation applies it to its
own state: the differential tests then compare how the implementations place, not how they
read roles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from . import reasons, topology
from .model import Job, Node

#: The role of a member of a role group that names none (refused at submission).
NO_ROLE = ""

#: A running job's place in its queue (each implementation's ``running_order``): -class
#: priority, priority, start time, submit time, id.
RunningKey = tuple[int, int, float, float, str]


def role_of(job: Job) -> str:
    return job.gang_role if job.gang_role is not None else NO_ROLE


def role_max_hops(job: Job) -> int | None:
    """A role's limit: its own (``gang_role_max_hops``), else the group's ``gang_max_hops``,
    which in a pod group bounds each role (SEMANTICS.md, "Topology per sub-group")."""
    return job.gang_role_max_hops if job.gang_role_max_hops is not None else job.gang_max_hops


def has_roles(jobs: Sequence[Job]) -> bool:
    """Whether any gang member names a role (then the role rules apply to its group)."""
    return any(j.gang_role is not None and j.gang_id is not None for j in jobs)


def minimums(members: Sequence[Job]) -> dict[str, int]:
    """Each role's minimum: what its members carry, and the roles the caller remembers
    (``Job.gang_roles``); members agree (checked at submission), else the largest counts."""
    mins: dict[str, int] = {}
    for j in members:
        r = role_of(j)
        mins[r] = max(mins.get(r, 0), j.gang_role_min or 0)
        for name, minimum in j.gang_roles:
            mins[name] = max(mins.get(name, 0), minimum)
    return mins


def succeeded(members: Sequence[Job]) -> dict[str, int]:
    """How many members of each role of the group succeeded (``Job.gang_succeeded``, told
    by the caller): they did their part, so they keep their role's minimum."""
    done: dict[str, int] = {}
    for j in members:
        for name, count in j.gang_succeeded:
            done[name] = max(done.get(name, 0), count)
    return done


def needed(members: Sequence[Job]) -> dict[str, int]:
    """Each role's minimum less its members that succeeded: what its live members must
    hold (never below 0)."""
    done = succeeded(members)
    return {r: max(0, m - done.get(r, 0)) for r, m in minimums(members).items()}


def arrange(members: Sequence[Job]) -> tuple[list[Job], int]:
    """A queued group's members (given in queued order) in the order they are placed: every
    role's minimum (less its members that succeeded) first (roles by name, each in queued
    order), then the elastic members round-robin by role name. Returns them and the size of
    the core (the minimums)."""
    by_role: dict[str, list[Job]] = {}
    for j in members:
        by_role.setdefault(role_of(j), []).append(j)
    mins = needed(members)
    core: list[Job] = []
    rests: list[list[Job]] = []
    for r in sorted(by_role):
        core += by_role[r][: mins.get(r, 0)]
        rests.append(by_role[r][mins.get(r, 0) :])
    extras = [
        rest[k] for k in range(max(map(len, rests), default=0)) for rest in rests if k < len(rest)
    ]
    if not core:  # every minimum 0: the group still needs one member to run
        core, extras = extras[:1], extras[1:]
    return core + extras, len(core)


def short_role(members: Sequence[Job]) -> str | None:
    """Why a complete queued group can never be placed: a role with fewer members (queued,
    or succeeded in an earlier generation) than its minimum (the first by name), or None."""
    counts = succeeded(members)
    for j in members:
        counts[role_of(j)] = counts.get(role_of(j), 0) + 1
    for r, minimum in sorted(minimums(members).items()):
        if counts.get(r, 0) < minimum:
            return reasons.role_short(members[0].gang_id or "", r, counts.get(r, 0), minimum)
    return None


@dataclass(slots=True)
class RolePlan:
    """The role rules' decisions before the cycle proper starts."""

    #: Running members of groups with a role below its minimum: preempted, and out of the
    #: cycle (they hold nothing and count for nothing).
    preempt: list[str] = field(default_factory=list)
    #: Why each of ``preempt`` goes (the role below its minimum), for the caller's events.
    preempt_reasons: dict[str, str] = field(default_factory=dict)
    #: Queued members of those groups, out of the cycle, with the reason.
    waiting: dict[str, str] = field(default_factory=dict)
    #: Queued members of running groups: placed one by one, each on the node indices given
    #: (None: any node), as elastic members.
    late: dict[str, frozenset[int] | None] = field(default_factory=dict)
    #: Running members above their role's minimum: the first to give way.
    elastic: set[str] = field(default_factory=set)


def plan(
    running: Sequence[Job],
    queued: Sequence[Job],
    nodes: Sequence[Node],
    node_index: Mapping[str, int],
    levels: Sequence[str],
    order: Callable[[Job], RunningKey],
) -> RolePlan:
    """Decide the state of every role group with running members. ``running`` are jobs on
    known nodes of a known queue and class, ``queued`` valid queued jobs, ``nodes`` in node
    order (``node_index`` maps ids to it), ``order`` a running job's place in its queue."""
    groups: dict[tuple[str, str], tuple[list[Job], list[Job]]] = {}
    roled = {
        (j.queue, j.gang_id)
        for j in (*running, *queued)
        if j.gang_id is not None and j.gang_role is not None
    }
    for j in running:
        if j.gang_id is not None and (j.queue, j.gang_id) in roled:
            groups.setdefault((j.queue, j.gang_id), ([], []))[0].append(j)
    for j in queued:
        found = groups.get((j.queue, j.gang_id)) if j.gang_id is not None else None
        if found is not None:
            found[1].append(j)
    out = RolePlan()
    node_labels = topology.NodeLabels(nodes)
    for (_, gang_id), (run, waiting) in sorted(groups.items()):
        mins = minimums([*run, *waiting])
        # A member that succeeded did its part: it keeps its role like a running one.
        done = succeeded([*run, *waiting])
        counts = dict(done)
        for j in run:
            counts[role_of(j)] = counts.get(role_of(j), 0) + 1
        below = [(r, m) for r, m in sorted(mins.items()) if counts.get(r, 0) < m]
        if below:
            r, m = below[0]
            out.preempt += sorted(j.id for j in run)
            why = reasons.role_below_minimum(gang_id, r, counts.get(r, 0), m)
            out.preempt_reasons.update(dict.fromkeys((j.id for j in run), why))
            out.waiting.update(dict.fromkeys((j.id for j in waiting), why))
            continue
        by_role: dict[str, list[Job]] = {}
        for j in run:
            by_role.setdefault(role_of(j), []).append(j)
        elastic: set[str] = set()
        for r, members in by_role.items():
            members.sort(key=order)
            keep = max(0, mins.get(r, 0) - done.get(r, 0))
            elastic.update(j.id for j in members[keep:])
        if len(elastic) == len(run):
            # Every minimum kept by members that succeeded: the group still needs one member
            # to run (as ``arrange``), the first of the first role by name.
            elastic.discard(by_role[min(by_role)][0].id)
        out.elastic |= elastic
        for j in waiting:
            out.late[j.id] = _allowed(run, j, nodes, node_index, levels, node_labels)
    return out


def _allowed(
    run: Sequence[Job],
    late: Job,
    nodes: Sequence[Node],
    node_index: Mapping[str, int],
    levels: Sequence[str],
    node_labels: topology.NodeLabels,
) -> frozenset[int] | None:
    """Where a late member of a running group may go: nodes with the running members'
    value of the uniformity label, and with a maximum of hops for its role, the domain of
    the widest level within it that holds every running member of its role (any domain of
    that level when none runs). None: anywhere."""
    label = run[0].gang_uniformity_label
    where = [node_index[j.node] for j in run if j.node is not None]
    allowed: set[int] | None = None
    if label is not None:
        values = {nodes[i].labels.get(label) for i in where}
        value = values.pop() if len(values) == 1 else None
        allowed = {
            k for k, n in enumerate(nodes) if value is not None and n.labels.get(label) == value
        }
    max_hops = role_max_hops(late)
    if levels and max_hops is not None:
        topo = topology.gang_topology(node_labels, levels, label, max_hops)
        if topo.constrained:
            role = role_of(late)
            mine = [node_index[j.node] for j in run if j.node is not None and role_of(j) == role]
            domain: set[int] = set()
            if topo.levels:
                for members in topo.levels[-1].members:
                    if all(i in members for i in mine):
                        domain |= set(members)
                        if mine:
                            break
            allowed = domain if allowed is None else allowed & domain
    return None if allowed is None else frozenset(allowed)
