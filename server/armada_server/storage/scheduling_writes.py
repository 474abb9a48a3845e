"""Writing a scheduling cycle's decisions: leases, preemption requests, failures, and why the
rest stayed queued, each slice of a cycle in one transaction (`SchedulingWrites`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import filterfalse
from typing import Any, Protocol

from sqlalchemy import Connection, Update, bindparam, func, select, update

from armada_core.gcpause import gc_paused
from armada_core.jobs import Failure, Job, JobState, lifecycle, new_run_ids
from armada_core.jobs.lifecycle import EventMessage
from armada_core.scheduling.model import Reasons
from armada_server.storage import schema as t
from armada_server.storage.base import UPDATE_RUNS, Change, Transactions, clean_reason
from armada_server.storage.bulk import execute, executemany, fetch, insert_rows
from armada_server.storage.cycle_reports import archive_reasons
from armada_server.storage.guard import Conflict, retried
from armada_server.storage.held_jobs import Settled
from armada_server.storage.leases import Leases
from armada_server.storage.rows import STATE_OF_JOBS_BY_ID, chunks, jobs_by_id, run_row

log = logging.getLogger("armada_server")

Placement = tuple[str, str, str]  # (executor, node, pool)
QUEUED = int(JobState.QUEUED)


@dataclass
class _Writes:
    """What one cycle's preemptions and failures write: job transitions, and columns of the
    runs."""

    changes: list[Change] = field(default_factory=list)
    # run -> the job placed instead, and why it was preempted (preemption_kind.py)
    made_room: list[dict[str, Any]] = field(default_factory=list)
    why_runs: list[dict[str, Any]] = field(default_factory=list)  # run -> why preempted


@dataclass
class _Leases:
    """What one cycle's leases write: the leased jobs' changed columns (guarded by the
    version each was read at), their new runs, and the leases' events."""

    # (version read, fields set) -> the jobs read at that version and given those fields
    jobs: dict[tuple[int, tuple[tuple[str, Any], ...]], list[str]] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    events: list[EventMessage] = field(default_factory=list)


@dataclass(frozen=True)
class _Preemptions:
    """What a cycle says of its preempted jobs: the job each made room for, the scheduler's
    reason where it has one, and the kind of preemption."""

    preempting: Mapping[str, str]
    reasons: Mapping[str, str]
    kinds: Mapping[str, str]


class SchedulingWrites:
    """The scheduling loop's writes."""

    def __init__(self, transactions: Transactions, leases: Leases) -> None:
        self._tx = transactions
        self._leases = leases

    @retried
    def apply_schedule(
        self,
        *,
        scheduled: Mapping[str, Placement],
        preempted: Iterable[str],
        failed: Mapping[str, str],
        reasons: Mapping[str, str],
        seen: Mapping[str, int | str],
        gangs: Mapping[str, tuple[str, str | None]] | None = None,
        preempting: Mapping[str, str] | None = None,
        preempt_reasons: Mapping[str, str] | None = None,
        kinds: Mapping[str, str] | None = None,
        charges: Mapping[str, int] | None = None,
        now: datetime | None = None,
        cycle: int | None = None,
        reasons_read: Mapping[str, ReasonRead] | None = None,
    ) -> int:
        """Write one cycle's decisions: leases (job -> executor, node, pool), preemption
        requests, failures, and why the rest stayed queued. Returns the leases made.

        `charges` is what a leased job takes of its queue's excess-flow budget
        (`SchedulingResult.excess_flow`): kept on its run, read back while the run is active.

        `preempting` names, for a preempted job, the job the cycle made room for: it is kept
        on the preempted run, and the preempted event names it once the run has stopped.
        `kinds` says why each preempted job goes (scheduling/preemption_kind.py); the run
        keeps it beside the job it made room for, for the web UI.
        `preempt_reasons` says why a preempted job goes when the scheduler knows more than
        that it was preempted (a pod group whose role fell below its minimum): the
        preempting event carries it, and it is kept as the run's reason so that the
        preempted event (or the retried failure) says it too once the run has stopped.

        A decision applies only to a job still as the snapshot saw it (`seen`: the row
        version of a queued job, the run id of a running one); the others changed meanwhile
        (cancelled, reprioritised, ended) and are skipped, a gang's members all together
        (`gangs`: job -> its gang's key), so a gang is never leased in part.

        `cycle` numbers the cycle for the reports: a job whose reason changes keeps the
        reason it had in its reason history (storage/cycle_reports.py); None records none.
        `reasons_read` is what the cycle's snapshot read of its queued jobs' reasons: only
        the reasons that change are written."""
        now = now or self._tx.clock()
        with gc_paused(), self._tx.write() as (conn, touched):
            leases = _lease(conn, seen, scheduled, gangs, charges, now)
            jobs = jobs_by_id(conn, [*preempted, *failed])
            writes = _Writes()
            why = _Preemptions(preempting or {}, preempt_reasons or {}, kinds or {})
            _preempt(jobs, seen, preempted, why, writes, now)
            _fail_unschedulable(jobs, seen, failed, writes, now)
            _update_leased(conn, leases.jobs)
            insert_rows(conn, t.runs, leases.runs)
            # One append for the leases' events and the others', in that order.
            others = [e for _, _, events in writes.changes for e in events]
            self._tx.save_many(conn, touched, writes.changes, [*leases.events, *others])
            executemany(conn, UPDATE_RUNS, writes.made_room)
            executemany(conn, UPDATE_RUNS, writes.why_runs)
            replaced = _record_reasons(conn, scheduled, reasons, reasons_read or {}, cycle)
            archive_reasons(conn, self._tx.insert(t.job_reasons), replaced)
        return len(leases.events)

    def fail_jobs(self, failures: Mapping[str, str], *, now: datetime | None = None) -> int:
        """Fail queued jobs that cannot be scheduled at all (e.g. a spec the scheduler cannot
        read), each with its reason; returns how many were failed."""
        return self._leases.fail_now(
            failures,
            "server_error",
            lambda job: job.state == JobState.QUEUED,
            now or self._tx.clock(),
        )


