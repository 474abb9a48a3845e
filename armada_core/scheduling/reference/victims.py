"""Victims: which jobs give way when a job displaces jobs of a lower class (SEMANTICS.md,
"Placing", stages 2 and 3).

Seed 000: "preempt jobs of as low PC priority as possible; for jobs of equal PC priority,
preempt jobs from queues allocated the largest fraction of fair share possible". Victims
are taken by class priority (a held gang: its hold priority), then their queue's fraction
of fair share, highest first, then queue name, then the most recently ordered job. A node
is chosen by the victims it needs; a minimal set of them is then preempted on it, held
jobs by urgency (stage 3) and evicted jobs of a lower class (stage 2) alike.
"""

from __future__ import annotations

from ..model import Job
from .order import running_order
from .queues import fair_share_fraction
from .state import INF, CycleState, NodeState, add, fits, sub

#: A victim's place in the order: (class or hold priority, 0 for an elastic member of a role
#: group else 1, -fraction of fair share, queue).
Group = tuple[float, int, float, str]


def victims_on(
    state: CycleState, ns: NodeState, level: float, evicted: bool
) -> list[tuple[Group, str, list[int]]]:
    """Jobs on the node that may give way at ``level`` (evicted ones in stage 2, held ones
    in stage 3), as (group, job id, requests) in the order they are taken."""
    fractions: dict[str, float] = {}
    elastic = state.roles.elastic if state.roles is not None else set()

    def group(job: Job, priority: float) -> Group:
        if job.queue not in fractions:
            fractions[job.queue] = fair_share_fraction(state, job.queue)
        return (priority, 0 if job.id in elastic else 1, -fractions[job.queue], job.queue)

    out = []
    if evicted:
        for jid, (vec, pcp) in ns.evicted.items():
            if pcp <= level:
                out.append((state.running[jid], float(pcp), vec))
    else:
        for jid, (vec, hold) in ns.held.items():
            if hold <= level:
                out.append((state.running[jid], hold, vec))
    # Most recently ordered first within a group: the sort by group below is stable.
    out.sort(key=lambda t: running_order(t[0], state.classes), reverse=True)
    keyed = [(group(j, p), j.id, vec) for j, p, vec in out]
    keyed.sort(key=lambda t: t[0])
    return keyed


def by_victims(
    state: CycleState, candidates: list[NodeState], vec: list[int], level: float, evicted: bool
) -> NodeState | None:
    """The node to displace on: the one whose last needed victim comes earliest in the
    order, then the least free resources at the level, then node order."""
    chosen, chosen_key = None, None
    for ns in candidates:
        if evicted:
            free = ns.free_evicted_giving_way(level)
            room = ns.free()
        else:
            free = ns.free_held_giving_way(level)
            room = ns.free_held_giving_way(-INF)
        if not fits(free, vec):
            continue
        worst: Group | tuple[()] = ()
        for grp, _, v in victims_on(state, ns, level, evicted):
            if fits(room, vec):
                break
            room = add(room, v)
            worst = grp
        key = (worst, free, ns.index)
        if chosen_key is None or key < chosen_key:
            chosen, chosen_key = ns, key
    return chosen


def preempt_for(state: CycleState, ns: NodeState, vec: list[int], level: float) -> None:
    """Urgency preemption of a minimal set: victims' gangs are taken in order until the job
    fits, then any one a later, larger victim made unnecessary is put back (latest first)."""
    for unit in minimal_set(state, ns, vec, level, evicted=False):
        for member in unit:
            held = state.node_of(member).held.pop(member.id)
            state.account(member, held[0], -1)
            state.result.preempted.add(member.id)


def evicted_give_way(state: CycleState, ns: NodeState, vec: list[int], level: float) -> None:
    """Stage 2 below the job's class: the evicted jobs that give way are decided at once, a
    minimal set as urgency takes, and preempted with their whole gangs, so their space is
    free for what follows (a gang losing one member never goes back)."""
    for unit in minimal_set(state, ns, vec, level, evicted=True):
        for member in unit:
            del state.node_of(member).evicted[member.id]
            state.result.preempted.add(member.id)


def minimal_set(
    state: CycleState, ns: NodeState, vec: list[int], level: float, evicted: bool
) -> list[list[Job]]:
    """The victims' gangs to take on the node for a job of request ``vec``: in victim order
    until the job fits, then any one a later, larger victim made unnecessary is put back
    (latest first). Evicted victims (stage 2) are counted from the free room, held ones
    (stage 3) from the capacity minus everything holding space."""
    room = ns.free() if evicted else ns.free_held_giving_way(-INF)
    taken: list[list[Job]] = []
    seen: set[str] = set()
    for _, jid, _ in victims_on(state, ns, level, evicted):
        if fits(room, vec):
            break
        if jid in seen:
            continue
        # Its whole gang, but for members already taken (an elastic member gives way alone,
        # before its group).
        whole = state.gang_of[jid]
        unit = [m for m in whole if m.id not in seen and present(state, m, evicted)]
        seen.update(m.id for m in unit)
        room = add(room, on_node(state, unit, ns))
        if len(whole) > 1:
            # The group goes: its elastic members taken before go with it (put back alone,
            # they would run on without their group).
            ids = {m.id for m in whole}
            for k, earlier in enumerate(taken):
                if earlier and all(m.id in ids for m in earlier):
                    unit, taken[k] = earlier + unit, []
        taken.append(unit)
    keep = [True] * len(taken)
    for k in range(len(taken) - 2, -1, -1):
        back = sub(room, on_node(state, taken[k], ns))
        if fits(back, vec):
            room = back
            keep[k] = False
    return [unit for unit, kept in zip(taken, keep, strict=True) if kept]


def present(state: CycleState, job: Job, evicted: bool) -> bool:
    """Whether the running job still holds its node (held), or waits to go back (evicted)."""
    ns = state.node_of(job)
    return job.id in (ns.evicted if evicted else ns.held)


def on_node(state: CycleState, unit: list[Job], ns: NodeState) -> list[int]:
    """What the members of a running gang hold on one node."""
    total = state.zeros()
    for member in unit:
        if member.node == ns.node.id:
            total = add(total, state.vec(member))
    return total
