"""Jobs: status, details, errors and runs of jobs."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from google.protobuf.timestamp_pb2 import Timestamp

from armada_core.api import job_pb2, job_pb2_grpc, submit_pb2
from armada_core.jobs import Job, JobState, Run
from armada_server.errors import InvalidArgument
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc
from armada_server.shares import RecentShares, Sample, place_in_fair_share, place_in_line
from armada_server.storage.places import Lines

log = logging.getLogger("armada_server")


def _timestamp(when: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(when)
    return ts


def _ts(when: datetime | None) -> Timestamp | None:
    return None if when is None else _timestamp(when)


def _state(state: JobState) -> submit_pb2.JobState.ValueType:
    return submit_pb2.JobState.ValueType(state)


def run_details(job_id: str, run: Run, *, stopping: bool = False) -> job_pb2.JobRunDetails:
    """A run as the API shows it; a run still `stopping` (ended by the server, its processes
    not yet confirmed gone) has no finished time yet, so a client can wait for its end."""
    return job_pb2.JobRunDetails(
        run_id=run.id,
        job_id=job_id,
        state=job_pb2.JobRunState.ValueType(run.state),
        cluster=run.cluster_id,
        node=run.node,
        leased_ts=_ts(run.leased_at),
        pending_ts=_ts(run.pending_at),
        started_ts=_ts(run.started_at),
        finished_ts=None if stopping else _ts(run.finished_at),
    )


def storable(ids: Iterable[str]) -> list[str]:
    """The ids that could name something stored: text with NUL never does (and PostgreSQL
    refuses it even in a query), so such ids are simply unknown."""
    return [i for i in ids if "\x00" not in i]


def job_error(job: Job) -> str:
    """What went wrong, for a failed or rejected job: reason, then each failed container."""
    if job.state not in (JobState.FAILED, JobState.REJECTED):
        return ""
    parts = [job.failure_reason] if job.failure_reason else []
    run = job.latest_run
    if run is not None:
        for c in run.containers:
            if c.exit_code != 0:
                text = f"container {c.name} exited with code {c.exit_code}"
                if c.message:
                    text += f": {c.message}"
                if text not in job.failure_reason:  # executors often say it in the reason
                    parts.append(text)
        if run.category:
            parts.append(
                f"category {run.category}" + (f"/{run.subcategory}" if run.subcategory else "")
            )
    return "; ".join(parts) or "failed"


class JobsService(job_pb2_grpc.JobsServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # Where the queue of a waiting job stands, said after the scheduler's reason: read
        # when asked (the stored reason changes only with the scheduler's), a few seconds old.
        self.shares = RecentShares(ctx.cycle_reports, ctx.queues)

    async def _shares(self) -> Sample | None:
        try:
            return await self.ctx.run(self.shares.get)
        except Exception:
            log.exception("fair shares unavailable; job details say the scheduler's reason only")
            return None

    async def _places(self, job_ids: list[str]) -> Lines:
        """Waiting jobs' places in their queues' lines and the lines' lengths, read now
        (they move every cycle)."""
        classes = {c.name: c.priority for c in self.ctx.config.priority_classes}
        try:
            return await self.ctx.run(self.ctx.places.queue_places, job_ids, classes)
        except Exception:
            log.exception("places in line unavailable; job details leave them out")
            return Lines({}, {})

    @rpc
    async def GetJobStatus(
        self, request: job_pb2.JobStatusRequest, context: RpcContext
    ) -> job_pb2.JobStatusResponse:
        states = await self.ctx.run(self.ctx.job_reads.job_states, storable(request.job_ids))
        unknown = dict.fromkeys(request.job_ids, JobState.UNKNOWN)
        return job_pb2.JobStatusResponse(
            job_states={k: _state(v) for k, v in {**unknown, **states}.items()}
        )

    @rpc
    async def GetJobStatusUsingExternalJobUri(
        self, request: job_pb2.JobStatusUsingExternalJobUriRequest, context: RpcContext
    ) -> job_pb2.JobStatusResponse:
        if not (request.queue and request.jobset and request.external_job_uri):
            raise InvalidArgument("queue, jobset and external_job_uri are required")
        if len(storable([request.queue, request.jobset, request.external_job_uri])) < 3:
            return job_pb2.JobStatusResponse()  # nothing stored has NUL characters
        ids = await self.ctx.run(
            self.ctx.job_reads.job_ids_by_external_uri,
            request.queue,
            request.jobset,
            request.external_job_uri,
        )
        states = await self.ctx.run(self.ctx.job_reads.job_states, ids)
        return job_pb2.JobStatusResponse(job_states={k: _state(v) for k, v in states.items()})

    async def _stopping(self, runs: list[Run]) -> set[str]:
        """Which of `runs` that ended are still stopping (see `run_details`)."""
        ended = [r.id for r in runs if r.finished_at is not None]
        return await self.ctx.run(self.ctx.job_reads.stopping_runs, ended) if ended else set()

    async def waiting_reasons(self, jobs: list[Job]) -> dict[str, str]:
        """Why each job waits: the scheduler's stored reason and, for a queued job, where
        its queue stands and its place in the queue's line (both read now). One text for
        GetJobDetails and the web UI's job page."""
        reasons = await self.ctx.run(self.ctx.job_reads.scheduling_reasons, [j.id for j in jobs])
        waiting = [j for j in jobs if j.state == JobState.QUEUED and reasons.get(j.id)]
        sample = await self._shares() if waiting else None
        if sample is None:
            return reasons
        lines = await self._places([j.id for j in waiting])
        for job in waiting:
            reasons[job.id] += f"; {place_in_fair_share(sample, job.queue)}"
            if job.id in lines.places:
                place = lines.places[job.id]
                reasons[job.id] += f"; {place_in_line(place, lines.lengths[job.queue])}"
        return reasons

    @rpc
    async def GetJobDetails(
        self, request: job_pb2.JobDetailsRequest, context: RpcContext
    ) -> job_pb2.JobDetailsResponse:
        jobs = await self.ctx.run(self.ctx.job_reads.jobs, storable(request.job_ids))
        reasons = await self.waiting_reasons(jobs)
        stopping = (
            await self._stopping([r for job in jobs for r in job.runs])
            if request.expand_job_run
            else set()
        )
        out = job_pb2.JobDetailsResponse()
        for job in jobs:
            d = out.job_details[job.id]
            d.job_id = job.id
            d.queue = job.queue
            d.jobset = job.job_set
            d.namespace = job.spec.namespace
            d.state = _state(job.state)
            d.submitted_ts.CopyFrom(_timestamp(job.submitted_at))
            d.last_transition_ts.CopyFrom(_timestamp(job.last_transition_at))
            if job.cancelled_at is not None:
                d.cancel_ts.CopyFrom(_timestamp(job.cancelled_at))
            d.cancel_reason = job.cancel_reason
            d.cancel_user = job.cancel_user
            d.scheduling_reason = reasons.get(job.id, "")
            if job.latest_run is not None:
                d.latest_run_id = job.latest_run.id
            if request.expand_job_spec:
                d.job_spec.CopyFrom(job.spec)
            if request.expand_job_run:
                d.job_runs.extend(
                    run_details(job.id, r, stopping=r.id in stopping) for r in job.runs
                )
        return out

    @rpc
    async def GetJobErrors(
        self, request: job_pb2.JobErrorsRequest, context: RpcContext
    ) -> job_pb2.JobErrorsResponse:
        jobs = await self.ctx.run(self.ctx.job_reads.jobs, storable(request.job_ids))
        found = {job.id: job_error(job) for job in jobs}
        return job_pb2.JobErrorsResponse(job_errors={j: found.get(j, "") for j in request.job_ids})

    @rpc
    async def GetJobRunDetails(
        self, request: job_pb2.JobRunDetailsRequest, context: RpcContext
    ) -> job_pb2.JobRunDetailsResponse:
        runs = await self.ctx.run(self.ctx.job_reads.runs, storable(request.run_ids))
        stopping = await self._stopping([run for _, run in runs])
        out = job_pb2.JobRunDetailsResponse()
        for job_id, run in runs:
            out.job_run_details[run.id].CopyFrom(
                run_details(job_id, run, stopping=run.id in stopping)
            )
        return out

    @rpc
    async def GetActiveQueues(
        self, request: job_pb2.GetActiveQueuesRequest, context: RpcContext
    ) -> job_pb2.GetActiveQueuesResponse:
        active = await self.ctx.run(self.ctx.job_reads.active_queues)
        return job_pb2.GetActiveQueuesResponse(
            active_queues_by_pool={
                pool: job_pb2.ActiveQueues(queues=queues) for pool, queues in active.items()
            }
        )
