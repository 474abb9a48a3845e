"""Reading jobs and runs: their states, details, the queues they are active in, and counts
(the job API, the web UI and the metrics)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import Engine, func, select

from armada_core.jobs import Job, JobState, Run, RunState
from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_JOB_STATES, ACTIVE_RUN_STATES, Transactions
from armada_server.storage.bulk import fetch
from armada_server.storage.rows import RUN_COLUMNS, chunks, load_jobs, run_from_row

#: Jobs that may still run: submitted, waiting, or placed.
LIVE_JOB_STATES = (JobState.SUBMITTED, JobState.QUEUED, *ACTIVE_JOB_STATES)


class JobReads:
    """Read-only views of jobs, each call one read transaction."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    @property
    def engine(self) -> Engine:
        """The database, for the read-only queries the web UI runs itself (web/queries.py)."""
        return self._tx.engine

    def job_states(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        found: dict[str, JobState] = {}
        with self._tx.read() as conn:
            for chunk in chunks(list(job_ids), 500):
                rows: Iterable[tuple[str, int]] = conn.execute(
                    select(t.jobs.c.id, t.jobs.c.state).where(t.jobs.c.id.in_(chunk))
                )
                for job_id, state in rows:
                    found[job_id] = JobState(state)
        return {j: found.get(j, JobState.UNKNOWN) for j in job_ids}

    def scheduling_reasons(self, job_ids: Sequence[str]) -> dict[str, str]:
        """Why each queued job was not scheduled in the latest cycle (absent: no reason)."""
        out: dict[str, str] = {}
        with self._tx.read() as conn:
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
        with self._tx.read() as conn:
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

    def live_task_jobs(
        self, queues: Sequence[str], uri_prefix: str
    ) -> list[tuple[str, str, str, JobState, str, bytes]]:
        """(id, queue, job set, state, external job URI, spec) of the live jobs of `queues`
        whose external job URI starts with `uri_prefix`, by id: what a task reconciler
        checks (through the (state, queue) index; only live jobs' specs are read)."""
        escaped = uri_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        out: list[tuple[str, str, str, JobState, str, bytes]] = []
        with self._tx.read() as conn:
            for chunk in chunks(list(queues), 500):
                rows = conn.execute(
                    select(
                        t.jobs.c.id,
                        t.jobs.c.queue,
                        t.jobs.c.job_set,
                        t.jobs.c.state,
                        t.jobs.c.external_job_uri,
                        t.jobs.c.spec,
                    )
                    .where(
                        t.jobs.c.state.in_([int(s) for s in LIVE_JOB_STATES]),
                        t.jobs.c.queue.in_(chunk),
                        t.jobs.c.external_job_uri.like(f"{escaped}%", escape="\\"),
                    )
                    .order_by(t.jobs.c.id)
                ).all()
                out += [
                    (r.id, r.queue, r.job_set, JobState(r.state), r.external_job_uri, r.spec)
                    for r in rows
                ]
        return sorted(out)

    def jobs(self, job_ids: Sequence[str]) -> list[Job]:
        with self._tx.read() as conn:
            out: list[Job] = []
            for chunk in chunks(list(job_ids), 500):
                out += load_jobs(conn, t.jobs.c.id.in_(chunk))
        return out

    def runs(self, run_ids: Sequence[str]) -> list[tuple[str, Run]]:
        """The runs of `run_ids` found, each with its job's id."""
        with self._tx.read() as conn:
            out: list[tuple[str, Run]] = []
            for chunk in chunks(list(run_ids), 500):
                out += [
                    (r[0], run_from_row(r))
                    for r in fetch(conn, select(*RUN_COLUMNS).where(t.runs.c.id.in_(chunk)))
                ]
        return out

    def run_preemptions(self, job_id: str) -> dict[str, tuple[str, str]]:
        """The job's runs a preemption was asked for: run id -> (its kind, the job it made
        room for, "" when none), for the web UI's job page."""
        with self._tx.read() as conn:
            rows = conn.execute(
                select(t.runs.c.id, t.runs.c.preemption_kind, t.runs.c.preempting_job_id).where(
                    t.runs.c.job_id == job_id, t.runs.c.preemption_kind.is_not(None)
                )
            ).all()
        return {r.id: (r.preemption_kind, r.preempting_job_id or "") for r in rows}

    def stopping_runs(self, run_ids: Sequence[str]) -> set[str]:
        """Of `run_ids`, the runs the server ended (cancelled, restarted with their gang)
        whose processes may still be terminating: their executor has not confirmed the end
        and their grace period has not run out. Such a run has not finished yet. An expired
        lease is not among them: its executor has been silent for the lease timeout and is
        presumed gone with its pods (the local executor's pods kill themselves by then)."""
        now = self._tx.clock()
        out: set[str] = set()
        with self._tx.read() as conn:
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
        with self._tx.read() as conn:
            queued: Sequence[str] = (
                conn.execute(
                    select(t.jobs.c.queue).where(t.jobs.c.state == int(JobState.QUEUED)).distinct()
                )
                .scalars()
                .all()
            )
            running: Sequence[tuple[str, str]] = conn.execute(
                select(t.runs.c.pool, t.jobs.c.queue)
                .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
                .where(
                    t.jobs.c.state.in_([int(s) for s in ACTIVE_JOB_STATES]),
                    t.runs.c.state.in_(ACTIVE_RUN_STATES),
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
        with self._tx.read() as conn:
            rows: Sequence[tuple[str, int, int]] = conn.execute(
                select(t.jobs.c.queue, t.jobs.c.state, func.count()).group_by(
                    t.jobs.c.state, t.jobs.c.queue
                )
            ).all()  # the order of ix_jobs_state_queue
        return {(q, JobState(s)): n for q, s, n in rows}
