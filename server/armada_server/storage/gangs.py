"""Gangs in storage: restarting a gang together when a member is retried, and the roles and
minimums of pod groups that decide whether a gang can go on without some of its members.

Gangs run together, so they are retried together (seed 001: a new generation, recorded by
`retries.start_gang_generation`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, and_

from armada_core.jobs import Failure, Job, JobState, lifecycle
from armada_core.jobs.lifecycle import EventMessage
from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_JOB_STATES, Change
from armada_server.storage.retries import gang_cardinalities, start_gang_generation
from armada_server.storage.rows import load_jobs


def role_minimums(members: Iterable[Job]) -> dict[str, int]:
    """A pod group's roles and their minimums, from every member it has had (a role whose
    members all ended still has its minimum); empty for a gang without roles."""
    mins: dict[str, int] = {}
    for job in members:
        gang = job.gang
        if gang is not None and gang.role:
            mins[gang.role] = max(mins.get(gang.role, 0), gang.role_minimum or 0)
    return mins


def elastic_retry(members: Sequence[Job], retried: Collection[str]) -> bool:
    """Whether the `retried` members of a gang (all of its members given, as they are now)
    may be retried alone: it is a pod group, some members keep running (active and not
    being preempted), and those with the members that succeeded (they did their part) still
    hold every role at or above its minimum."""
    mins = role_minimums(members)
    if not mins:
        return False
    running = 0
    counts: dict[str, int] = {}
    for job in members:
        keeps = (
            job.id not in retried
            and job.state in ACTIVE_JOB_STATES
            and not job.preempt_requested
            and job.active_run is not None
        )
        running += keeps
        gang = job.gang
        if (keeps or job.state == JobState.SUCCEEDED) and gang is not None:
            counts[gang.role] = counts.get(gang.role, 0) + 1
    return running > 0 and all(counts.get(r, 0) >= m for r, m in mins.items())


def restart_gangs(
    conn: Connection, changes: list[Change], now: datetime
) -> tuple[list[Change], list[EventMessage]]:
    """Gangs run together, so they are retried together (seed 001: a new generation):
    when a member that was running is queued again for a retry, every other member
    still running is stopped and queued again with it. Members already being preempted
    are left to finish that; members that ended stay ended, so the new generation is
    the members still to run and its cardinality is their number (a sibling that
    already succeeded is not waited for: it will never be queued again). A member left
    to finish its preemption that the preemption ends for good leaves the generation.

    A pod group (members with roles) is retried whole only when it is broken: the
    members that keep running leave a role below its minimum, or none keeps running.
    Otherwise the retried members were elastic: each goes back to the queue alone and
    is placed later as a late member, while the rest keeps running (SEMANTICS.md,
    "Elastic pod groups").

    `changes` (the transaction's changes so far) is updated in place for members it
    holds; the other members' changes are returned, with the events of all of them."""
    retried: dict[tuple[str, str], list[Job]] = {}
    ended: set[tuple[str, str]] = set()
    for before, after, _ in changes:
        if (g := after.gang) is None or g.cardinality <= 1:
            continue
        if before.state in ACTIVE_JOB_STATES and after.state == JobState.QUEUED:
            retried.setdefault((after.queue, g.id), []).append(after)
        elif before.preempt_requested and after.terminal and not before.terminal:
            ended.add((after.queue, g.id))  # perhaps a member a generation waits for
    for gang in sorted(ended - retried.keys()):
        _shrink_generation(conn, changes, *gang)
    if not retried:
        return [], []
    index = {after.id: i for i, (_, after, _) in enumerate(changes)}
    out: list[Change] = []
    events: list[EventMessage] = []
    for (queue, gang_id), members in retried.items():
        generation = {m.id for m in members}
        # Each other member as this transaction leaves it so far.
        others: list[Change] = []
        for stored in load_jobs(conn, and_(t.jobs.c.queue == queue, t.jobs.c.gang_id == gang_id)):
            if stored.id in generation:
                continue
            others.append(changes[index[stored.id]] if stored.id in index else (stored, stored, []))
        if elastic_retry([*members, *(current for _, current, _ in others)], generation):
            continue
        _stop_others(members, others, generation, changes, index, out, events, now)
        start_gang_generation(conn, sorted(generation))
    return out, events


def _stop_others(
    members: list[Job],
    others: list[Change],
    generation: set[str],
    changes: list[Change],
    index: dict[str, int],
    out: list[Change],
    events: list[EventMessage],
    now: datetime,
) -> None:
    """Queue again with the retried `members` every other member of their gang still
    running; each member still to run joins the new `generation`."""
    waits = [m.retry_after for m in members if m.retry_after is not None]
    retry_after = max(waits) if waits else None
    failure = Failure(
        reason=f"gang member {members[0].id} is being retried: the gang restarts together",
        category="internal",
        subcategory="gang_restart",
    )
    for before, current, old in others:
        if current.terminal:
            continue  # ended: not part of the new generation
        generation.add(current.id)
        if (
            current.state not in ACTIVE_JOB_STATES
            or current.preempt_requested
            or (current.active_run is None)
        ):
            continue
        after, more = lifecycle.fail(current, failure, retry=True, now=now, retry_after=retry_after)
        events.extend(more)
        if current.id in index:
            changes[index[current.id]] = (before, after, old)
        else:
            out.append((before, after, []))


def _shrink_generation(conn: Connection, changes: list[Change], queue: str, gang_id: str) -> None:
    """A member of a retried generation ended (its preemption, left to finish when the
    generation formed, ended it for good): the members left, when they all wait to be
    placed, are the generation; waiting for the one that ended would be for ever."""
    current = {after.id: after for _, after, _ in changes}
    members = [
        current.get(stored.id, stored)
        for stored in load_jobs(conn, and_(t.jobs.c.queue == queue, t.jobs.c.gang_id == gang_id))
    ]
    left = [j.id for j in members if not j.terminal]
    if not left or any(j.state != JobState.QUEUED for j in members if not j.terminal):
        return
    recorded = gang_cardinalities(conn, t.jobs.c.id.in_(left))
    if any(cardinality != len(left) for cardinality in recorded.values()):
        start_gang_generation(conn, left)
