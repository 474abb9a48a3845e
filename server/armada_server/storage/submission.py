"""Jobs in, and what users ask of them: submitting (all or none, deduplicated on client ids),
cancelling, reprioritising and asking for preemption, each request one transaction.

A cancel may leave a gang that waits to be placed short of members: it is cut to the members
left, or failed when it can never be placed whole.

The queue is read in the transaction that stores: whether it exists, may be submitted to by
the caller (`Authorise`, asked of its spec) and is cordoned, one statement rather than a
transaction of its own before (on PostgreSQL four round trips fewer a request).

A cordoned queue takes no new jobs: submitting one is refused (a repeated client_id still
returns the job it names), a task with a live generation takes no second one
(`task_generations`), and the caller may refuse the new jobs too (`Admit`), all in the
transaction that would store them (`Admit` is asked before it opens, to keep its work out of
the write lock, and its refusal raised in it).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    and_,
    any_,
    bindparam,
    null,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError

from armada_core.api import submit_pb2
from armada_core.gcpause import gc_paused
from armada_core.jobs import (
    TERMINAL_STATES,
    GangSpec,
    Job,
    JobState,
    lifecycle,
)
from armada_core.jobs.lifecycle import Failure, IllegalTransition
from armada_server.errors import FailedPrecondition, NotFound, ResourceExhausted
from armada_server.storage import schema as t
from armada_server.storage.base import (
    ACTIVE_JOB_STATES,
    UPDATE_RUNS,
    Change,
    JobSetKey,
    Transactions,
)
from armada_server.storage.bulk import executemany, fetch, insert_new
from armada_server.storage.gangs import role_minimums
from armada_server.storage.guard import retried
from armada_server.storage.new_jobs import Admit, JobRows, Made, NewJob, events_of, new_jobs
from armada_server.storage.queue_limit import Counts, counted_before, keep, refuse_over_limit
from armada_server.storage.retries import start_gang_generation
from armada_server.storage.rows import chunks, load_jobs
from armada_server.storage.task_generations import refuse_second_generation

NON_TERMINAL = (JobState.SUBMITTED, JobState.QUEUED, *ACTIVE_JOB_STATES)


def queue_not_found(queue: str) -> NotFound:
    """A submission's queue does not exist: say how to create it."""
    return NotFound(f"queue {queue!r} not found; create it with: armada queue create {queue}")


def queue_cordoned(queue: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"queue {queue!r} is cordoned: it takes no new jobs and its queued jobs are not "
        f"scheduled (jobs already running go on); lift the cordon with: "
        f"armada queue uncordon {queue}"
    )


# Raises (PermissionDenied) when the caller may not submit to the queue, given as stored.
Authorise = Callable[[submit_pb2.Queue], None]

# Built once: a submission of a few jobs was as much building statements as running them.
_CLIENT_ID_IN = t.jobs.c.client_id.in_(bindparam("client_ids", expanding=True))
# On PostgreSQL the ids go as one array: psycopg parsed a statement of 500 placeholders afresh
# for each chunk (it caches short statements only), 5 ms a 1,000-job request.
_CLIENT_ID_ANY = t.jobs.c.client_id == any_(bindparam("client_ids", type_=postgresql.ARRAY(String)))


def _queue_with_jobs(client_ids: ColumnElement[bool] | None) -> Select[tuple[Any, ...]]:
    """The queue's row (cordoned, spec), beside each of its jobs whose client id is one of
    `client_ids` (client id, job id; NULLs when none is): a request's first statement, one
    round trip rather than two."""
    q, j = t.queues.c, t.jobs.c
    if client_ids is None:
        return select(q.cordoned, q.spec, null(), null()).where(q.name == bindparam("queue"))
    joined = t.queues.outerjoin(t.jobs, and_(j.queue == q.name, client_ids))
    return (
        select(q.cordoned, q.spec, j.client_id, j.id)
        .select_from(joined)
        .where(q.name == bindparam("queue"))
    )


