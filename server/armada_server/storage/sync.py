"""Executors syncing: their nodes and reports in, their work out, one transaction per sync.

A sync records the executor's nodes (renewing its leases), applies its reports of runs in
order (the plain pending, running and succeeded ones in bulk, `live_reports`; the rest through
`reports.apply_report`), restarts gangs a retried member belongs to, frees the nodes
of runs the executor let go of, and answers with the leases to start and the runs to stop.
Runs the executor no longer has, and leases too large to send, end here (`leases.Leases`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime

from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.exc import DBAPIError

from armada_core.api import executor_pb2
from armada_core.gcpause import gc_paused
from armada_core.jobs import Job, RunState, pod_name
from armada_core.jobs.lifecycle import EventMessage, IllegalTransition
from armada_core.jobs.text import clean_text
from armada_server.errors import InvalidArgument
from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_RUN_STATES, Change, JobSetKey, Transactions
from armada_server.storage.bulk import executemany, fetch
from armada_server.storage.executor_runs import ActiveRuns, ExecutorRuns
from armada_server.storage.gangs import restart_gangs
from armada_server.storage.guard import retried
from armada_server.storage.leases import Leases
from armada_server.storage.live_reports import LiveReports, apply_live, write_live
from armada_server.storage.nodes import encode_request_nodes
from armada_server.storage.reports import DECIDED_UPDATES, ENDED_UPDATES, apply_report
from armada_server.storage.retries import Catalogue
from armada_server.storage.rows import chunks, jobs_by_id

log = logging.getLogger("armada_server")

# New leases per sync response are capped by size, well under what the executor receives
# (SyncRequest.max_response_bytes; gRPC's default of 4 MiB when it does not say): a response
# carrying 80,000 leases (30 MB) was refused by an executor, every time, so it never got any.
# The rest follow on the next syncs (the agent syncs again at once when it got leases).
GRPC_DEFAULT_LIMIT = 4 * 1024 * 1024
# At most this much whatever the executor receives: handing out a lease reads its spec inside
# the sync's transaction, and the executor starts them all before its next sync.
MAX_LEASE_BYTES = 16 * 1024 * 1024
_LEASED = int(RunState.LEASED)
# An executor's row renewed where its nodes are those stored (a sync's first statement).
# Statements built once (SQLAlchemy works out a statement's cache key once per object).
_RUNS_BY_ID = select(t.runs.c.id, t.runs.c.job_id, t.runs.c.cluster_id, t.runs.c.state).where(
    t.runs.c.id.in_(bindparam("ids", expanding=True))
)
_LEASES_BY_RUN = (
    select(t.runs.c.id, t.runs.c.job_id, t.runs.c.run_index, t.runs.c.node, t.jobs.c.spec)
    .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
    .where(t.runs.c.id.in_(bindparam("ids", expanding=True)), t.runs.c.state == _LEASED)
)
_RENEW_EXECUTOR = update(t.executors).where(
    t.executors.c.id == bindparam("_id"), t.executors.c.nodes == bindparam("_nodes")
)


# The least an executor may say it receives: a lease carries a whole job, of up to 1 MiB.
MIN_RESPONSE_BYTES = 2 * 1024 * 1024


def lease_budget(max_response_bytes: int) -> int:
    """The bytes of leases one response may carry to an executor that receives
    `max_response_bytes` (0: it never said): three quarters of it, the rest left for the runs
    to stop."""
    return min(MAX_LEASE_BYTES, (max_response_bytes or GRPC_DEFAULT_LIMIT) * 3 // 4)


def _first_line(error: Exception) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return clean_text(text.splitlines()[0] if text else type(error).__name__, 500)


class ExecutorSync:
    """The executor API's storage: one call per sync."""

    def __init__(self, transactions: Transactions, leases: Leases) -> None:
        self._tx = transactions
        self._leases = leases
        self.runs = ExecutorRuns()

    def executor_sync(
        self,
        request: executor_pb2.SyncRequest,
        *,
        now: datetime | None = None,
        nodes: bytes | None = None,
        held: AbstractSet[str] | None = None,
    ) -> executor_pb2.SyncResponse:
        """Record the executor's nodes and run updates, renew its leases, hand out work.
        `nodes` is `encode_request_nodes(request)` and `held` is `set(request.run_ids)` when
        the caller has them already (an executor in the same process: the runs it holds are
        its largest part, read from the message every sync).

        No report can stop an executor's syncs: when the database refuses a sync's
        transaction (a value it cannot store), its reports are applied one per transaction,
        and a job whose report still cannot be stored is failed with a reason saying why."""
        now = now or self._tx.clock()
        nodes = encode_request_nodes(request) if nodes is None else nodes
        held = set(request.run_ids) if held is None else held
        try:
            return self._sync(request, request.updates, nodes, held, now)
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
                self._sync(request, [u], nodes, held, now, hand_out=False)
            except (InvalidArgument, DBAPIError) as e:
                self._refuse_report(request.executor_id, u, e, now)
        return self._sync(request, [], nodes, held, now)

    @retried
    def _sync(
        self,
        request: executor_pb2.SyncRequest,
        updates: Sequence[executor_pb2.RunUpdate],
        nodes: bytes,
        held: AbstractSet[str],
        now: datetime,
        *,
        hand_out: bool = True,
    ) -> executor_pb2.SyncResponse:
        executor = request.executor_id
        with self.runs.held(executor) as runs, gc_paused(), self._tx.write() as (conn, touched):
            self._record_executor(conn, request, nodes, now)
            live = apply_live(conn, executor, updates, now)
            write_live(conn, live)
            changes, events, confirmed = self._apply_reports(conn, executor, updates, live, now)
            restarts, more = restart_gangs(conn, changes, now)
            self._tx.save_many(
                conn, touched, changes + restarts, events + more, confirmed=confirmed
            )
            self._leases.release(conn, executor, held)
            if not hand_out:
                return executor_pb2.SyncResponse()
            active = runs.read(conn, executor)
            updated = {u.run_id for u in request.updates}
            budget = lease_budget(request.max_response_bytes)
            return self._work_for(conn, touched, executor, active, held, updated, budget, now)

    def _record_executor(
        self, conn: Connection, request: executor_pb2.SyncRequest, nodes: bytes, now: datetime
    ) -> None:
        """The executor's row: its pool, nodes, capabilities and when it was last seen (which
        renews its leases)."""
        executor = request.executor_id
        # Nodes rarely change between syncs: renew the row without rewriting them (a
        # megabyte for 10,000 nodes) when they are what is stored.
        # What the executor can honour (None: it never said), read by submissions.
        capabilities = (
            request.capabilities.SerializeToString() if request.HasField("capabilities") else None
        )
        renew = {
            "_id": executor,
            "_nodes": nodes,
            "pool": request.pool,
            "last_seen": now,
            "capabilities": capabilities,
        }
        if not executemany(conn, _RENEW_EXECUTOR, [renew]):
            row = {
                "pool": request.pool,
                "nodes": nodes,
                "last_seen": now,
                "capabilities": capabilities,
            }
            stmt = self._tx.insert(t.executors).values(id=executor, **row)
            conn.execute(stmt.on_conflict_do_update(index_elements=[t.executors.c.id], set_=row))

    def _apply_reports(
        self,
        conn: Connection,
        executor: str,
        updates: Sequence[executor_pb2.RunUpdate],
        live: LiveReports,
        now: datetime,
    ) -> tuple[list[Change], list[EventMessage], set[str]]:
        """The changes the executor's reports make, their events in report order (those of
        `live`, applied in bulk, in their places), and the runs the executor says ended.
        Every other job the updates name is read at once; updates apply in order to the job
        as the previous ones left it (running and succeeded may arrive in one sync)."""
        catalogue: Catalogue | None = None
        bulk = live.job_ids
        jobs = jobs_by_id(conn, {u.job_id for u in updates if u.job_id not in bulk})
        before: dict[str, Job] = {}
        events: list[EventMessage] = []
        confirmed: set[str] = set()  # runs whose executor says they ended
        for i, u in enumerate(updates):
            if (event := live.events.get(i)) is not None:
                events.append(event)
                continue
            kind = u.WhichOneof("update")
            job = jobs.get(u.job_id)
            run = job.latest_run if job is not None else None
            if job is None or run is None or run.id != u.run_id or run.cluster_id != executor:
                log.info("ignoring %s for unknown run %s", kind, u.run_id)
                continue
            if kind in ENDED_UPDATES:
                confirmed.add(u.run_id)
            if catalogue is None and kind in DECIDED_UPDATES:
                catalogue = Catalogue.load(conn)
            try:
                after, more = apply_report(conn, self._leases.retries, catalogue, job, u, now)
            except IllegalTransition as e:
                log.info("ignoring %s for run %s: %s", kind, u.run_id, e)
                continue
            except DBAPIError:
                raise  # the database aborted the transaction: all of it is tried again
            except Exception as e:  # one job's report must not stop the executor
                after, more = self._leases.isolate(
                    job,
                    "executor report",
                    f"the executor's {kind} report could not be processed",
                    e,
                    now,
                )
            before.setdefault(job.id, job)
            jobs[job.id] = after
            events.extend(more)
        changes: list[Change] = [(job, jobs[job_id], []) for job_id, job in before.items()]
        return changes, events, confirmed

    def _refuse_report(
        self, executor: str, u: executor_pb2.RunUpdate, error: Exception, now: datetime
    ) -> None:
        """A report the database refuses even alone: its job fails, saying why (the executor
        never sends it again, and the run would otherwise be lost track of)."""
        kind = u.WhichOneof("update")
        self._leases.isolated_failures["executor report"] += 1
        log.error(
            "executor %s: the %s report of run %s cannot be stored: %s",
            executor,
            kind,
            u.run_id,
            _first_line(error),
        )
        reason = f"the executor's {kind} report could not be stored: {_first_line(error)}"
        try:
            self._leases.fail_now(
                {u.job_id: reason},
                "server_error",
                lambda job: job.active_run is not None and job.active_run.id == u.run_id,
                now,
            )
        except Exception:
            log.exception("job %s: could not fail it either", u.job_id)

    # --- work out ---------------------------------------------------------------------------

    def _work_for(
        self,
        conn: Connection,
        touched: set[JobSetKey],
        executor: str,
        active: ActiveRuns,
        held: AbstractSet[str],
        updated: set[str],
        budget: int,
        now: datetime,
    ) -> executor_pb2.SyncResponse:
        """What the executor is to do: leases to start (up to `budget` bytes of them), runs
        to stop. Runs it no longer has (started, not held, not reported on) fail as pods
        missing. `active` is what the replica holds of the executor's runs: each run found
        lost or gone is checked against the database before anything is done to it."""
        response = executor_pb2.SyncResponse()
        for run_id, job_id in active.preempting.items():
            if run_id in held:
                response.stop.add(run_id=run_id, job_id=job_id, reason="preempted", preempt=True)
        not_held = active.started - held  # a pass over thousands of runs: taken once
        found = _runs_of(conn, executor, sorted(not_held - updated))
        lost = [job for job, active_here in found.values() if active_here]
        new = [r for r in active.leased if r not in held]
        unsendable = _hand_out(conn, response, new, budget)
        # Started and leased runs are apart: the executor holds a run storage has not as
        # active only when it holds more than the two it was found holding. Most syncs
        # hold none such, and the pass over what it holds is spared.
        known = len(active.started) - len(not_held) + len(active.leased) - len(new)
        if len(held) > known:
            _stop_gone(
                conn, executor, response, sorted(held - active.started - active.leased.keys())
            )
        if lost:
            self._leases.fail_lost(
                conn, touched, lost, "the executor no longer has the pod", "pod_missing", now
            )
        if unsendable:
            # Never sent, so the executor holds nothing of them.
            self._leases.isolated_failures["lease"] += self._leases.fail_alone(
                conn,
                touched,
                unsendable,
                "unsendable",
                lambda job: job.active_run is not None,
                now,
                confirmed=True,
            )
        return response


