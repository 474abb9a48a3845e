"""Leases as transactions: executors syncing, leases expiring, and scheduling decisions.

Mixed into Store: every method here is one transaction that changes jobs only through
armada_core.jobs.lifecycle, so the event log stays the record of what happened.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import (
    TERMINAL_STATES,
    ContainerResult,
    Failure,
    Job,
    JobState,
    Run,
    RunState,
    lifecycle,
    pod_name,
)
from armada_core.jobs import annotations as ann
from armada_core.jobs.gangs import gang_of
from armada_core.jobs.lifecycle import IllegalTransition
from armada_core.jobs.text import MAX_CONDITION, MAX_FAILURE_TEXT, MAX_FAILURE_WORD, clean_text
from armada_core.scheduling.model import Reasons
from armada_server.errors import InvalidArgument
from armada_server.storage import schema as t
from armada_server.storage.bulk import executemany, fetch
from armada_server.storage.guard import Conflict, retried
from armada_server.storage.retries import (
    Catalogue,
    Retries,
    gang_cardinalities,
    run_failure,
    start_gang_generation,
)
from armada_server.storage.rows import (
    JOB_COLUMNS,
    RUN_COLUMNS,
    chunks,
    job_from_row,
    mutable_job_row,
    run_from_row,
    run_row,
    when,
)

log = logging.getLogger("armada_server")

ACTIVE_JOB_STATES = (JobState.LEASED, JobState.PENDING, JobState.RUNNING)
ACTIVE_RUN_STATES = (int(RunState.LEASED), int(RunState.PENDING), int(RunState.RUNNING))
# Run updates by which an executor says the run has ended on its side.
ENDED_UPDATES = frozenset({"succeeded", "failed", "returned", "stopped"})
# New leases per sync response are capped by size, well under gRPC's default 4 MiB limit on
# received messages: a response carrying 80,000 leases (30 MB) was refused by the executor,
# every time, so it never got any. The rest follow on the next syncs (the agent syncs again
# at once when it got leases).
MAX_LEASE_BYTES = 3 * 1024 * 1024
# A run stopped by the server (cancelled, restarted with its gang, expired) keeps its node's
# capacity for its grace period plus this long (the executor hears of the stop at its next
# sync, then kills), unless its executor says sooner that it no longer holds the run.
RELEASE_SLACK = timedelta(seconds=10)


def clean_reason(text: str) -> str:
    return clean_text(text, MAX_FAILURE_TEXT)


def _first_line(error: Exception) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return clean_text(text.splitlines()[0] if text else type(error).__name__, 500)


def _unsupported(capabilities: bytes | None) -> tuple[str, ...]:
    if not capabilities:
        return ()
    return tuple(executor_pb2.Capabilities.FromString(capabilities).unsupported_pod_fields)


def encode_nodes(nodes: Iterable[executor_pb2.Node]) -> bytes:
    # A SyncRequest holding only nodes: a plain protobuf list.
    return executor_pb2.SyncRequest(nodes=nodes).SerializeToString()


def decode_nodes(data: bytes) -> list[executor_pb2.Node]:
    return list(executor_pb2.SyncRequest.FromString(data).nodes)


@dataclass(frozen=True)
class ExecutorNodes:
    id: str
    pool: str
    nodes: list[executor_pb2.Node]
    # The pod-spec fields the executor declared it cannot honour (executors/capabilities.py).
    unsupported: tuple[str, ...] = ()


class _LazySpec:
    """`spec` parsed from the stored bytes on first use: the scheduling loop converts each
    job once and reuses it while the job is unchanged, so most cycles never need the spec."""

    raw: bytes

    @cached_property
    def spec(self) -> submit_pb2.Job:
        return submit_pb2.Job.FromString(self.raw)

    @property
    def spec_key(self) -> bytes | None:
        """The stored spec without its id: jobs submitted together have equal keys, so what
        a spec decides can be computed once per key. None when the id is not written first
        (the serialiser writes field 1, the id, first)."""
        job_id: str = self.id  # type: ignore[attr-defined]
        if len(job_id) >= 128:
            return None
        prefix = b"\n" + bytes((len(job_id),)) + job_id.encode()
        return self.raw[len(prefix) :] if self.raw.startswith(prefix) else None


@dataclass(frozen=True)
class QueuedJob(_LazySpec):
    id: str
    queue: str
    priority: float
    submitted_at: datetime
    raw: bytes
    avoid_node: str | None
    # A retried gang's generation may be smaller than the gang (see _restart_gangs).
    gang_cardinality: int | None = None
    version: int = 0  # the row's version: a lease applies only while it is unchanged


@dataclass(frozen=True)
class RunningJob(_LazySpec):
    id: str
    queue: str
    priority: float
    submitted_at: datetime
    raw: bytes
    node: str  # "<executor>/<node>"
    started_at: datetime | None
    run_id: str = ""  # a preemption applies only while this is still the job's run
    excess_flow: int = 0  # what the run holds of its queue's excess-flow budget


@dataclass(frozen=True)
class TerminatingRun(_LazySpec):
    """A run the server ended (cancelled, restarted with its gang, expired) whose end its
    executor has not confirmed: its node's capacity is not free yet."""

    id: str  # the job's id
    raw: bytes
    node: str  # "<executor>/<node>"