def _unchanged(jobs: Mapping[str, Job], seen: Mapping[str, int | str], job_id: str) -> Job | None:
    """The queued job as the snapshot saw it (None: it changed since)."""
    job = jobs.get(job_id)
    if job is None or job.state != JobState.QUEUED or seen.get(job_id) != job.version:
        return None
    return job


def _lease(
    conn: Connection,
    seen: Mapping[str, int | str],
    scheduled: Mapping[str, Placement],
    gangs: Mapping[str, tuple[str, str | None]] | None,
    charges: Mapping[str, int] | None,
    now: datetime,
) -> _Leases:
    """The leases of the scheduled jobs still queued as the snapshot saw them, gangs whole or
    not at all. A lease is the same few columns, a new run and one event for every job: the
    state machine's `lease_queued` builds them, as `lifecycle.lease` would, from what
    `_queued` reads, without loading and decoding each job."""
    queued = _queued(conn, scheduled)
    unchanged = {j: q for j, q in queued.items() if q[0] == seen.get(j)}
    changed = [j for j in scheduled if j not in unchanged]
    skipped_gangs = {gangs[j] for j in changed if gangs and j in gangs}
    if changed:
        log.info("%d leases not made: their jobs changed since the snapshot", len(changed))
    leases = _Leases()
    run_ids = iter(new_run_ids(len(scheduled)))
    for job_id, (executor, node, pool) in scheduled.items():
        found = unchanged.get(job_id)
        if found is None or (gangs and gangs.get(job_id) in skipped_gangs):
            continue
        version, queue, job_set, runs = found
        event, fields, run = lifecycle.lease_queued(
            job_id,
            job_set,
            queue,
            run_index=runs,
            run_id=next(run_ids),
            cluster_id=executor,
            node=node,
            pool=pool,
            now=now,
        )
        leases.jobs.setdefault((version, tuple(fields.items())), []).append(job_id)
        row = run_row(job_id, run)
        row["excess_flow"] = (charges.get(job_id) if charges else None) or None
        leases.runs.append(row)
        leases.events.append(event)
    return leases


def _update_leased(
    conn: Connection, jobs: Mapping[tuple[int, tuple[tuple[str, Any], ...]], list[str]]
) -> None:
    """Write the leased jobs' rows: a statement per chunk of jobs read at one version and
    given the same fields (a cycle's leases differ only in their versions), each row only
    where it still has that version; raises Conflict if any has another by now."""
    expected = written = 0
    for (version, fields), job_ids in jobs.items():
        stmt = _leased_update(tuple(k for k, _ in fields))
        values = {f"new_{k}": int(v) if isinstance(v, JobState) else v for k, v in fields}
        values.update(read_version=version, new_version=version + 1)
        for chunk in chunks(job_ids, 1000):
            written += execute(conn, stmt, {"ids": chunk, **values})
            expected += len(chunk)
    if written != expected:
        raise Conflict(f"{expected - written} of {expected} jobs changed since they were read")