def _runs_of(conn: Connection, executor: str, run_ids: list[str]) -> dict[str, tuple[str, bool]]:
    """Run -> (its job, whether it is active on the executor) for those of `run_ids` the
    database has: what a sync checks before failing or stopping a run it did not read."""
    found: dict[str, tuple[str, bool]] = {}
    for chunk in chunks(run_ids, 500):
        rows = fetch(conn, _RUNS_BY_ID, {"ids": chunk})
        for run_id, job_id, cluster, state in rows:
            found[run_id] = (job_id, cluster == executor and state in ACTIVE_RUN_STATES)
    return found


def _hand_out(
    conn: Connection, response: executor_pb2.SyncResponse, new: list[str], budget: int
) -> dict[str, str]:
    """Add the leases of the runs `new` to `response`, in order, as long as they fit in
    `budget` bytes; returns the jobs too large to ever fit (job id -> why)."""
    size = 0
    unsendable: dict[str, str] = {}
    for chunk in chunks(new, 500):
        rows = {r[0]: r for r in fetch(conn, _LEASES_BY_RUN, {"ids": chunk})}
        for run_id in chunk:
            if run_id not in rows:
                continue  # no longer leased: the executor's next sync knows it
            _, job_id, run_index, node, spec = rows[run_id]
            cost = len(spec) + len(node) + 100  # the run id, pod name and framing: under 100
            if cost > budget:
                unsendable[job_id] = (  # it would never fit in a response
                    f"the job ({len(spec)} bytes) is larger than the executor protocol "
                    f"can carry to its executor ({budget} bytes)"
                )
                continue
            if size + cost > budget:
                return unsendable  # the rest go in the next responses
            size += cost
            lease = response.leases.add(
                run_id=run_id,
                run_index=run_index,
                node=node,
                pod_name=pod_name(job_id, run_index),
            )
            lease.job.MergeFromString(spec)
    return unsendable


def _stop_gone(
    conn: Connection, executor: str, response: executor_pb2.SyncResponse, gone: list[str]
) -> None:
    """Tell the executor to stop the runs it holds that are no longer active."""
    found = _runs_of(conn, executor, gone)
    for run_id in gone:
        job_id, active_here = found.get(run_id, ("", False))
        if active_here:
            continue
        response.stop.add(
            run_id=run_id,
            job_id=job_id,
            reason="the run is no longer active",
            preempt=False,
        )
