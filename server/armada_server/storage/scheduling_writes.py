"""Writing a scheduling cycle's decisions: leases, preemption requests, failures, and why the
rest stayed queued, each slice of a cycle in one transaction (`SchedulingWrites`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Update, update

from armada_core.jobs import Failure, Job, JobState, lifecycle
from armada_core.scheduling.model import Reasons
from armada_server.storage import schema as t
from armada_server.storage.base import UPDATE_RUNS, Change, Transactions, clean_reason
from armada_server.storage.bulk import executemany
from armada_server.storage.cycle_reports import record_reason_changes
from armada_server.storage.gcpause import gc_paused
from armada_server.storage.guard import retried
from armada_server.storage.leases import Leases
from armada_server.storage.rows import chunks, jobs_by_id

log = logging.getLogger("armada_server")

Placement = tuple[str, str, str]  # (executor, node, pool)


@dataclass
class _Writes:
    """What one cycle's decisions write: job transitions, and columns of the runs."""

    changes: list[Change] = field(default_factory=list)
    charged: list[dict[str, Any]] = field(default_factory=list)  # run -> excess-flow charge
    # run -> the job placed instead, and why it was preempted (preemption_kind.py)
    made_room: list[dict[str, Any]] = field(default_factory=list)
    why_runs: list[dict[str, Any]] = field(default_factory=list)  # run -> why preempted


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

        `cycle` numbers the cycle for the reports: each job whose reason changes gets a row
        in its reason history (storage/cycle_reports.py); None records none."""
        now = now or self._tx.clock()
        with gc_paused(), self._tx.write() as (conn, touched):
            jobs = jobs_by_id(conn, [*scheduled, *preempted, *failed])
            writes = _Writes()
            leased = _lease(jobs, seen, scheduled, gangs, charges, writes, now)
            why = _Preemptions(preempting or {}, preempt_reasons or {}, kinds or {})
            _preempt(jobs, seen, preempted, why, writes, now)
            _fail_unschedulable(jobs, seen, failed, writes, now)
            self._tx.save_many(conn, touched, writes.changes)
            executemany(conn, UPDATE_RUNS, writes.charged)
            executemany(conn, UPDATE_RUNS, writes.made_room)
            executemany(conn, UPDATE_RUNS, writes.why_runs)
            changes = _record_reasons(conn, scheduled, reasons, history=cycle is not None)
            if cycle is not None:
                record_reason_changes(conn, cycle, changes)
        return leased

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
    jobs: Mapping[str, Job],
    seen: Mapping[str, int | str],
    scheduled: Mapping[str, Placement],
    gangs: Mapping[str, tuple[str, str | None]] | None,
    charges: Mapping[str, int] | None,
    writes: _Writes,
    now: datetime,
) -> int:
    """Lease the scheduled jobs still as the snapshot saw them, gangs whole or not at all;
    returns the leases made."""
    changed = [j for j in scheduled if _unchanged(jobs, seen, j) is None]
    skipped_gangs = {gangs[j] for j in changed if gangs and j in gangs}
    if changed:
        log.info("%d leases not made: their jobs changed since the snapshot", len(changed))
    leased = 0
    run_ids = _new_run_ids(len(scheduled))
    for job_id, (executor, node, pool) in scheduled.items():
        job = _unchanged(jobs, seen, job_id)
        if job is None or (gangs and gangs.get(job_id) in skipped_gangs):
            continue
        after, events = lifecycle.lease(
            job, run_id=next(run_ids), cluster_id=executor, node=node, pool=pool, now=now
        )
        writes.changes.append((job, after, events))
        leased += 1
        if charges and (charge := charges.get(job_id)):
            writes.charged.append({"_id": after.runs[-1].id, "excess_flow": charge})
    return leased


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


def _record_reasons(
    conn: Connection,
    scheduled: Mapping[str, Placement],
    reasons: Mapping[str, str],
    *,
    history: bool,
) -> list[tuple[str, str]]:
    """Why each job the cycle left queued stayed so; none for the jobs it placed. Only rows
    whose reason changes are written; with `history`, returns those changes (job, new
    reason), read back from the same UPDATEs."""
    changes: list[tuple[str, str]] = []
    for chunk in chunks(list(scheduled), 500):
        cleared = (
            update(t.jobs)
            .where(t.jobs.c.id.in_(chunk), t.jobs.c.scheduling_reason != "")
            .values(scheduling_reason="")
        )
        _changed(conn, cleared, "", changes, history)
    for reason, group in _group(reasons).items():
        for i in range(0, len(group), 500):
            given = (
                update(t.jobs)
                .where(
                    t.jobs.c.id.in_(group[i : i + 500]),
                    t.jobs.c.scheduling_reason != reason,
                )
                .values(scheduling_reason=reason)
            )
            _changed(conn, given, reason, changes, history)
    return changes


def _changed(
    conn: Connection, stmt: Update, reason: str, changes: list[tuple[str, str]], history: bool
) -> None:
    """Run `stmt`; with `history`, add the ids it changed, with `reason`, to `changes`."""
    if not history:
        conn.execute(stmt)
        return
    changes.extend((str(job_id), reason) for (job_id,) in conn.execute(stmt.returning(t.jobs.c.id)))


def _new_run_ids(count: int) -> Iterator[str]:
    """`count` ids as new_run_id makes them (random UUIDs, version 4), from one read of the
    random source instead of one per lease."""
    random = bytearray(os.urandom(16 * count))
    for i in range(0, len(random), 16):
        random[i + 6] = (random[i + 6] & 0x0F) | 0x40  # version 4
        random[i + 8] = (random[i + 8] & 0x3F) | 0x80  # RFC 4122 variant
        h = random[i : i + 16].hex()
        yield f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _group(reasons: Mapping[str, str]) -> Mapping[str, list[str]]:
    if isinstance(reasons, Reasons):
        return reasons.groups()  # recorded by reason already
    out: dict[str, list[str]] = {}
    for job_id, reason in reasons.items():
        out.setdefault(reason, []).append(job_id)
    return out