# The fields a cycle's leases set -> the UPDATE of a chunk of jobs read at one version, built
# once (SQLAlchemy works out a statement's cache key once per object).
_LEASED_UPDATES: dict[tuple[str, ...], Update] = {}


def _leased_update(names: tuple[str, ...]) -> Update:
    stmt = _LEASED_UPDATES.get(names)
    if stmt is None:
        stmt = _LEASED_UPDATES[names] = (
            update(t.jobs)
            .where(
                t.jobs.c.id.in_(bindparam("ids", expanding=True)),
                t.jobs.c.version == bindparam("read_version"),
            )
            .values(version=bindparam("new_version"), **{n: bindparam(f"new_{n}") for n in names})
        )
    return stmt


# A job's count of runs: the index of the run its lease starts.
_RUN_COUNT = (
    select(func.count())
    .select_from(t.runs)
    .where(t.runs.c.job_id == t.jobs.c.id)
    .correlate(t.jobs)
    .scalar_subquery()
)


_QUEUED_TO_LEASE = select(
    t.jobs.c.id, t.jobs.c.version, t.jobs.c.queue, t.jobs.c.job_set, _RUN_COUNT
).where(t.jobs.c.id.in_(bindparam("ids", expanding=True)), STATE_OF_JOBS_BY_ID == QUEUED)


def _queued(conn: Connection, job_ids: Iterable[str]) -> dict[str, tuple[int, str, str, int]]:
    """Of `job_ids`, the jobs that are queued: the version, queue, job set and count of runs
    of each, which is all a lease needs of a job."""
    queued: dict[str, tuple[int, str, str, int]] = {}
    for chunk in chunks(list(job_ids), 2000):
        for r in fetch(conn, _QUEUED_TO_LEASE, {"ids": chunk}):
            queued[r[0]] = (r[1], r[2], r[3], r[4])
    return queued


def _preempt(
    jobs: Mapping[str, Job],
    seen: Mapping[str, int | str],
    preempted: Iterable[str],
    preemptions: _Preemptions,
    writes: _Writes,
    now: datetime,
) -> None:
    """Ask for the preempted jobs still on the run the snapshot saw to be preempted."""
    for job_id in preempted:
        job = jobs.get(job_id)
        run = job.active_run if job is not None else None
        if job is None or run is None or run.id != seen.get(job_id) or job.preempt_requested:
            continue
        why = preemptions.reasons.get(job_id)
        after, events = lifecycle.request_preempt(
            job,
            requestor="scheduler",
            reason=clean_reason(why) if why else "preempted by the scheduler",
            now=now,
        )
        writes.changes.append((job, after, events))
        placed, kind = preemptions.preempting.get(job_id), preemptions.kinds.get(job_id)
        if placed or kind:
            writes.made_room.append(
                {"_id": run.id, "preempting_job_id": placed, "preemption_kind": kind}
            )
        if why:
            writes.why_runs.append({"_id": run.id, "reason": clean_reason(why)})


def _fail_unschedulable(
    jobs: Mapping[str, Job],
    seen: Mapping[str, int | str],
    failed: Mapping[str, str],
    writes: _Writes,
    now: datetime,
) -> None:
    """Fail, for good, the queued jobs the scheduler found it can never place."""
    for job_id, reason in failed.items():
        job = _unchanged(jobs, seen, job_id)
        if job is None:
            continue
        after, events = lifecycle.fail(
            job,
            Failure(
                reason=reason,
                category="internal",
                subcategory="unschedulable",
                condition="Unschedulable",
            ),
            retry=False,
            now=now,
        )
        writes.changes.append((job, after, events))


class ReasonRead(Protocol):
    """What a cycle's snapshot read of a queued job's reason (scheduling_reads.QueuedJob)."""

    @property
    def reason(self) -> str: ...

    @property
    def reason_cycle(self) -> int | None: ...


@dataclass(frozen=True)
class _Read:
    reason: str
    reason_cycle: int | None


