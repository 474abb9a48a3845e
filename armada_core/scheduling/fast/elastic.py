"""Elastic pod groups (SEMANTICS.md, "Elastic pod groups"): the role rules' decisions
(``roles.plan``) applied to the cycle's columns, the items of queued role groups and of late
members of running ones, and what becomes of the members a placement leaves out."""

from __future__ import annotations

import numpy as np

from .. import reasons
from ..model import Job
from ..roles import RunningKey, arrange, plan, short_role
from .state import QUEUED, CycleState, Item, make_item


def apply_roles(state: CycleState, gang_rows: list[int]) -> None:
    """A group with a role below its minimum has its running members preempted and its
    queued ones wait, all out of the cycle (as jobs on unknown nodes are); the running
    members above their role's minimum are marked elastic."""
    jobs = state.jobs
    records, gang_ids = jobs.records, jobs.gang_ids
    keys = {(records[i].queue, gang_ids[i]) for i in gang_rows if records[i].gang_role is not None}
    rows = [i for i in gang_rows if (records[i].queue, gang_ids[i]) in keys]
    run = [i for i in rows if jobs.accounted[i]]
    waiting = [i for i in rows if not jobs.is_running[i]]
    valid = np.zeros(len(records), dtype=bool)
    valid[jobs.queued] = True
    node_index = state.nodes.index.rows
    classes = state.classes

    def order(j: Job) -> RunningKey:
        start = j.start_time if j.start_time is not None else 0.0
        return (-classes[j.priority_class].priority, j.priority, start, j.submit_time, j.id)

    state.roles = roles = plan(
        [records[i] for i in run],
        [records[i] for i in waiting if valid[i]],
        state.nodes.records,
        node_index,
        state.config.topology_levels,
        order,
    )
    row_of = {records[i].id: i for i in rows}
    gone = np.array([row_of[j] for j in roles.preempt], dtype=np.int64)
    if len(gone):
        state.placing.preempted.update(gone.tolist())
        state.result.preempt_reasons.update(roles.preempt_reasons)
        jobs.accounted[gone] = False
        jobs.node[gone] = -1
        jobs.running = jobs.running[~np.isin(jobs.running, gone)]
    if roles.waiting:
        out = np.array([row_of[j] for j in roles.waiting], dtype=np.int64)
        for job_id, why in roles.waiting.items():
            state.result.unscheduled[job_id] = why
        jobs.queued = jobs.queued[~np.isin(jobs.queued, out)]
    jobs.elastic = np.zeros(len(records), dtype=bool)
    if roles.elastic:
        jobs.elastic[[row_of[j] for j in roles.elastic]] = True


def late_member_item(state: CycleState, i: int, allowed: frozenset[int] | None) -> Item:
    """A queued member of a running role group: an item of its own, placed alone near the
    running members (``allowed`` node indices; None: anywhere)."""
    item = make_item(state, QUEUED, [i], 1, None)
    item.late = True
    if allowed is not None:
        item.allowed = np.zeros(len(state.nodes.records), dtype=bool)
        item.allowed[list(allowed)] = True
    return item


def role_group_item(state: CycleState, members: list[int]) -> Item | None:
    """A complete queued role group: its members in placing order (every role's minimum
    first), or None when a role has fewer members than its minimum (they fail)."""
    records = state.jobs.records
    group = [records[i] for i in members]
    short = short_role(group)
    if short is not None:
        ids = state.jobs.ids
        for i in members:
            state.result.failed[ids[i]] = short
        return None
    ordered, core = arrange(group)
    row = {id(j): i for j, i in zip(group, members, strict=True)}
    rows = [row[id(j)] for j in ordered]
    item = make_item(state, QUEUED, rows, core, group[0].gang_uniformity_label)
    item.core = core
    return item


def elastic_reason(state: CycleState, i: int) -> str:
    """Why an elastic member of a role group was left queued."""
    job = state.jobs.records[i]
    return reasons.elastic_waits(job.gang_id or "", job.gang_role or "")


def leave_unplaced(state: CycleState, members: list[int], placed: set[int], core: int) -> None:
    """The gang runs with the members placed; the others fail, or in a role group wait for
    capacity in later cycles."""
    ids, result = state.jobs.ids, state.result
    for i in members:
        if i not in placed:
            if core:
                result.unscheduled[ids[i]] = elastic_reason(state, i)
            else:
                result.failed[ids[i]] = reasons.GANG_ELASTIC_REST