_QUEUE = _queue_with_jobs(None)
_QUEUE_AND_JOBS_IN = _queue_with_jobs(_CLIENT_ID_IN)
_QUEUE_AND_JOBS_ANY = _queue_with_jobs(_CLIENT_ID_ANY)
_BY_CLIENT_ID = select(t.jobs.c.client_id, t.jobs.c.id).where(
    t.jobs.c.queue == bindparam("queue"), _CLIENT_ID_IN
)


class Submissions:
    """The submit and job-set calls' writes."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions
        self._counts: Counts = {}  # the per-queue limit's counts (`queue_limit`)

    @retried  # deadlocks and serialization failures, as every transaction
    def submit(
        self,
        queue: str,
        job_set: str,
        items: Sequence[submit_pb2.JobSubmitRequestItem],
        *,
        owner: str,
        groups: tuple[str, ...] = (),
        admit: Admit | None = None,
        max_queued: int | None = None,
        authorise: Authorise | None = None,
    ) -> list[str]:
        """Store validated items as jobs (all or none); a known client_id returns its job.
        Refused when the queue is missing or `authorise` refuses it, when it is cordoned and
        some item is a new job, when the new jobs would take the queue's waiting jobs over
        `max_queued`, when a new job's task has a live generation other than the job's
        (LiveGenerationExists), or when `admit` refuses the new jobs."""
        # What a request builds is freed (when _submit returns) before collection resumes:
        # otherwise the first collection after it traverses every row and event still held.
        with gc_paused():
            try:
                return self._submit(
                    queue, job_set, items, owner, groups, admit, max_queued, authorise
                )
            except IntegrityError:  # a concurrent submit took one of our client ids: look again
                return self._submit(
                    queue, job_set, items, owner, groups, admit, max_queued, authorise
                )

    def _submit(
        self,
        queue: str,
        job_set: str,
        items: Sequence[submit_pb2.JobSubmitRequestItem],
        owner: str,
        groups: tuple[str, ...],
        admit: Admit | None,
        max_queued: int | None,
        authorise: Authorise | None,
    ) -> list[str]:
        now = self._tx.clock().astimezone(UTC)  # job_row's times are those events give
        # Built before the write transaction, which every other writer waits for (on SQLite
        # the only one): building is most of a large request's time.
        names = JobRows(self._tx.dialect)
        new = new_jobs(items, queue, job_set, owner, groups, now, names)
        made = Made.of(names, new, admit)
        before = None
        if max_queued is not None:
            before = counted_before(self._tx, queue, max_queued, self._counts)
        with self._tx.write() as (conn, touched):
            ids, completed = self._store(
                conn,
                touched,
                queue,
                items,
                new,
                names,
                made,
                admit,
                max_queued,
                before,
                now,
                authorise,
            )
        keep(self._counts, queue, completed)  # committed
        return ids

    def _store(
        self,
        conn: Connection,
        touched: set[JobSetKey],
        queue: str,
        items: Sequence[submit_pb2.JobSubmitRequestItem],
        new: Mapping[int, NewJob],
        names: JobRows,
        made: Made,
        admit: Admit | None,
        max_queued: int | None,
        before: tuple[int, int] | None,
        now: datetime,
        authorise: Authorise | None,
    ) -> tuple[list[str], tuple[int, int] | None]:
        """The ids of the request's jobs, and the queue's count completed in the transaction
        (`queue_limit.keep`)."""
        client_ids = sorted({i.client_id for i in items if i.client_id})
        # SQLite's IN lists stay bounded: ids past the first 500 are looked up after.
        wanted, rest = (
            (client_ids, [])
            if self._tx.dialect == "postgresql"
            else (client_ids[:500], client_ids[500:])
        )
        if not wanted:
            found = fetch(conn, _QUEUE, {"queue": queue})
        else:
            joined = _QUEUE_AND_JOBS_ANY if self._tx.dialect == "postgresql" else _QUEUE_AND_JOBS_IN
            found = fetch(conn, joined, {"queue": queue, "client_ids": wanted})
        if not found:
            raise queue_not_found(queue)
        is_cordoned, spec = found[0][0], found[0][1]
        if authorise is not None:
            authorise(submit_pb2.Queue.FromString(spec))
        known: dict[str, str] = {row[2]: row[3] for row in found if row[2] is not None}
        for chunk in chunks(rest, 500):
            rows = fetch(conn, _BY_CLIENT_ID, {"queue": queue, "client_ids": chunk})
            known.update((client_id, job_id) for client_id, job_id in rows)
        ids: list[str] = []
        stored: list[NewJob] = []
        for index, item in enumerate(items):
            if item.client_id and item.client_id in known:
                ids.append(known[item.client_id])
                continue
            job = new[index]  # built for each client id's first item
            if item.client_id:
                known[item.client_id] = job.id
            stored.append(job)
            ids.append(job.id)
        if not stored:
            return ids, None
        if is_cordoned:
            raise queue_cordoned(queue)
        specs = [(job.position, job.spec) for job in stored]
        if max_queued is not None and len(stored) > max_queued:
            raise ResourceExhausted(
                f"this request's {len(stored)} new jobs for queue {queue!r} are more than the "
                f"server's max_queued_jobs_per_queue limit of {max_queued}: submit them in "
                f"smaller requests"
            )
        refuse_second_generation(self._tx, conn, queue, specs, now)
        every = len(stored) == len(new)  # no client id was stored before: what was made
        if every and made.refusal is not None:
            raise made.refusal
        if admit is not None and not every:
            admit(specs)
        if every:
            insert_new(conn, made.jobs)
            self._tx.append_new(conn, touched, made.events)
        else:
            insert_new(conn, names.rows(stored))
            self._tx.append_new(conn, touched, events_of(stored))
        if max_queued is None:
            return ids, None
        return ids, refuse_over_limit(conn, queue, len(stored), max_queued, before)

    @retried
    def cancel(
        self,
        queue: str,
        job_set: str,
        job_ids: Sequence[str] | None = None,
        *,
        states: Sequence[JobState] = NON_TERMINAL,
        reason: str = "",
        requestor: str = "",
    ) -> list[str]:
        """Cancel the job set's jobs (or the given ones) in `states`; returns cancelled ids."""
        where = and_(
            t.jobs.c.queue == queue,
            t.jobs.c.job_set == job_set,
            t.jobs.c.state.in_([int(s) for s in states if s in NON_TERMINAL]),
        )
        if job_ids is not None:
            where = and_(where, t.jobs.c.id.in_(list(job_ids)))
        return self._cancel(where, reason=reason, requestor=requestor)

    @retried
    def cancel_matching(
        self, where: ColumnElement[bool], *, reason: str, requestor: str
    ) -> list[str]:
        """Cancel every live job the condition matches, across job sets and queues, in one
        transaction (the web UI's bulk cancel of a list filter); returns cancelled ids."""
        live = t.jobs.c.state.in_([int(s) for s in NON_TERMINAL])
        return self._cancel(and_(where, live), reason=reason, requestor=requestor)

    def _cancel(self, where: ColumnElement[bool], *, reason: str, requestor: str) -> list[str]:
        now = self._tx.clock()
        with self._tx.write() as (conn, touched):
            changes: list[Change] = []
            for job in load_jobs(conn, where):
                after, ev1 = lifecycle.request_cancel(
                    job, requestor=requestor, reason=reason, now=now
                )
                after, ev2 = lifecycle.cancel(after, requestor=requestor, reason=reason, now=now)
                changes.append((job, after, ev1 + ev2))
            cut = _cut_gangs(conn, changes, now)
            self._tx.save_many(conn, touched, changes + cut)
        return [after.id for _, after, _ in changes]

    def cancel_on_queue(
        self,
        queue: str,
        *,
        priority_classes: Sequence[str],
        states: Sequence[JobState],
        requestor: str,
    ) -> list[str]:
        with self._tx.read() as conn:
            where = and_(t.jobs.c.queue == queue, t.jobs.c.state.in_([int(s) for s in states]))
            if priority_classes:
                where = and_(where, t.jobs.c.priority_class.in_(list(priority_classes)))
            sets: Sequence[tuple[str, str]] = conn.execute(
                select(t.jobs.c.job_set, t.jobs.c.id).where(where)
            ).all()
        by_set: dict[str, list[str]] = defaultdict(list)
        for job_set, job_id in sets:
            by_set[job_set].append(job_id)
        cancelled: list[str] = []
        for job_set, ids in sorted(by_set.items()):
            cancelled += self.cancel(
                queue, job_set, ids, states=states, reason="cancelled on queue", requestor=requestor
            )
        return cancelled

    @retried
    def reprioritize(
        self,
        queue: str,
        job_set: str,
        job_ids: Sequence[str] | None,
        priority: float,
        *,
        requestor: str,
    ) -> dict[str, str]:
        """New priority for non-terminal jobs; returns job id -> error ("" when done)."""
        where = and_(t.jobs.c.queue == queue, t.jobs.c.job_set == job_set)
        if job_ids:
            where = and_(where, t.jobs.c.id.in_(list(job_ids)))
        results = self._reprioritize(where, priority, requestor=requestor)
        for job_id in job_ids or ():
            results.setdefault(job_id, "job not found in this queue and job set")
        return results

    @retried
    def reprioritize_matching(
        self, where: ColumnElement[bool], priority: float, *, requestor: str
    ) -> list[str]:
        """New priority for every live job the condition matches, in one transaction (the
        web UI's bulk reprioritize of a list filter); returns the ids changed."""
        live = t.jobs.c.state.in_([int(s) for s in NON_TERMINAL])
        results = self._reprioritize(and_(where, live), priority, requestor=requestor)
        return [job_id for job_id, error in results.items() if not error]

    def _reprioritize(
        self, where: ColumnElement[bool], priority: float, *, requestor: str
    ) -> dict[str, str]:
        now = self._tx.clock()
        results: dict[str, str] = {}
        with self._tx.write() as (conn, touched):
            changes: list[Change] = []
            for job in load_jobs(conn, where):
                try:
                    after, events = lifecycle.reprioritize(
                        job, priority=priority, requestor=requestor, now=now
                    )
                except IllegalTransition:
                    results[job.id] = f"job is {job.state.name.lower()}"
                    continue
                changes.append((job, after, events))
                results[job.id] = ""
            self._tx.save_many(conn, touched, changes)
        return results

    @retried
    def request_preemption(
        self,
        queue: str,
        job_set: str,
        job_ids: Sequence[str] | None,
        *,
        reason: str,
        requestor: str,
        priority_classes: Sequence[str] = (),
    ) -> dict[str, str]:
        """Ask for running jobs to be preempted; returns job id -> error ("" when done)."""
        now = self._tx.clock()
        where: ColumnElement[bool] = and_(
            t.jobs.c.queue == queue, t.jobs.c.state.in_([int(s) for s in ACTIVE_JOB_STATES])
        )
        if job_set:
            where = and_(where, t.jobs.c.job_set == job_set)
        if job_ids:
            where = and_(where, t.jobs.c.id.in_(list(job_ids)))
        if priority_classes:
            where = and_(where, t.jobs.c.priority_class.in_(list(priority_classes)))
        results: dict[str, str] = {}
        with self._tx.write() as (conn, touched):
            changes: list[Change] = []
            manual: list[dict[str, str]] = []  # the runs it ends, with their preemption's kind
            for job in load_jobs(conn, where):
                if job.preempt_requested:
                    results[job.id] = ""
                    continue
                after, events = lifecycle.request_preempt(
                    job, requestor=requestor, reason=reason, now=now
                )
                changes.append((job, after, events))
                if (run := job.active_run) is not None:
                    manual.append({"_id": run.id, "preemption_kind": t.MANUAL_PREEMPTION})
                results[job.id] = ""
            self._tx.save_many(conn, touched, changes)
            executemany(conn, UPDATE_RUNS, manual)
            missed = [j for j in job_ids or () if j not in results]
            results.update(_not_preemptible(conn, queue, job_set, missed))
        return results