def changed_reasons(
    reasons: Mapping[str, str], read: Mapping[str, ReasonRead], settled: Settled | None = None
) -> tuple[Reasons, Settled]:
    """Of a cycle's `reasons`, those to write: of the jobs whose reason `read` has, those
    whose reason changes, and every job it lacks (_record_reasons reads theirs). Also the
    jobs `read` holds with each reason once those are written, for the next cycle.

    With `settled` (what the last cycle returned, less the jobs read again since: see
    HeldJobs.settled), only the jobs not settled with their reason are compared: at a
    backlog of a million jobs, nearly all keep their reason from one cycle to the next, and
    the comparison cost a third of a cycle. The result is the same."""
    out = Reasons()
    after: Settled = {}
    get = read.get
    for reason, job_ids in _group(reasons).items():
        kept = settled.get(reason) if settled is not None else None
        if kept is not None and len(kept) == len(job_ids) and kept.issuperset(job_ids):
            after[reason] = kept  # the very same jobs, each held with this reason
            continue
        compared = job_ids if kept is None else list(filterfalse(kept.__contains__, job_ids))
        changed = [j for j in compared if (r := get(j)) is None or r.reason != reason]
        held = set(job_ids)
        if changed:
            out.add_many(changed, reason)
            held.difference_update(j for j in changed if j not in read)
        after[reason] = held
    return out, after


def _record_reasons(
    conn: Connection,
    scheduled: Mapping[str, Placement],
    reasons: Mapping[str, str],
    read: Mapping[str, ReasonRead],
    cycle: int | None,
) -> list[tuple[str, int, str]]:
    """Why each job the cycle left queued stayed so; "" for the jobs it placed. Only the jobs
    whose reason changes from what the snapshot `read` are written (jobs it did not read are
    read here), each with the cycle its new reason began in; with `cycle` (reports on), the
    reason it replaces, if a cycle gave it, is returned for job_reasons."""
    wanted = {"": list(scheduled), **_group(reasons)}
    replaced: list[tuple[str, int, str]] = []
    unread: dict[str, list[str]] = {}
    for reason, ids in wanted.items():
        _write_reason(conn, reason, ids, read, cycle, replaced, unread)
    if unread:
        found = _reasons_of(conn, [j for ids in unread.values() for j in ids])
        for reason, ids in unread.items():
            _write_reason(conn, reason, ids, found, cycle, replaced, None)
    return replaced


def _write_reason(
    conn: Connection,
    reason: str,
    job_ids: list[str],
    read: Mapping[str, ReasonRead],
    cycle: int | None,
    replaced: list[tuple[str, int, str]],
    unread: dict[str, list[str]] | None,
) -> None:
    """Give `reason` to those of `job_ids` that had another; adds the reasons replaced to
    `replaced` (with `cycle`), and the jobs `read` lacks to `unread` (None: skip them)."""
    changed = []
    for job_id in job_ids:
        before = read.get(job_id)
        if before is None:
            if unread is not None:
                unread.setdefault(reason, []).append(job_id)
        elif before.reason != reason:
            changed.append(job_id)
            began = before.reason_cycle
            if cycle is not None and began is not None and began < cycle:
                replaced.append((job_id, began, before.reason))
    for chunk in chunks(changed, 500):
        # The change number stays: a reason changes nothing a cycle decides by, and the
        # leader that writes it notes it in what it holds (HeldJobs.note_reasons), so a
        # backlog's first reasons do not make the next cycle read the backlog again.
        conn.execute(
            update(t.jobs)
            .where(t.jobs.c.id.in_(chunk), t.jobs.c.scheduling_reason != reason)
            .values(scheduling_reason=reason, reason_cycle=cycle, changed=t.jobs.c.changed)
        )


def _reasons_of(conn: Connection, job_ids: list[str]) -> dict[str, ReasonRead]:
    """The reasons in force of jobs a snapshot did not read."""
    j = t.jobs.c
    out: dict[str, ReasonRead] = {}
    for chunk in chunks(job_ids, 500):
        query = select(j.id, j.scheduling_reason, j.reason_cycle).where(j.id.in_(chunk))
        for row in conn.execute(query):
            out[str(row.id)] = _Read(str(row.scheduling_reason), row.reason_cycle)
    return out


def _group(reasons: Mapping[str, str]) -> Mapping[str, list[str]]:
    if isinstance(reasons, Reasons):
        return reasons.groups()  # recorded by reason already
    out: dict[str, list[str]] = {}
    for job_id, reason in reasons.items():
        out.setdefault(reason, []).append(job_id)
    return out