@dataclass(frozen=True)
class SchedulingState:
    """Everything one scheduling cycle reads, from one consistent read."""

    queues: list[submit_pb2.Queue]
    executors: list[ExecutorNodes]
    queued: list[QueuedJob]
    running: list[RunningJob]
    terminating: list[TerminatingRun] = field(default_factory=list)
    #: Members that SUCCEEDED of each pod group with members running or queued again in a
    #: retried generation, per role: (queue, gang id) -> role -> count (`Job.gang_succeeded`).
    succeeded: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    #: The roles and minimums of those groups' members that ended (whatever the end): a role
    #: whose members have all ended keeps its minimum (`Job.gang_roles`).
    ended_roles: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _from_timestamp(ts) -> datetime:  # type: ignore[no-untyped-def]
    """Timestamp.ToDatetime(tzinfo=UTC), without its per-call overhead (one per update)."""
    return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def _failure(update: executor_pb2.RunUpdate.Failed) -> Failure:
    """The failure an executor reports, its texts cleaned and bounded: one NUL would make
    PostgreSQL refuse the executor's whole sync, and a huge text would be in every event."""

    def word(value: str) -> str:
        return clean_text(value, MAX_FAILURE_WORD)

    return Failure(
        reason=clean_text(update.reason, MAX_FAILURE_TEXT) or "failed",
        containers=tuple(
            ContainerResult(
                word(c.name),
                c.exit_code,
                clean_text(c.message, MAX_FAILURE_TEXT),
                word(c.reason),
                c.init_container,
            )
            for c in update.containers
        ),
        condition=clean_text(update.condition, MAX_CONDITION),
        category=word(update.category),
        subcategory=word(update.subcategory),
    )


_gc_lock = threading.Lock()
_gc_batches = 0
_gc_was_enabled = False
_gc_paused_at = 0.0
GC_PAUSE_LIMIT = 30.0  # seconds


@contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk transition. Leasing or updating tens of
    thousands of jobs allocates millions of short-lived objects, none in reference cycles
    (reference counting frees them), and the collector those allocations trigger kept
    traversing the whole heap: a quarter of a scheduling cycle's time. Collection resumes
    when the last concurrent batch ends."""
    global _gc_batches, _gc_was_enabled, _gc_paused_at
    with _gc_lock:
        if _gc_batches == 0:
            _gc_was_enabled = gc.isenabled()
            _gc_paused_at = time.monotonic()
            gc.disable()
        _gc_batches += 1
    try:
        yield
    finally:
        collect = False
        with _gc_lock:
            _gc_batches -= 1
            if _gc_batches == 0 and _gc_was_enabled:
                gc.enable()
            elif _gc_was_enabled and time.monotonic() - _gc_paused_at > GC_PAUSE_LIMIT:
                # Batches overlapping without end (a busy server): collect now and then
                # anyway, so that garbage in reference cycles cannot pile up.
                _gc_paused_at = time.monotonic()
                collect = True
        if collect:
            gc.collect()


class LeaseOps:
    """Executor- and scheduler-facing transactions (mixed into Store)."""

    retries: Retries

    # --- executors ------------------------------------------------------------------------

    def executor_sync(
        self,
        request: executor_pb2.SyncRequest,
        *,
        now: datetime | None = None,
        nodes: bytes | None = None,
    ) -> executor_pb2.SyncResponse:
        """Record the executor's nodes and run updates, renew its leases, hand out work.
        `nodes` is `encode_nodes(request.nodes)` when the caller has it already.

        No report can stop an executor's syncs: when the database refuses a sync's
        transaction (a value it cannot store), its reports are applied one per transaction,
        and a job whose report still cannot be stored is failed with a reason saying why."""
        now = now or self.clock()
        nodes = encode_nodes(request.nodes) if nodes is None else nodes
        try:
            return self._sync(request, request.updates, nodes, now)
        except (InvalidArgument, DBAPIError) as e:
            if not request.updates:
                raise
            log.warning(
                "executor %s: its sync could not be stored (%s); applying its %d "
                "reports one at a time",
                request.executor_id,
                _first_line(e),
                len(request.updates),
            )
        for u in request.updates:
            try:
                self._sync(request, [u], nodes, now, hand_out=False)
            except (InvalidArgument, DBAPIError) as e:
                self._refuse_report(request.executor_id, u, e, now)
        return self._sync(request, [], nodes, now)

    @retried
    def _sync(
        self,
        request: executor_pb2.SyncRequest,
        updates: Sequence[executor_pb2.RunUpdate],
        nodes: bytes,
        now: datetime,
        *,
        hand_out: bool = True,
    ) -> executor_pb2.SyncResponse:
        executor = request.executor_id
        with bulk(), self._write() as (conn, touched):
            # Nodes rarely change between syncs: renew the row without rewriting them (a
            # megabyte for 10,000 nodes) when they are what is stored.
            # What the executor can honour (None: it never said), read by submissions.
            capabilities = (
                request.capabilities.SerializeToString()
                if request.HasField("capabilities")
                else None
            )
            renewed = conn.execute(
                update(t.executors)
                .where(t.executors.c.id == executor, t.executors.c.nodes == nodes)
                .values(pool=request.pool, last_seen=now, capabilities=capabilities)
            ).rowcount
            if not renewed:
                row = {
                    "pool": request.pool,
                    "nodes": nodes,
                    "last_seen": now,
                    "capabilities": capabilities,
                }
                stmt = self._insert(t.executors).values(id=executor, **row)
                conn.execute(
                    stmt.on_conflict_do_update(index_elements=[t.executors.c.id], set_=row)
                )
            catalogue: Catalogue | None = None
            # Every job the updates name, read at once; updates apply in order to the job as
            # the previous ones left it (running and succeeded may arrive in one sync).
            jobs = self._jobs_by_id(conn, {u.job_id for u in updates})
            before: dict[str, Job] = {}
            events: list = []
            confirmed: set[str] = set()  # runs whose executor says they ended
            for u in updates:
                kind = u.WhichOneof("update")
                job = jobs.get(u.job_id)
                run = job.latest_run if job is not None else None
                if job is None or run is None or run.id != u.run_id or run.cluster_id != executor:
                    log.info("ignoring %s for unknown run %s", kind, u.run_id)
                    continue
                if kind in ENDED_UPDATES:
                    confirmed.add(u.run_id)
                if catalogue is None and kind in ("failed", "returned", "stopped"):
                    catalogue = Catalogue.load(conn)
                try:
                    after, more = self._apply_update(conn, catalogue, job, u, now)
                except IllegalTransition as e:
                    log.info("ignoring %s for run %s: %s", kind, u.run_id, e)
                    continue
                except Exception as e:  # one job's report must not stop the executor
                    after, more = self._isolate(
                        job,
                        "executor report",
                        f"the executor's {kind} report could not be processed",
                        e,
                        now,
                    )
                before.setdefault(job.id, job)
                jobs[job.id] = after
                events.extend(more)
            changes: list[tuple[Job, Job, list]] = [
                (job, jobs[job_id], []) for job_id, job in before.items()
            ]
            restarts, more = self._restart_gangs(conn, changes, now)
            self._save_many(conn, touched, changes + restarts, events + more, confirmed=confirmed)
            held = set(request.run_ids)
            self._release(conn, executor, held)
            if not hand_out:
                return executor_pb2.SyncResponse()
            return self._work_for(
                conn, touched, executor, held, {u.run_id for u in request.updates}, now
            )

    def _isolate(
        self, job: Job, stage: str, what: str, error: Exception, now: datetime
    ) -> tuple[Job, list]:
        """Fail `job` alone for an error its processing raised, so that everyone else's
        work goes on; the reason names the problem (counted by `stage` in a metric)."""
        log.error("job %s: %s", job.id, what, exc_info=error)
        self.isolated_failures[stage] += 1
        failure = Failure(
            reason=clean_reason(f"{what}: {type(error).__name__}: {error}"),
            category="internal",
            subcategory="server_error",
        )
        return lifecycle.fail(job, failure, retry=False, now=now)

    def _refuse_report(
        self, executor: str, u: executor_pb2.RunUpdate, error: Exception, now: datetime
    ) -> None:
        """A report the database refuses even alone: its job fails, saying why (the executor
        never sends it again, and the run would otherwise be lost track of)."""
        kind = u.WhichOneof("update")
        self.isolated_failures["executor report"] += 1
        log.error(
            "executor %s: the %s report of run %s cannot be stored: %s",
            executor,
            kind,
            u.run_id,
            _first_line(error),
        )
        reason = f"the executor's {kind} report could not be stored: {_first_line(error)}"
        try:
            self._fail_now(
                {u.job_id: reason},
                "server_error",
                lambda job: job.active_run is not None and job.active_run.id == u.run_id,
                now,
            )
        except Exception:
            log.exception("job %s: could not fail it either", u.job_id)

    def _release(self, conn: Connection, executor: str, held: set[str]) -> None:
        """Runs the server stopped keep their node's capacity until their executor no
        longer holds them (it has seen them end); from then on the node is free."""
        ended = [
            r
            for r in conn.execute(
                select(t.runs.c.id).where(
                    t.runs.c.cluster_id == executor, t.runs.c.releases_at.is_not(None)
                )
            ).scalars()
            if r not in held
        ]
        for chunk in chunks(ended, 500):
            conn.execute(update(t.runs).where(t.runs.c.id.in_(chunk)).values(releases_at=None))

    def _restart_gangs(
        self, conn: Connection, changes: list[tuple[Job, Job, list]], now: datetime
    ) -> tuple[list[tuple[Job, Job, list]], list]:
        """Gangs run together, so they are retried together (seed 001: a new generation):
        when a member that was running is queued again for a retry, every other member
        still running is stopped and queued again with it. Members already being preempted
        are left to finish that; members that ended stay ended, so the new generation is
        the members still to run and its cardinality is their number (a sibling that
        already succeeded is not waited for: it will never be queued again).

        A pod group (members with roles) is retried whole only when it is broken: the
        members that keep running leave a role below its minimum, or none keeps running.
        Otherwise the retried members were elastic: each goes back to the queue alone and
        is placed later as a late member, while the rest keeps running (SEMANTICS.md,
        "Elastic pod groups").

        `changes` (this transaction's changes so far) is updated in place for members it
        holds; the other members' changes are returned, with the events of all of them."""
        retried: dict[tuple[str, str], list[Job]] = {}
        for before, after, _ in changes:
            if (
                before.state in ACTIVE_JOB_STATES
                and after.state == JobState.QUEUED
                and (g := after.gang) is not None
                and g.cardinality > 1
            ):
                retried.setdefault((after.queue, g.id), []).append(after)
        if not retried:
            return [], []
        index = {after.id: i for i, (_, after, _) in enumerate(changes)}
        out: list[tuple[Job, Job, list]] = []
        events: list = []
        for (queue, gang_id), members in retried.items():
            generation = {m.id for m in members}
            # Each other member as this transaction leaves it so far.
            others: list[tuple[Job, Job, list]] = []
            for stored in self._load_jobs(
                conn, and_(t.jobs.c.queue == queue, t.jobs.c.gang_id == gang_id)
            ):
                if stored.id in generation:
                    continue
                others.append(
                    changes[index[stored.id]] if stored.id in index else (stored, stored, [])
                )
            if _elastic_retry([*members, *(current for _, current, _ in others)], generation):
                continue
            member = members[0]
            waits = [m.retry_after for m in members if m.retry_after is not None]
            retry_after = max(waits) if waits else None
            failure = Failure(
                reason=f"gang member {member.id} is being retried: the gang restarts together",
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
                after, more = lifecycle.fail(
                    current, failure, retry=True, now=now, retry_after=retry_after
                )
                events.extend(more)
                if current.id in index:
                    changes[index[current.id]] = (before, after, old)
                else:
                    out.append((before, after, []))
            start_gang_generation(conn, sorted(generation))
        return out, events

    def _apply_update(
        self,
        conn: Connection,
        catalogue: Catalogue | None,
        job: Job,
        u: executor_pb2.RunUpdate,
        now: datetime,
    ):  # type: ignore[no-untyped-def]
        kind = u.WhichOneof("update")
        when = _from_timestamp(u.time) if u.HasField("time") else now
        run = job.latest_run
        assert run is not None
        if kind == "pending":
            return lifecycle.mark_pending(job, now=when, kubernetes_id=u.pending.kubernetes_id)
        if kind == "running":
            return lifecycle.mark_running(
                job, now=when, node=u.running.node, kubernetes_id=u.running.kubernetes_id
            )
        if kind == "succeeded":
            return lifecycle.succeed(job, now=when)
        if kind == "ingress_info":
            return lifecycle.report_ingress(
                job,
                addresses={
                    port: clean_text(address, MAX_FAILURE_WORD)
                    for port, address in u.ingress_info.addresses.items()
                },
                now=when,
            )
        assert catalogue is not None
        if kind == "failed":
            failure = _failure(u.failed)
            decision = self.retries.decide(
                conn, catalogue, job, run_failure(job, failure, node=run.node), when
            )
            return lifecycle.fail(
                job, failure, retry=decision.retry, now=when, retry_after=decision.retry_after
            )
        if kind == "returned":
            failure = Failure(reason=clean_reason(u.returned.reason) or "lease returned")
            decision = self.retries.decide(
                conn,
                catalogue,
                job,
                run_failure(job, failure, node=run.node, returned_lease=True),
                when,
            )
            job2, events = lifecycle.return_lease(
                job, reason=failure.reason, run_attempted=u.returned.run_attempted, now=when
            )
            if decision.retry:
                return job2, events
            job3, more = lifecycle.fail(
                job2,
                Failure(
                    reason=decision.reason, category="internal", subcategory="max_runs_exceeded"
                ),
                retry=False,
                now=when,
            )
            return job3, events + more
        if kind == "stopped":
            if not job.preempt_requested:
                raise IllegalTransition("stopped without a preemption request")
            # The reason a scheduling cycle kept on the run (apply_schedule), else plainly
            # preempted.
            reason = run.reason or "preempted"
            failure = Failure(reason=reason, condition="Preempted")
            decision = self.retries.decide(
                conn, catalogue, job, run_failure(job, failure, node=run.node), when
            )
            # The job the cycle that preempted the run made room for (none for a manual
            # preemption), as apply_schedule recorded it on the run.
            preempting = (
                conn.execute(
                    select(t.runs.c.preempting_job_id).where(t.runs.c.id == run.id)
                ).scalar_one_or_none()
                or ""
            )
            return lifecycle.preempt(
                job,
                reason=reason,
                now=when,
                retry=decision.retry,
                retry_after=decision.retry_after,
                requestor="scheduler",
                preempting_job_id=preempting,
            )
        raise IllegalTransition(f"unknown update {kind!r}")

    def _work_for(
        self,
        conn: Connection,
        touched: set,
        executor: str,
        held: set[str],
        updated: set[str],
        now: datetime,
    ) -> executor_pb2.SyncResponse:
        response = executor_pb2.SyncResponse()
        # One narrow read of the executor's active runs (an executor may hold 100,000 and
        # syncs often) and one of those to preempt; what a new lease needs (its placement
        # and spec) is read only for the leases handed out.
        leased: list[str] = []
        started: set[str] = set()
        is_leased = int(RunState.LEASED)
        for run_id, state in fetch(
            conn,
            select(t.runs.c.id, t.runs.c.state).where(
                t.runs.c.cluster_id == executor, t.runs.c.state.in_(ACTIVE_RUN_STATES)
            ),
        ):
            if state == is_leased:
                leased.append(run_id)
            else:
                started.add(run_id)
        for run_id, job_id in fetch(
            conn,
            select(t.runs.c.id, t.runs.c.job_id)
            .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
            .where(
                t.runs.c.cluster_id == executor,
                t.runs.c.state.in_(ACTIVE_RUN_STATES),
                t.jobs.c.preempt_requested,
            ),
        ):
            if run_id in held:
                response.stop.add(run_id=run_id, job_id=job_id, reason="preempted", preempt=True)
        active = started.union(leased)
        new = [r for r in leased if r not in held]
        lost_runs = started - held - updated
        lost: list[str] = []
        for chunk in chunks(sorted(lost_runs), 500):
            lost += (
                conn.execute(select(t.runs.c.job_id).where(t.runs.c.id.in_(chunk))).scalars().all()
            )
        size = 0
        unsendable: dict[str, str] = {}
        for chunk in chunks(new, 500):
            if size >= MAX_LEASE_BYTES:
                break
            rows = {
                r[0]: r
                for r in fetch(
                    conn,
                    select(
                        t.runs.c.id,
                        t.runs.c.job_id,
                        t.runs.c.run_index,
                        t.runs.c.node,
                        t.jobs.c.spec,
                    )
                    .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
                    .where(t.runs.c.id.in_(chunk)),
                )
            }
            for run_id in chunk:
                if size >= MAX_LEASE_BYTES:
                    break
                _, job_id, run_index, node, spec = rows[run_id]
                if len(spec) + 100 > MAX_LEASE_BYTES:
                    unsendable[job_id] = (  # it would never fit in a response
                        f"the job ({len(spec)} bytes) is larger than the executor protocol "
                        f"can carry ({MAX_LEASE_BYTES} bytes)"
                    )
                    continue
                size += len(spec) + 100
                lease = response.leases.add(
                    run_id=run_id,
                    run_index=run_index,
                    node=node,
                    pod_name=pod_name(job_id, run_index),
                )
                lease.job.MergeFromString(spec)
        gone = sorted(held - active)
        owners: dict[str, str] = {}
        for chunk in chunks(gone, 500):
            owners.update(
                conn.execute(
                    select(t.runs.c.id, t.runs.c.job_id).where(t.runs.c.id.in_(chunk))
                ).all()
            )
        for run_id in gone:
            response.stop.add(
                run_id=run_id,
                job_id=owners.get(run_id) or "",
                reason="the run is no longer active",
                preempt=False,
            )
        if lost:
            self._fail_lost(
                conn, touched, lost, "the executor no longer has the pod", "pod_missing", now
            )
        if unsendable:
            # Never sent, so the executor holds nothing of them.
            self.isolated_failures["lease"] += self._fail_alone(
                conn,
                touched,
                unsendable,
                "unsendable",
                lambda job: job.active_run is not None,
                now,
                confirmed=True,
            )
        return response

    def _fail_alone(
        self,
        conn: Connection,
        touched: set,
        failures: Mapping[str, str],
        subcategory: str,
        still: Callable[[Job], bool],
        now: datetime,
        *,
        confirmed: bool = False,
    ) -> int:
        """Fail each job of `failures` with its reason, for good, if it is `still` as the
        failure was decided on; returns how many were failed. `confirmed`: their runs hold
        nothing on their nodes."""
        changes = []
        for job in self._jobs_by_id(conn, failures).values():
            if not still(job):
                continue
            failure = Failure(
                reason=clean_reason(failures[job.id]), category="internal", subcategory=subcategory
            )
            changes.append((job, *lifecycle.fail(job, failure, retry=False, now=now)))
        self._save_many(
            conn,
            touched,
            changes,
            confirmed={
                job.active_run.id
                for job, _, _ in changes
                if confirmed and job.active_run is not None
            },
        )
        return len(changes)

    @retried
    def _fail_now(
        self,
        failures: Mapping[str, str],
        subcategory: str,
        still: Callable[[Job], bool],
        now: datetime,
    ) -> int:
        """_fail_alone in a transaction of its own."""
        with self._write() as (conn, touched):
            return self._fail_alone(conn, touched, failures, subcategory, still, now)

    def _fail_lost(
        self,
        conn: Connection,
        touched: set,
        job_ids: Sequence[str],
        reason: str,
        subcategory: str,
        now: datetime,
    ) -> None:
        catalogue = Catalogue.load(conn)
        changes = []
        for job in self._jobs_by_id(conn, job_ids).values():
            run = job.active_run
            if run is None:
                continue
            failure = Failure(reason=reason, category="internal", subcategory=subcategory)
            try:
                decision = self.retries.decide(
                    conn,
                    catalogue,
                    job,
                    run_failure(job, failure, node=run.node, returned_lease=True),
                    now,
                )
                if subcategory == "lease_expired":
                    after, events = lifecycle.expire_lease(
                        job, retry=decision.retry, now=now, retry_after=decision.retry_after
                    )
                else:
                    after, events = lifecycle.fail(
                        job,
                        failure,
                        retry=decision.retry,
                        now=now,
                        retry_after=decision.retry_after,
                    )
            except IllegalTransition as e:
                log.info("job %s: no %s: %s", job.id, subcategory, e)
                continue
            except Exception as e:  # one job must not stop every cycle's lease expiry
                after, events = self._isolate(
                    job, subcategory, f"its {subcategory} could not be processed", e, now
                )
            changes.append((job, after, events))
        restarts, more = self._restart_gangs(conn, changes, now)
        # The executor said it no longer has these runs: they hold no node (pod_missing).
        confirmed = (
            ()
            if subcategory == "lease_expired"
            else {job.active_run.id for job, _, _ in changes if job.active_run is not None}
        )
        self._save_many(
            conn,
            touched,
            changes + restarts,
            [e for _, _, events in changes for e in events] + more,
            confirmed=confirmed,
        )

    @retried
    def expire_leases(self, *, timeout: float, now: datetime | None = None) -> list[str]:
        """Runs of executors silent for longer than `timeout` seconds fail as lease-expired."""
        now = now or self.clock()
        cutoff = now - timedelta(seconds=timeout)
        with self._write() as (conn, touched):
            # Runs whose grace to terminate has run out no longer hold their nodes.
            conn.execute(
                update(t.runs)
                .where(t.runs.c.releases_at.is_not(None), t.runs.c.releases_at < now)
                .values(releases_at=None)
            )
            stale = [
                r.id
                for r in conn.execute(
                    select(t.executors.c.id).where(t.executors.c.last_seen < cutoff)
                )
            ]
            if not stale:
                return []
            jobs = list(
                conn.execute(
                    select(t.runs.c.job_id).where(
                        t.runs.c.cluster_id.in_(stale), t.runs.c.state.in_(ACTIVE_RUN_STATES)
                    )
                ).scalars()
            )
            if jobs:
                self._fail_lost(conn, touched, jobs, "lease expired", "lease_expired", now)
            return jobs

    # --- writing many jobs at once ---------------------------------------------------------

    def _jobs_by_id(self, conn: Connection, job_ids: Iterable[str]) -> dict[str, Job]:
        """The jobs (with their runs) as Store._load_jobs builds them, read in bulk."""
        jobs: dict[str, Job] = {}
        for chunk in chunks(sorted(set(job_ids)), 2000):
            runs: dict[str, list[Run]] = {}
            for r in fetch(
                conn,
                select(*RUN_COLUMNS)
                .where(t.runs.c.job_id.in_(chunk))
                .order_by(t.runs.c.job_id, t.runs.c.run_index),
            ):
                runs.setdefault(r[0], []).append(run_from_row(r))
            for r in fetch(conn, select(*JOB_COLUMNS).where(t.jobs.c.id.in_(chunk))):
                jobs[r[0]] = job_from_row(r, tuple(runs.get(r[0], ())))
        return jobs

    def _save_many(
        self,
        conn: Connection,
        touched: set,
        changes: Sequence[tuple[Job, Job, list]],
        events: Sequence | None = None,
        *,
        confirmed: Collection[str] = (),
    ) -> None:
        """The one way a transition is written: the changed jobs (each only where its row
        still has the version it was read at, else Conflict), their latest runs, then the
        events (in `changes` order unless `events` gives them), as one executemany per
        table: a statement per row costs about a millisecond in SQLAlchemy, which a
        scheduling cycle or a sync of thousands of runs cannot afford.

        A run that ends here keeps its node's capacity for its grace period (see
        RELEASE_SLACK) unless it is in `confirmed`: its executor reported its end."""
        job_rows, new_runs, changed_runs, changed_full = [], [], [], []
        all_events: list = []
        for before, after, more in changes:
            job_rows.append(mutable_job_row(after))
            if after.runs and (not before.runs or after.runs[-1] != before.runs[-1]):
                row = run_row(after.id, after.runs[-1])
                old = next((r for r in before.runs if r.id == row["id"]), None)
                row["releases_at"] = _releases_at(after, old, confirmed)
                if old is not None and _fixed(old) == _fixed(after.runs[-1]):
                    # Only what a run's later events change: rewriting the columns of the
                    # (job_id, run_index) index cost SQLite an index update per row.
                    changed_runs.append({k: row[k] for k in _RUN_CHANGES} | {"_id": row["id"]})
                elif old is not None:
                    row["_id"] = row.pop("id")
                    changed_full.append(row)
                else:
                    new_runs.append(row)
            all_events.extend(more)
        written = executemany(conn, _UPDATE_JOBS, job_rows)
        if written != len(job_rows):
            raise Conflict(
                f"{len(job_rows) - written} of {len(job_rows)} jobs changed since they were read"
            )
        executemany(conn, _INSERT_RUNS, new_runs)
        executemany(conn, _UPDATE_RUNS, changed_runs)
        executemany(conn, _UPDATE_RUNS, changed_full)
        events = all_events if events is None else events
        if events:
            self._append(conn, touched, events)

    # --- scheduling -----------------------------------------------------------------------

    def live_executors(self, *, executor_timeout: float, now: datetime | None = None) -> int:
        """How many executors synced within the timeout (a cheap check before a snapshot)."""
        cutoff = (now or self.clock()) - timedelta(seconds=executor_timeout)
        with self._read() as conn:
            return conn.execute(
                select(func.count())
                .select_from(t.executors)
                .where(t.executors.c.last_seen >= cutoff)
            ).scalar_one()

    def scheduling_state(
        self, *, executor_timeout: float, now: datetime | None = None
    ) -> SchedulingState:
        now = now or self.clock()
        cutoff = now - timedelta(seconds=executor_timeout)
        with self._read(snapshot=True) as conn:
            queues = [
                submit_pb2.Queue.FromString(r.spec)
                for r in conn.execute(select(t.queues.c.spec).order_by(t.queues.c.name))
            ]
            executors = [
                ExecutorNodes(r.id, r.pool, decode_nodes(r.nodes), _unsupported(r.capabilities))
                for r in conn.execute(
                    select(t.executors)
                    .where(t.executors.c.last_seen >= cutoff)
                    .order_by(t.executors.c.id)
                )
            ]
            self._mark_cordoned(conn, executors)  # type: ignore[attr-defined]
            cols = (
                t.jobs.c.id,
                t.jobs.c.queue,
                t.jobs.c.priority,
                t.jobs.c.submitted_at,
                t.jobs.c.spec,
            )
            generations = gang_cardinalities(conn, t.jobs.c.state == int(JobState.QUEUED))
            # Driver-level rows and frozen dataclasses filled without __init__: this reads
            # every queued and running job, each cycle.
            new = object.__new__
            queued = []
            # Pod groups (a spec naming a role: a byte search, no parsing) whose members
            # that succeeded are read below.
            role_key = ann.GANG_ROLE.encode()
            groups: set[tuple[str, str]] = set()
            for job_id, queue, priority, submitted, spec, version, avoid, gang_id in fetch(
                conn,
                select(*cols, t.jobs.c.version, t.jobs.c.avoid_node, t.jobs.c.gang_id)
                .where(
                    t.jobs.c.state == int(JobState.QUEUED),
                    or_(t.jobs.c.retry_after.is_(None), t.jobs.c.retry_after <= now),
                )
                .order_by(t.jobs.c.id),
            ):
                job = new(QueuedJob)
                job.__dict__.update(
                    id=job_id,
                    queue=queue,
                    priority=priority,
                    submitted_at=when(submitted),
                    raw=spec,
                    avoid_node=avoid,
                    gang_cardinality=generations.get(job_id),
                    version=version,
                )
                queued.append(job)
                if job_id in generations and role_key in spec:
                    groups.add((queue, gang_id))  # retried: earlier members may have succeeded
            running = []
            terminating = []
            for (
                job_id,
                queue,
                priority,
                submitted,
                spec,
                cluster,
                node,
                started,
                run_id,
                leaving,
                gang_id,
                excess_flow,
            ) in fetch(
                conn,
                select(
                    *cols,
                    t.runs.c.cluster_id,
                    t.runs.c.node,
                    t.runs.c.started_at,
                    t.runs.c.id,
                    t.jobs.c.preempt_requested,
                    t.jobs.c.gang_id,
                    t.runs.c.excess_flow,
                )
                .join(
                    t.runs,
                    and_(t.runs.c.job_id == t.jobs.c.id, t.runs.c.state.in_(ACTIVE_RUN_STATES)),
                )
                .where(
                    t.jobs.c.state.in_(
                        [int(JobState.LEASED), int(JobState.PENDING), int(JobState.RUNNING)]
                    )
                )
                .order_by(t.jobs.c.id),
            ):
                if gang_id is not None and role_key in spec:
                    groups.add((queue, gang_id))
                if leaving:
                    # Being preempted: the cycle that preempted it gave its room to the job
                    # placed instead (counted as that job's), and executors start that job
                    # only once this one has stopped. Counted here too, the node would look
                    # overcommitted and the next cycle would preempt another job.
                    continue
                job = new(RunningJob)
                job.__dict__.update(
                    id=job_id,
                    queue=queue,
                    priority=priority,
                    submitted_at=when(submitted),
                    raw=spec,
                    node=f"{cluster}/{node}",
                    started_at=when(started),
                    run_id=run_id,
                    excess_flow=excess_flow or 0,
                )
                running.append(job)
            for job_id, spec, cluster, node in fetch(
                conn,
                select(t.jobs.c.id, t.jobs.c.spec, t.runs.c.cluster_id, t.runs.c.node)
                .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
                .where(t.runs.c.releases_at.is_not(None), t.runs.c.releases_at > now),
            ):
                stopping = new(TerminatingRun)
                stopping.__dict__.update(id=job_id, raw=spec, node=f"{cluster}/{node}")
                terminating.append(stopping)
            succeeded, ended_roles = _ended_members(conn, groups)
        return SchedulingState(
            queues, executors, queued, running, terminating, succeeded, ended_roles
        )

    def carryover(self) -> str | None:
        """What the scheduling leader last carried over (`scheduling/carryover.py`)."""
        with self._read() as conn:
            return conn.execute(
                select(t.scheduler_carryover.c.state).where(t.scheduler_carryover.c.id == 1)
            ).scalar_one_or_none()

    @retried
    def carry_over(self, state: str, *, now: datetime | None = None) -> None:
        """Keep what the scheduling leader carries to its next cycle, for whoever leads it."""
        now = now or self.clock()
        with self._write() as (conn, _):
            done = conn.execute(
                update(t.scheduler_carryover)
                .where(t.scheduler_carryover.c.id == 1)
                .values(state=state, updated_at=now)
            )
            if not done.rowcount:
                conn.execute(
                    insert(t.scheduler_carryover).values(id=1, state=state, updated_at=now)
                )

    @retried
    def apply_schedule(
        self,
        *,
        scheduled: Mapping[str, tuple[str, str, str]],
        preempted: Iterable[str],
        failed: Mapping[str, str],
        reasons: Mapping[str, str],
        seen: Mapping[str, int | str],
        gangs: Mapping[str, tuple[str, str | None]] | None = None,
        preempting: Mapping[str, str] | None = None,
        preempt_reasons: Mapping[str, str] | None = None,
        charges: Mapping[str, int] | None = None,
        now: datetime | None = None,
    ) -> int:
        """Write one cycle's decisions: leases (job -> executor, node, pool), preemption
        requests, failures, and why the rest stayed queued. Returns the leases made.

        `charges` is what a leased job takes of its queue's excess-flow budget
        (`SchedulingResult.excess_flow`): kept on its run, read back while the run is active.

        `preempting` names, for a preempted job, the job the cycle made room for: it is kept
        on the preempted run, and the preempted event names it once the run has stopped.
        `preempt_reasons` says why a preempted job goes when the scheduler knows more than
        that it was preempted (a pod group whose role fell below its minimum): the
        preempting event carries it, and it is kept as the run's reason so that the
        preempted event (or the retried failure) says it too once the run has stopped.

        A decision applies only to a job still as the snapshot saw it (`seen`: the row
        version of a queued job, the run id of a running one); the others changed meanwhile
        (cancelled, reprioritised, ended) and are skipped, a gang's members all together
        (`gangs`: job -> its gang's key), so a gang is never leased in part."""
        now = now or self.clock()
        leased = 0
        with bulk(), self._write() as (conn, touched):
            jobs = self._jobs_by_id(conn, [*scheduled, *preempted, *failed])

            def unchanged(job_id: str) -> Job | None:
                job = jobs.get(job_id)
                if job is None or job.state != JobState.QUEUED or seen.get(job_id) != job.version:
                    return None
                return job

            changed = [j for j in scheduled if unchanged(j) is None]
            skipped_gangs = {gangs[j] for j in changed if gangs and j in gangs}
            if changed:
                log.info("%d leases not made: their jobs changed since the snapshot", len(changed))
            changes = []
            charged: list[dict] = []  # leased runs -> their excess-flow charge
            run_ids = _new_run_ids(len(scheduled))
            for job_id, (executor, node, pool) in scheduled.items():
                job = unchanged(job_id)
                if job is None or (gangs and gangs.get(job_id) in skipped_gangs):
                    continue
                after, events = lifecycle.lease(
                    job, run_id=next(run_ids), cluster_id=executor, node=node, pool=pool, now=now
                )
                changes.append((job, after, events))
                leased += 1
                if charges and (charge := charges.get(job_id)):
                    charged.append({"_id": after.runs[-1].id, "excess_flow": charge})
            made_room: list[dict] = []  # preempted runs -> the job placed in their room
            why_runs: list[dict] = []  # preempted runs -> why, when the scheduler said
            for job_id in preempted:
                job = jobs.get(job_id)
                run = job.active_run if job is not None else None
                if run is None or run.id != seen.get(job_id) or job.preempt_requested:
                    continue
                why = (preempt_reasons or {}).get(job_id)
                after, events = lifecycle.request_preempt(
                    job,
                    requestor="scheduler",
                    reason=clean_reason(why) if why else "preempted by the scheduler",
                    now=now,
                )
                changes.append((job, after, events))
                if preempting and (placed := preempting.get(job_id)):
                    made_room.append({"_id": run.id, "preempting_job_id": placed})
                if why:
                    why_runs.append({"_id": run.id, "reason": clean_reason(why)})
            for job_id, reason in failed.items():
                job = unchanged(job_id)
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
                changes.append((job, after, events))
            self._save_many(conn, touched, changes)
            executemany(conn, _UPDATE_RUNS, charged)
            executemany(conn, _UPDATE_RUNS, made_room)
            executemany(conn, _UPDATE_RUNS, why_runs)
            for chunk in chunks(list(scheduled), 500):
                conn.execute(
                    update(t.jobs)
                    .where(t.jobs.c.id.in_(chunk), t.jobs.c.scheduling_reason != "")
                    .values(scheduling_reason="")
                )
            for reason, group in _group(reasons).items():
                for i in range(0, len(group), 500):
                    conn.execute(
                        update(t.jobs)
                        .where(
                            t.jobs.c.id.in_(group[i : i + 500]),
                            t.jobs.c.scheduling_reason != reason,
                        )
                        .values(scheduling_reason=reason)
                    )
        return leased

    def fail_jobs(self, failures: Mapping[str, str], *, now: datetime | None = None) -> int:
        """Fail queued jobs that cannot be scheduled at all (e.g. a spec the scheduler cannot
        read), each with its reason; returns how many were failed."""
        return self._fail_now(
            failures, "server_error", lambda job: job.state == JobState.QUEUED, now or self.clock()
        )


# --- bulk statements without SQLAlchemy's per-row work (SQLite) ------------------------------
#
# SQLAlchemy processes every parameter and result value in Python (a datetime is formatted or
# parsed by a Python function per value), which was most of the cost of writing a cycle's or a
# sync's tens of thousands of rows. On SQLite the statements below go to the driver's cursor
# with the values already in the form SQLAlchemy would store: datetimes as UTC text
# ("YYYY-MM-DD HH:MM:SS.ffffff", timezone dropped, as SQLAlchemy's SQLite DateTime does).
# PostgreSQL keeps the ordinary path: its driver takes datetimes as they are.

_UPDATE_JOBS = update(t.jobs).where(
    t.jobs.c.id == bindparam("_id"), t.jobs.c.version == bindparam("_version")
)
_INSERT_RUNS = insert(t.runs)
_UPDATE_RUNS = update(t.runs).where(t.runs.c.id == bindparam("_id"))
# The run columns set after its lease (see lifecycle's handlers); the rest never change.
_RUN_CHANGES = (
    "node",
    "state",
    "pending_at",
    "started_at",
    "finished_at",
    "kubernetes_id",
    "condition",
    "category",
    "subcategory",
    "reason",
    "containers",
    "releases_at",
)


def _ended_members(
    conn: Connection, groups: Collection[tuple[str, str]]
) -> tuple[dict[tuple[str, str], dict[str, int]], dict[tuple[str, str], dict[str, int]]]:
    """Of the pod groups `groups` (queue, gang id), the members that ended: how many of each
    role succeeded, and each role's minimum. One query by gang id (ix_jobs_gang_members),
    parsing only those members' specs; read from storage, so any replica that comes to lead
    knows a role whose members have all ended."""
    succeeded: dict[tuple[str, str], dict[str, int]] = {}
    roles: dict[tuple[str, str], dict[str, int]] = {}
    if not groups:
        return succeeded, roles
    ids = sorted({gang_id for _, gang_id in groups})
    ended = sorted(int(s) for s in TERMINAL_STATES)
    for chunk in chunks(ids, 10_000):
        for queue, gang_id, state, spec in conn.execute(
            select(t.jobs.c.queue, t.jobs.c.gang_id, t.jobs.c.state, t.jobs.c.spec).where(
                t.jobs.c.gang_id.in_(chunk), t.jobs.c.state.in_(ended)
            )
        ):
            key = (queue, gang_id)
            if key not in groups:
                continue
            try:
                gang = gang_of(submit_pb2.Job.FromString(spec).annotations)
            except Exception:  # unreadable: it keeps no role we can name
                continue
            if gang is None or not gang.role:
                continue
            minimums = roles.setdefault(key, {})
            minimums[gang.role] = max(minimums.get(gang.role, 0), gang.role_minimum or 0)
            if state == int(JobState.SUCCEEDED):
                counts = succeeded.setdefault(key, {})
                counts[gang.role] = counts.get(gang.role, 0) + 1
    return succeeded, roles


def role_minimums(members: Iterable[Job]) -> dict[str, int]:
    """A pod group's roles and their minimums, from every member it has had (a role whose
    members all ended still has its minimum); empty for a gang without roles."""
    mins: dict[str, int] = {}
    for job in members:
        gang = job.gang
        if gang is not None and gang.role:
            mins[gang.role] = max(mins.get(gang.role, 0), gang.role_minimum or 0)
    return mins


def _elastic_retry(members: Sequence[Job], retried: Collection[str]) -> bool:
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
        if keeps or job.state == JobState.SUCCEEDED:
            role = job.gang.role  # type: ignore[union-attr]
            counts[role] = counts.get(role, 0) + 1
    return running > 0 and all(counts.get(r, 0) >= m for r, m in mins.items())


def _releases_at(job: Job, old: Run | None, confirmed: Collection[str]) -> datetime | None:
    """Until when a run that ends in this change still holds its node: it was active, and
    the server, not its executor, ended it (the processes may still be terminating)."""
    run = job.runs[-1]
    if old is None or not old.state.active or run.state.active or run.id in confirmed:
        return None
    grace = job.pod_spec.terminationGracePeriodSeconds or 1
    return (run.finished_at or job.last_transition_at) + timedelta(seconds=grace) + RELEASE_SLACK


def _fixed(run: Run) -> tuple:
    """What a run's lease decided, which no later event of the run changes."""
    return run.index, run.cluster_id, run.pool, run.leased_at


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