def _not_preemptible(
    conn: Connection, queue: str, job_set: str, job_ids: Sequence[str]
) -> dict[str, str]:
    """Why each of `job_ids` cannot be preempted, asked of `queue` and `job_set`: it is not
    found, in another queue or job set, ended, or not running yet."""
    found: dict[str, tuple[str, str, int]] = {}
    for chunk in chunks(list(job_ids), 500):
        rows = conn.execute(
            select(t.jobs.c.id, t.jobs.c.queue, t.jobs.c.job_set, t.jobs.c.state).where(
                t.jobs.c.id.in_(chunk)
            )
        )
        found.update((r.id, (r.queue, r.job_set, r.state)) for r in rows)
    out = {}
    for job_id in job_ids:
        if job_id not in found:
            out[job_id] = f"job {job_id} not found"
            continue
        its_queue, its_set, number = found[job_id]
        state = JobState(number)
        if its_queue != queue:
            out[job_id] = f"job {job_id} is in queue {its_queue}, not {queue}"
        elif job_set and its_set != job_set:
            out[job_id] = f"job {job_id} is in job set {its_set}, not {job_set}"
        elif state in TERMINAL_STATES:
            out[job_id] = f"job {job_id} has ended ({state.name.lower()})"
        else:
            out[job_id] = f"job {job_id} is {state.name.lower()}, not running"
    return out


