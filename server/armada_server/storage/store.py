"""Every read and write of the server's state; each write is one transaction.

Job changes go through armada_core.jobs.lifecycle, so the rows written are the projection of
the events appended in the same transaction: the log and the tables never disagree.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, and_, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DataError, IntegrityError

from armada_core.api import submit_pb2
from armada_core.jobs import (
    GangSpec,
    Job,
    JobState,
    Run,
    RunState,
    job_from_item,
    lifecycle,
    new_job_id,
)
from armada_core.jobs.lifecycle import EventMessage, Failure, IllegalTransition
from armada_core.retry import RetrySettings
from armada_server.errors import AlreadyExists, InvalidArgument, NotFound
from armada_server.storage import schema as t
from armada_server.storage.bulk import fetch, insert_rows
from armada_server.storage.database import WRITE
from armada_server.storage.guard import retried
from armada_server.storage.leases import LeaseOps, role_minimums
from armada_server.storage.nodes import NodeOps
from armada_server.storage.notify import notify
from armada_server.storage.places import PlaceOps
from armada_server.storage.retries import Retries, start_gang_generation
from armada_server.storage.rows import (
    JOB_COLUMNS,
    RUN_COLUMNS,
    chunks,
    job_from_row,
    job_row,
    run_from_row,
)

JobSetKey = tuple[str, str]  # (queue, job set)

ACTIVE_STATES = (JobState.LEASED, JobState.PENDING, JobState.RUNNING)
NON_TERMINAL = (JobState.SUBMITTED, JobState.QUEUED, *ACTIVE_STATES)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    payload: bytes


class Store(NodeOps, LeaseOps, PlaceOps):
    """Transactional access to queues, retry policies, jobs, runs and the event log.

    `on_commit` is called with the job sets that got new events, after their transaction
    committed: the event hub wakes watchers from it.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_commit: Callable[[set[JobSetKey]], None] | None = None,
        retries: Retries | None = None,
    ) -> None:
        self.engine = engine
        self.retries = retries or Retries(RetrySettings())
        self.clock = clock
        self.on_commit = on_commit
        self._dialect = engine.dialect.name
        # SQLite allows one writer; queueing writers here is cheaper than on its busy lock.
        self._write_lock = threading.Lock() if self._dialect == "sqlite" else None
        # Jobs failed because processing them raised, by where (see LeaseOps._isolate).
        self.isolated_failures: Counter[str] = Counter()

    # --- transactions -----------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[tuple[Connection, set[JobSetKey]]]:
        touched: set[JobSetKey] = set()
        if self._write_lock is not None:
            self._write_lock.acquire()
        try:
            conn_ = self.engine.connect().execution_options(**{WRITE: True})
            with conn_ as conn, conn.begin():
                yield conn, touched
        except DataError as e:
            raise _invalid(e) from None
        finally:
            if self._write_lock is not None:
                self._write_lock.release()
        if touched and self.on_commit is not None:
            self.on_commit(touched)

    @contextmanager
    def _read(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """A read transaction; with `snapshot`, every statement in it sees the same committed
        state (SQLite's read transactions always do; PostgreSQL needs REPEATABLE READ)."""
        try:
            with self.engine.connect() as conn:
                if snapshot and self._dialect == "postgresql":
                    conn = conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    yield conn
        except DataError as e:
            raise _invalid(e) from None

    def _insert(self, table):  # type: ignore[no-untyped-def]
        return postgresql.insert(table) if self._dialect == "postgresql" else sqlite.insert(table)

    # --- queues -----------------------------------------------------------------------------

    def create_queue(self, queue: submit_pb2.Queue) -> None:
        with self._write() as (conn, _):
            if conn.execute(select(t.queues.c.name).where(t.queues.c.name == queue.name)).first():
                raise AlreadyExists(f"queue {queue.name!r} already exists")
            conn.execute(
                insert(t.queues).values(
                    name=queue.name, cordoned=queue.cordoned, spec=queue.SerializeToString()
                )
            )

    def update_queue(self, queue: submit_pb2.Queue) -> None:
        with self._write() as (conn, _):
            done = conn.execute(
                update(t.queues)
                .where(t.queues.c.name == queue.name)
                .values(cordoned=queue.cordoned, spec=queue.SerializeToString())
            )
            if done.rowcount == 0:
                raise NotFound(f"queue {queue.name!r} not found")

    def delete_queue(self, name: str) -> None:
        with self._write() as (conn, _):
            done = conn.execute(delete(t.queues).where(t.queues.c.name == name))
            if done.rowcount == 0:
                raise NotFound(f"queue {name!r} not found")

    def get_queue(self, name: str) -> submit_pb2.Queue:
        with self._read() as conn:
            row = conn.execute(select(t.queues.c.spec).where(t.queues.c.name == name)).first()
        if row is None:
            raise NotFound(f"queue {name!r} not found")
        return submit_pb2.Queue.FromString(row.spec)

    def list_queues(self) -> list[submit_pb2.Queue]:
        with self._read() as conn:
            rows = conn.execute(select(t.queues.c.spec).order_by(t.queues.c.name)).all()
        return [submit_pb2.Queue.FromString(r.spec) for r in rows]

    def set_cordoned(self, name: str, cordoned: bool) -> None:
        with self._write() as (conn, _):
            row = conn.execute(select(t.queues.c.spec).where(t.queues.c.name == name)).first()
            if row is None:
                raise NotFound(f"queue {name!r} not found")
            queue = submit_pb2.Queue.FromString(row.spec)
            queue.cordoned = cordoned
            conn.execute(
                update(t.queues)
                .where(t.queues.c.name == name)
                .values(cordoned=cordoned, spec=queue.SerializeToString())
            )

    # --- retry policies ---------------------------------------------------------------------

    def create_retry_policy(self, policy: submit_pb2.RetryPolicy) -> None:
        with self._write() as (conn, _):
            exists = conn.execute(
                select(t.retry_policies.c.name).where(t.retry_policies.c.name == policy.name)
            ).first()
            if exists:
                raise AlreadyExists(f"retry policy {policy.name!r} already exists")
            conn.execute(
                insert(t.retry_policies).values(name=policy.name, spec=policy.SerializeToString())
            )

    def update_retry_policy(self, policy: submit_pb2.RetryPolicy) -> None:
        with self._write() as (conn, _):
            done = conn.execute(
                update(t.retry_policies)
                .where(t.retry_policies.c.name == policy.name)
                .values(spec=policy.SerializeToString())
            )
            if done.rowcount == 0:
                raise NotFound(f"retry policy {policy.name!r} not found")

    def delete_retry_policy(self, name: str) -> None:
        with self._write() as (conn, _):
            done = conn.execute(delete(t.retry_policies).where(t.retry_policies.c.name == name))
            if done.rowcount == 0:
                raise NotFound(f"retry policy {name!r} not found")

    def get_retry_policy(self, name: str) -> submit_pb2.RetryPolicy:
        with self._read() as conn:
            row = conn.execute(
                select(t.retry_policies.c.spec).where(t.retry_policies.c.name == name)
            ).first()
        if row is None:
            raise NotFound(f"retry policy {name!r} not found")
        return submit_pb2.RetryPolicy.FromString(row.spec)

    def list_retry_policies(self) -> list[submit_pb2.RetryPolicy]:
        with self._read() as conn:
            rows = conn.execute(
                select(t.retry_policies.c.spec).order_by(t.retry_policies.c.name)
            ).all()
        return [submit_pb2.RetryPolicy.FromString(r.spec) for r in rows]

    # --- the event log ----------------------------------------------------------------------

    def _append(
        self, conn: Connection, touched: set[JobSetKey], events: Sequence[EventMessage]
    ) -> None:
        """Append events to their job sets' logs, numbering each set's events in order."""
        by_set: dict[JobSetKey, list[EventMessage]] = defaultdict(list)
        for e in events:
            body = getattr(e, e.WhichOneof("events"))
            by_set[(body.queue, body.job_set_id)].append(e)
        now = self.clock()
        for key in sorted(by_set):  # one lock order for every writer: no deadlocks
            batch = by_set[key]
            queue, job_set = key
            conn.execute(
                self._insert(t.job_sets)
                .values(
                    queue=queue,
                    name=job_set,
                    last_seq=0,
                    created_at=now,
                )
                .on_conflict_do_nothing()
            )
            last = conn.execute(
                update(t.job_sets)
                .where(
                    t.job_sets.c.queue == queue,
                    t.job_sets.c.name == job_set,
                )
                .values(last_seq=t.job_sets.c.last_seq + len(batch))
                .returning(t.job_sets.c.last_seq)
            ).scalar_one()
            first = last - len(batch) + 1
            rows = []
            times: dict[tuple[int, int], datetime] = {}  # events of a batch share their times
            for seq, e in enumerate(batch, start=first):
                body = getattr(e, e.WhichOneof("events"))
                created = body.created
                stamp = (created.seconds, created.nanos)
                when = times.get(stamp)
                if when is None:
                    when = times[stamp] = created.ToDatetime(tzinfo=UTC)
                rows.append(
                    {
                        "queue": queue,
                        "job_set": job_set,
                        "seq": seq,
                        "job_id": body.job_id,
                        "created_at": when,
                        "payload": e.SerializeToString(),
                    }
                )
            insert_rows(conn, t.events, rows)
            touched.add(key)
        if self._dialect == "postgresql":
            notify(conn, by_set)

    def events_after(
        self, queue: str, job_set: str, after: int, limit: int = 1000
    ) -> list[StoredEvent]:
        with self._read() as conn:
            rows = conn.execute(
                select(t.events.c.seq, t.events.c.payload)
                .where(
                    t.events.c.queue == queue, t.events.c.job_set == job_set, t.events.c.seq > after
                )
                .order_by(t.events.c.seq)
                .limit(limit)
            ).all()
        return [StoredEvent(r.seq, r.payload) for r in rows]

    def last_seq(self, queue: str, job_set: str) -> int | None:
        """The newest message number of a job set, or None when it has no events."""
        with self._read() as conn:
            return conn.execute(
                select(t.job_sets.c.last_seq).where(
                    t.job_sets.c.queue == queue, t.job_sets.c.name == job_set
                )
            ).scalar_one_or_none()

    # --- jobs -------------------------------------------------------------------------------

    def submit(
        self,
        queue: str,
        job_set: str,
        items: Sequence[submit_pb2.JobSubmitRequestItem],
        *,
        owner: str,
        groups: tuple[str, ...] = (),
    ) -> list[str]:
        """Store validated items as jobs (all or none); a known client_id returns its job."""
        for attempt in range(2):
            try:
                return self._submit(queue, job_set, items, owner, groups)
            except IntegrityError:
                if attempt:  # a concurrent submit took one of our client ids: look again
                    raise
        raise AssertionError("unreachable")

    def _submit(
        self,
        queue: str,
        job_set: str,
        items: Sequence[submit_pb2.JobSubmitRequestItem],
        owner: str,
        groups: tuple[str, ...],
    ) -> list[str]:
        now = self.clock()
        with self._write() as (conn, touched):
            if (
                conn.execute(select(t.queues.c.name).where(t.queues.c.name == queue)).first()
                is None
            ):
                raise NotFound(f"queue {queue!r} not found")
            client_ids = {i.client_id for i in items if i.client_id}
            known: dict[str, str] = {}
            for chunk in chunks(sorted(client_ids), 500):
                known.update(
                    conn.execute(
                        select(t.jobs.c.client_id, t.jobs.c.id).where(
                            t.jobs.c.queue == queue, t.jobs.c.client_id.in_(chunk)
                        )
                    ).all()
                )
            ids: list[str] = []
            job_rows: list[dict] = []
            all_events: list[EventMessage] = []
            for item in items:
                if item.client_id and item.client_id in known:
                    ids.append(known[item.client_id])
                    continue
                job_id = new_job_id()
                if item.client_id:
                    known[item.client_id] = job_id
                spec = job_from_item(
                    item,
                    job_id=job_id,
                    queue=queue,
                    job_set_id=job_set,
                    owner=owner,
                    now=now,
                    groups=groups,
                )
                job, events = lifecycle.submit(spec, now)
                job_rows.append(job_row(job))
                all_events.extend(events)
                ids.append(job_id)
            if job_rows:
                insert_rows(conn, t.jobs, job_rows)
                self._append(conn, touched, all_events)
            return ids

    def _load_jobs(self, conn: Connection, where) -> list[Job]:  # type: ignore[no-untyped-def]
        rows = fetch(conn, select(*JOB_COLUMNS).where(where).order_by(t.jobs.c.id))
        if not rows:
            return []
        runs: dict[str, list[Run]] = defaultdict(list)
        for chunk in chunks([r[0] for r in rows], 500):
            for r in fetch(
                conn,
                select(*RUN_COLUMNS)
                .where(t.runs.c.job_id.in_(chunk))
                .order_by(t.runs.c.job_id, t.runs.c.run_index),
            ):
                runs[r[0]].append(run_from_row(r))
        return [job_from_row(r, tuple(runs[r[0]])) for r in rows]

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
        now = self.clock()
        where = and_(
            t.jobs.c.queue == queue,
            t.jobs.c.job_set == job_set,
            t.jobs.c.state.in_([int(s) for s in states if s in NON_TERMINAL]),
        )
        if job_ids is not None:
            where = and_(where, t.jobs.c.id.in_(list(job_ids)))
        with self._write() as (conn, touched):
            changes = []
            for job in self._load_jobs(conn, where):
                after, ev1 = lifecycle.request_cancel(
                    job, requestor=requestor, reason=reason, now=now
                )
                after, ev2 = lifecycle.cancel(after, requestor=requestor, reason=reason, now=now)
                changes.append((job, after, ev1 + ev2))
            cut = self._cut_gangs(conn, changes, now)
            self._save_many(conn, touched, changes + cut)
        return [after.id for _, after, _ in changes]

    def _cut_gangs(
        self, conn: Connection, cancelled: Sequence[tuple[Job, Job, list]], now: datetime
    ) -> list[tuple[Job, Job, list]]:
        """Gangs that wait to be placed and lost members to a cancel: the members left are
        a smaller generation when they can still be placed, and fail otherwise, since the
        gang can never be placed whole (they would wait for ever). A gang can still be
        placed when the members left reach its minimum cardinality (an elastic gang), or
        for a pod group, when every role keeps at least its minimum: its cardinality is
        the members submitted, so the gang's minimum would cut it at its first cancel.
        Gangs already running are left as they are (a pod group whose role falls below its
        minimum is preempted by the scheduler, then starts again whole or fails)."""
        gone = {after.id for _, after, _ in cancelled}
        gangs = {
            (after.queue, g.id): (g, after.id)
            for before, after, _ in cancelled
            if before.state == JobState.QUEUED
            and (g := after.gang) is not None
            and g.cardinality > 1
        }
        out: list[tuple[Job, Job, list]] = []
        for (queue, gang_id), (gang, member) in sorted(gangs.items()):
            every = self._load_jobs(
                conn, and_(t.jobs.c.queue == queue, t.jobs.c.gang_id == gang_id)
            )
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

    def cancel_on_queue(
        self,
        queue: str,
        *,
        priority_classes: Sequence[str],
        states: Sequence[JobState],
        requestor: str,
    ) -> list[str]:
        with self._read() as conn:
            where = and_(t.jobs.c.queue == queue, t.jobs.c.state.in_([int(s) for s in states]))
            if priority_classes:
                where = and_(where, t.jobs.c.priority_class.in_(list(priority_classes)))
            sets = conn.execute(select(t.jobs.c.job_set, t.jobs.c.id).where(where)).all()
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
        now = self.clock()
        where = and_(t.jobs.c.queue == queue, t.jobs.c.job_set == job_set)
        if job_ids:
            where = and_(where, t.jobs.c.id.in_(list(job_ids)))
        results: dict[str, str] = {}
        with self._write() as (conn, touched):
            changes = []
            for job in self._load_jobs(conn, where):
                try:
                    after, events = lifecycle.reprioritize(
                        job, priority=priority, requestor=requestor, now=now
                    )
                except IllegalTransition:
                    results[job.id] = f"job is {job.state.name.lower()}"
                    continue
                changes.append((job, after, events))
                results[job.id] = ""
            self._save_many(conn, touched, changes)
        for job_id in job_ids or ():
            results.setdefault(job_id, "job not found in this queue and job set")
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
        now = self.clock()
        where = and_(t.jobs.c.queue == queue, t.jobs.c.state.in_([int(s) for s in ACTIVE_STATES]))
        if job_set:
            where = and_(where, t.jobs.c.job_set == job_set)
        if job_ids:
            where = and_(where, t.jobs.c.id.in_(list(job_ids)))
        if priority_classes:
            where = and_(where, t.jobs.c.priority_class.in_(list(priority_classes)))
        results: dict[str, str] = {}
        with self._write() as (conn, touched):
            changes = []
            for job in self._load_jobs(conn, where):
                if job.preempt_requested:
                    results[job.id] = ""
                    continue
                after, events = lifecycle.request_preempt(
                    job, requestor=requestor, reason=reason, now=now
                )
                changes.append((job, after, events))
                results[job.id] = ""
            self._save_many(conn, touched, changes)
        for job_id in job_ids or ():
            results.setdefault(job_id, "job is not running in this queue and job set")
        return results

    # --- job queries ------------------------------------------------------------------------

    def job_states(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        found: dict[str, JobState] = {}
        with self._read() as conn:
            for chunk in chunks(list(job_ids), 500):
                for job_id, state in conn.execute(
                    select(t.jobs.c.id, t.jobs.c.state).where(t.jobs.c.id.in_(chunk))
                ).all():
                    found[job_id] = JobState(state)
        return {j: found.get(j, JobState.UNKNOWN) for j in job_ids}

    def scheduling_reasons(self, job_ids: Sequence[str]) -> dict[str, str]:
        """Why each queued job was not scheduled in the latest cycle (absent: no reason)."""
        out: dict[str, str] = {}
        with self._read() as conn:
            for chunk in chunks(list(job_ids), 500):
                out.update(
                    conn.execute(
                        select(t.jobs.c.id, t.jobs.c.scheduling_reason).where(
                            t.jobs.c.id.in_(chunk), t.jobs.c.scheduling_reason != ""
                        )
                    ).all()
                )
        return out

    def job_ids_by_external_uri(self, queue: str, job_set: str, uri: str) -> list[str]:
        with self._read() as conn:
            return list(
                conn.execute(
                    select(t.jobs.c.id)
                    .where(
                        t.jobs.c.queue == queue,
                        t.jobs.c.job_set == job_set,
                        t.jobs.c.external_job_uri == uri,
                    )
                    .order_by(t.jobs.c.id)
                ).scalars()
            )

    def jobs(self, job_ids: Sequence[str]) -> list[Job]:
        with self._read() as conn:
            out: list[Job] = []
            for chunk in chunks(list(job_ids), 500):
                out += self._load_jobs(conn, t.jobs.c.id.in_(chunk))
        return out

    def runs(self, run_ids: Sequence[str]) -> list[tuple[str, Run]]:
        with self._read() as conn:
            out = []
            for chunk in chunks(list(run_ids), 500):
                out += [
                    (r[0], run_from_row(r))
                    for r in fetch(conn, select(*RUN_COLUMNS).where(t.runs.c.id.in_(chunk)))
                ]
        return out

    def stopping_runs(self, run_ids: Sequence[str]) -> set[str]:
        """Of `run_ids`, the runs the server ended (cancelled, restarted with their gang)
        whose processes may still be terminating: their executor has not confirmed the end
        and their grace period has not run out. Such a run has not finished yet. An expired
        lease is not among them: its executor has been silent for the lease timeout and is
        presumed gone with its pods (the local executor's pods kill themselves by then)."""
        now = self.clock()
        out: set[str] = set()
        with self._read() as conn:
            for chunk in chunks(list(run_ids), 500):
                out.update(
                    conn.execute(
                        select(t.runs.c.id).where(
                            t.runs.c.id.in_(chunk),
                            t.runs.c.releases_at > now,
                            t.runs.c.state != int(RunState.LEASE_EXPIRED),
                        )
                    ).scalars()
                )
        return out

    def active_queues(self) -> dict[str, list[str]]:
        """Queues with queued or running jobs, by pool ('' for jobs not yet placed)."""
        with self._read() as conn:
            queued = (
                conn.execute(
                    select(t.jobs.c.queue).where(t.jobs.c.state == int(JobState.QUEUED)).distinct()
                )
                .scalars()
                .all()
            )
            running = conn.execute(
                select(t.runs.c.pool, t.jobs.c.queue)
                .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
                .where(
                    t.jobs.c.state.in_([int(s) for s in ACTIVE_STATES]),
                    t.runs.c.state.in_(
                        [int(RunState.LEASED), int(RunState.PENDING), int(RunState.RUNNING)]
                    ),
                )
                .distinct()
            ).all()
        pools: dict[str, set[str]] = defaultdict(set)
        for q in queued:
            pools[""].add(q)
        for pool, q in running:
            pools[pool].add(q)
        return {pool: sorted(qs) for pool, qs in pools.items()}

    def count_jobs_by_queue_and_state(self) -> dict[tuple[str, JobState], int]:
        with self._read() as conn:
            rows = conn.execute(
                select(t.jobs.c.queue, t.jobs.c.state, func.count()).group_by(
                    t.jobs.c.state, t.jobs.c.queue
                )
            ).all()  # the order of ix_jobs_state_queue
        return {(q, JobState(s)): n for q, s, n in rows}


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


def _invalid(error: DataError) -> InvalidArgument:
    """A value the database refuses (NUL in text, too long, out of range) is the caller's
    mistake, not the server's: say so without the SQL. The services check what they can
    name a field for first; this is the net under them."""
    reason = str(getattr(error, "orig", error)).strip().splitlines()
    return InvalidArgument(
        f"a value in the request cannot be stored: "
        f"{reason[0] if reason else 'rejected by the database'}"
    )
