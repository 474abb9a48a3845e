"""Leases as transactions: executors syncing, leases expiring, and scheduling decisions.

Mixed into Store: every method here is one transaction that changes jobs only through
armada_core.jobs.lifecycle, so the event log stays the record of what happened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, and_, or_, select, update

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import ContainerResult, Failure, Job, JobState, RunState, lifecycle, pod_name
from armada_core.jobs.ids import new_run_id
from armada_core.jobs.lifecycle import IllegalTransition
from armada_server.retries import Catalogue, Retries, run_failure
from armada_server.storage import schema as t

log = logging.getLogger("armada_server")

ACTIVE_RUN_STATES = (int(RunState.LEASED), int(RunState.PENDING), int(RunState.RUNNING))


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


@dataclass(frozen=True)
class QueuedJob:
    id: str
    queue: str
    priority: float
    submitted_at: datetime
    spec: submit_pb2.Job
    avoid_node: str | None


@dataclass(frozen=True)
class RunningJob:
    id: str
    queue: str
    priority: float
    submitted_at: datetime
    spec: submit_pb2.Job
    node: str  # "<executor>/<node>"
    started_at: datetime | None


@dataclass(frozen=True)
class SchedulingState:
    """Everything one scheduling cycle reads, from one consistent read."""

    queues: list[submit_pb2.Queue]
    executors: list[ExecutorNodes]
    queued: list[QueuedJob]
    running: list[RunningJob]


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _failure(update: executor_pb2.RunUpdate.Failed) -> Failure:
    return Failure(
        reason=update.reason or "failed",
        containers=tuple(ContainerResult(c.name, c.exit_code, c.message, c.reason,
                                         c.init_container) for c in update.containers),
        condition=update.condition, category=update.category, subcategory=update.subcategory)


class LeaseOps:
    """Executor- and scheduler-facing transactions (mixed into Store)."""

    retries: Retries

    # --- executors ------------------------------------------------------------------------

    def executor_sync(self, request: executor_pb2.SyncRequest, *,
                      now: datetime | None = None) -> executor_pb2.SyncResponse:
        """Record the executor's nodes and run updates, renew its leases, hand out work."""
        now = now or self.clock()
        executor = request.executor_id
        with self._write() as (conn, touched):
            row = {"pool": request.pool, "nodes": encode_nodes(request.nodes), "last_seen": now}
            stmt = self._insert(t.executors).values(id=executor, **row)
            conn.execute(stmt.on_conflict_do_update(index_elements=[t.executors.c.id], set_=row))
            catalogue: Catalogue | None = None
            changes = []
            updated: set[str] = set()
            for u in request.updates:
                updated.add(u.run_id)
                [job] = self._load_jobs(conn, t.jobs.c.id == u.job_id) or [None]
                run = job.latest_run if job is not None else None
                if job is None or run is None or run.id != u.run_id or run.cluster_id != executor:
                    log.info("ignoring %s for unknown run %s", u.WhichOneof("update"), u.run_id)
                    continue
                if catalogue is None and u.WhichOneof("update") in ("failed", "returned",
                                                                    "stopped"):
                    catalogue = Catalogue.load(conn)
                try:
                    after, events = self._apply_update(conn, catalogue, job, u, now)
                except IllegalTransition as e:
                    log.info("ignoring %s for run %s: %s", u.WhichOneof("update"), u.run_id, e)
                    continue
                changes.append((job, after, events))
            self._save(conn, touched, changes)
            return self._work_for(conn, touched, executor, set(request.run_ids), updated, now)

    def _apply_update(self, conn: Connection, catalogue: Catalogue | None, job: Job,
                      u: executor_pb2.RunUpdate, now: datetime):  # type: ignore[no-untyped-def]
        kind = u.WhichOneof("update")
        when = u.time.ToDatetime(tzinfo=UTC) if u.HasField("time") else now
        run = job.latest_run
        assert run is not None
        if kind == "pending":
            return lifecycle.mark_pending(job, now=when, kubernetes_id=u.pending.kubernetes_id)
        if kind == "running":
            return lifecycle.mark_running(job, now=when, node=u.running.node,
                                          kubernetes_id=u.running.kubernetes_id)
        if kind == "succeeded":
            return lifecycle.succeed(job, now=when)
        assert catalogue is not None
        if kind == "failed":
            failure = _failure(u.failed)
            decision = self.retries.decide(conn, catalogue, job,
                                           run_failure(job, failure, node=run.node), when)
            return lifecycle.fail(job, failure, retry=decision.retry, now=when,
                                  retry_after=decision.retry_after)
        if kind == "returned":
            failure = Failure(reason=u.returned.reason or "lease returned")
            decision = self.retries.decide(
                conn, catalogue, job,
                run_failure(job, failure, node=run.node, returned_lease=True), when)
            job2, events = lifecycle.return_lease(job, reason=failure.reason,
                                                  run_attempted=u.returned.run_attempted,
                                                  now=when)
            if decision.retry:
                return job2, events
            job3, more = lifecycle.fail(job2, Failure(reason=decision.reason,
                                                      category="internal",
                                                      subcategory="max_runs_exceeded"),
                                        retry=False, now=when)
            return job3, events + more
        if kind == "stopped":
            if not job.preempt_requested:
                raise IllegalTransition("stopped without a preemption request")
            failure = Failure(reason="preempted", condition="Preempted")
            decision = self.retries.decide(conn, catalogue, job,
                                           run_failure(job, failure, node=run.node), when)
            return lifecycle.preempt(job, reason="preempted", now=when, retry=decision.retry,
                                     retry_after=decision.retry_after, requestor="scheduler")
        raise IllegalTransition(f"unknown update {kind!r}")

    def _work_for(self, conn: Connection, touched: set, executor: str, held: set[str],
                  updated: set[str], now: datetime) -> executor_pb2.SyncResponse:
        response = executor_pb2.SyncResponse()
        rows = conn.execute(
            select(t.runs.c.id, t.runs.c.job_id, t.runs.c.run_index, t.runs.c.node,
                   t.runs.c.state, t.jobs.c.spec, t.jobs.c.preempt_requested,
                   t.jobs.c.cancel_requested)
            .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
            .where(t.runs.c.cluster_id == executor, t.runs.c.state.in_(ACTIVE_RUN_STATES))
        ).all()
        active = {r.id for r in rows}
        lost: list[str] = []
        for r in rows:
            if r.preempt_requested and r.id in held:
                response.stop.add(run_id=r.id, job_id=r.job_id, reason="preempted",
                                  preempt=True)
            elif r.state == RunState.LEASED and r.id not in held:
                spec = submit_pb2.Job.FromString(r.spec)
                response.leases.add(run_id=r.id, run_index=r.run_index, node=r.node,
                                    pod_name=pod_name(r.job_id, r.run_index), job=spec)
            elif r.state != RunState.LEASED and r.id not in held and r.id not in updated:
                lost.append(r.job_id)
        for run_id in sorted(held - active):
            job_id = conn.execute(select(t.runs.c.job_id).where(t.runs.c.id == run_id)).scalar()
            response.stop.add(run_id=run_id, job_id=job_id or "",
                              reason="the run is no longer active", preempt=False)
        if lost:
            self._fail_lost(conn, touched, lost, "the executor no longer has the pod",
                            "pod_missing", now)
        return response

    def _fail_lost(self, conn: Connection, touched: set, job_ids: Sequence[str], reason: str,
                   subcategory: str, now: datetime) -> None:
        catalogue = Catalogue.load(conn)
        changes = []
        for job in self._load_jobs(conn, t.jobs.c.id.in_(list(job_ids))):
            run = job.active_run
            if run is None:
                continue
            failure = Failure(reason=reason, category="internal", subcategory=subcategory)
            decision = self.retries.decide(
                conn, catalogue, job,
                run_failure(job, failure, node=run.node, returned_lease=True), now)
            if subcategory == "lease_expired":
                after, events = lifecycle.expire_lease(job, retry=decision.retry, now=now,
                                                       retry_after=decision.retry_after)
            else:
                after, events = lifecycle.fail(job, failure, retry=decision.retry, now=now,
                                               retry_after=decision.retry_after)
            changes.append((job, after, events))
        self._save(conn, touched, changes)

    def expire_leases(self, *, timeout: float, now: datetime | None = None) -> list[str]:
        """Runs of executors silent for longer than `timeout` seconds fail as lease-expired."""
        now = now or self.clock()
        cutoff = now - timedelta(seconds=timeout)
        with self._write() as (conn, touched):
            stale = [r.id for r in conn.execute(select(t.executors.c.id).where(
                t.executors.c.last_seen < cutoff))]
            if not stale:
                return []
            jobs = list(conn.execute(select(t.runs.c.job_id).where(
                t.runs.c.cluster_id.in_(stale),
                t.runs.c.state.in_(ACTIVE_RUN_STATES))).scalars())
            if jobs:
                self._fail_lost(conn, touched, jobs, "lease expired", "lease_expired", now)
            return jobs

    # --- scheduling -----------------------------------------------------------------------

    def scheduling_state(self, *, executor_timeout: float,
                         now: datetime | None = None) -> SchedulingState:
        now = now or self.clock()
        cutoff = now - timedelta(seconds=executor_timeout)
        with self._read() as conn:
            queues = [submit_pb2.Queue.FromString(r.spec) for r in conn.execute(
                select(t.queues.c.spec).order_by(t.queues.c.name))]
            executors = [ExecutorNodes(r.id, r.pool, decode_nodes(r.nodes)) for r in
                         conn.execute(select(t.executors).where(
                             t.executors.c.last_seen >= cutoff).order_by(t.executors.c.id))]
            cols = (t.jobs.c.id, t.jobs.c.queue, t.jobs.c.priority, t.jobs.c.submitted_at,
                    t.jobs.c.spec)
            queued = [QueuedJob(r.id, r.queue, r.priority, _aware(r.submitted_at),
                                submit_pb2.Job.FromString(r.spec), r.avoid_node)
                      for r in conn.execute(select(*cols, t.jobs.c.avoid_node).where(
                          t.jobs.c.state == int(JobState.QUEUED),
                          or_(t.jobs.c.retry_after.is_(None), t.jobs.c.retry_after <= now))
                          .order_by(t.jobs.c.id))]
            running = [RunningJob(r.id, r.queue, r.priority, _aware(r.submitted_at),
                                  submit_pb2.Job.FromString(r.spec),
                                  f"{r.cluster_id}/{r.node}", _aware(r.started_at))
                       for r in conn.execute(
                           select(*cols, t.runs.c.cluster_id, t.runs.c.node,
                                  t.runs.c.started_at)
                           .join(t.runs, and_(t.runs.c.job_id == t.jobs.c.id,
                                              t.runs.c.state.in_(ACTIVE_RUN_STATES)))
                           .where(t.jobs.c.state.in_([int(JobState.LEASED),
                                                      int(JobState.PENDING),
                                                      int(JobState.RUNNING)]))
                           .order_by(t.jobs.c.id))]
        return SchedulingState(queues, executors, queued, running)

    def apply_schedule(self, *, scheduled: Mapping[str, tuple[str, str, str]],
                       preempted: Iterable[str], failed: Mapping[str, str],
                       reasons: Mapping[str, str], now: datetime | None = None) -> int:
        """Write one cycle's decisions: leases (job -> executor, node, pool), preemption
        requests, failures, and why the rest stayed queued. Jobs that changed since the
        snapshot (e.g. cancelled meanwhile) are left alone. Returns the leases made."""
        now = now or self.clock()
        leased = 0
        with self._write() as (conn, touched):
            ids = [*scheduled, *preempted, *failed]
            jobs = {}
            for i in range(0, len(ids), 500):
                jobs.update({j.id: j for j in self._load_jobs(
                    conn, t.jobs.c.id.in_(ids[i:i + 500]))})
            changes = []
            for job_id, (executor, node, pool) in scheduled.items():
                job = jobs.get(job_id)
                if job is None or job.state != JobState.QUEUED:
                    continue
                after, events = lifecycle.lease(job, run_id=new_run_id(), cluster_id=executor,
                                                node=node, pool=pool, now=now)
                changes.append((job, after, events))
                leased += 1
            for job_id in preempted:
                job = jobs.get(job_id)
                if job is None or job.active_run is None or job.preempt_requested:
                    continue
                after, events = lifecycle.request_preempt(
                    job, requestor="scheduler", reason="preempted by the scheduler", now=now)
                changes.append((job, after, events))
            for job_id, reason in failed.items():
                job = jobs.get(job_id)
                if job is None or job.state != JobState.QUEUED:
                    continue
                after, events = lifecycle.fail(job, Failure(reason=reason, category="internal",
                                                            subcategory="unschedulable",
                                                            condition="Unschedulable"),
                                               retry=False, now=now)
                changes.append((job, after, events))
            self._save(conn, touched, changes)
            if scheduled:
                conn.execute(update(t.jobs).where(t.jobs.c.id.in_(list(scheduled))).values(
                    scheduling_reason=""))
            for reason, group in _group(reasons).items():
                for i in range(0, len(group), 500):
                    conn.execute(update(t.jobs).where(
                        t.jobs.c.id.in_(group[i:i + 500]),
                        t.jobs.c.scheduling_reason != reason).values(scheduling_reason=reason))
        return leased


def _group(reasons: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for job_id, reason in reasons.items():
        out.setdefault(reason, []).append(job_id)
    return out