def _cut_gangs(conn: Connection, cancelled: Sequence[Change], now: datetime) -> list[Change]:
    """Gangs that wait to be placed and lost members to a cancel: the members left are
    a smaller generation when they can still be placed, and fail otherwise, since the
    gang can never be placed whole (they would wait for ever). A gang can still be
    placed when the members left reach its minimum cardinality (an elastic gang), or
    for a pod group, when every role keeps at least its minimum: its cardinality is
    the members submitted, so the gang's minimum would cut it at its first cancel.
    The cancelled member may have been running: a member left to finish its preemption
    when its siblings were queued again for a retry (gangs.restart_gangs). Gangs already
    running are left as they are (a pod group whose role falls below its minimum is
    preempted by the scheduler, then starts again whole or fails)."""
    gone = {after.id for _, after, _ in cancelled}
    gangs = {
        (after.queue, g.id): (g, after.id)
        for before, after, _ in cancelled
        if not before.terminal and (g := after.gang) is not None and g.cardinality > 1
    }
    out: list[Change] = []
    for (queue, gang_id), (gang, member) in sorted(gangs.items()):
        every = load_jobs(conn, and_(t.jobs.c.queue == queue, t.jobs.c.gang_id == gang_id))
        left = [j for j in every if j.id not in gone and not j.terminal]
        if not left or any(j.state != JobState.QUEUED for j in left):
            continue
        why = _unplaceable(gang, every, left)
        if why is None:
            start_gang_generation(conn, [j.id for j in left])
            continue
        failure = Failure(
            reason=f"gang member {member} was cancelled: {why}",
            category="user",
            subcategory="gang_member_cancelled",
        )
        out += [(j, *lifecycle.fail(j, failure, retry=False, now=now)) for j in left]
    return out


def _unplaceable(gang: GangSpec, every: Sequence[Job], left: Sequence[Job]) -> str | None:
    """Why the members `left` of a queued gang (of all its members, `every`) can never be
    placed, or None when they can: a pod group needs every role at its minimum (roles of
    members that ended included), counting its members left and those that succeeded (they
    did their part), any other gang its minimum cardinality."""
    mins = role_minimums(every)
    if mins:
        done = [j for j in every if j.state == JobState.SUCCEEDED]
        counts = Counter(j.gang.role for j in (*left, *done) if j.gang is not None)
        for role, minimum in sorted(mins.items()):
            if counts[role] < minimum:
                return (
                    f"role {role} can no longer reach its minimum ({counts[role]} of its "
                    f"{minimum} members left or succeeded)"
                )
        return None
    if len(left) >= gang.minimum_cardinality:
        return None
    return (
        f"the gang can no longer be placed whole ({len(left)} of its "
        f"{gang.minimum_cardinality} members left)"
    )
