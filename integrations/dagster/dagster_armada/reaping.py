"""The reaper's Dagster adapter (armada_core.client.lifecycle.reaping) as a sensor:
`armada_reaper_sensor` cancels the live Armada jobs of runs that ended, or were deleted, behind
the integration's back.

A run marked failed while its run worker goes on, deleted, or whose run worker died without a
retry tells no step: its jobs would run on. Each tick, the sensor lists the live jobs of
Dagster tasks in the resource's queue and reads their runs (a job's attempt names its run:
`<run id>/<retry>` for a step's job, the run id for `ArmadaRunLauncher`'s) from the instance
the daemon runs it with. A run that ended (SUCCESS, FAILURE, CANCELED) at least
`SETTLE_SECONDS` ago, or that the instance no longer has, has its jobs cancelled on the next
tick that finds it so; a failed run that Dagster's run retries take over is judged by its last
retry (`DagsterRunStates`), and only the jobs this instance submitted are judged. The cursor
keeps what awaits that confirmation and the counters; the tick's skip message says what it
did and, when the run storage could not be read, that nothing was cancelled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)
from dagster._core.events import RunFailureReason
from dagster._core.execution.retries import auto_reexecution_should_retry_run
from dagster._core.storage.dagster_run import DagsterRun, RunRecord
from dagster._core.storage.tags import (
    AUTO_RETRY_RUN_ID_TAG,
    RUN_FAILURE_REASON_TAG,
    WILL_RETRY_TAG,
)

from armada_core.client.errors import Unavailable
from armada_core.client.lifecycle.reaping import (
    DEFAULT_INTERVAL,
    Counters,
    OrchestratorUnreachable,
    Reaper,
    Round,
    TaskJob,
    TaskState,
    ended,
    running,
    settled,
)

from .instance_id import INSTANCE_ANNOTATION, instance_digest
from .job import ORCHESTRATOR
from .resource import ArmadaResource

log = logging.getLogger("dagster_armada.reaper")

FINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}

#: How long a failed run that Dagster says it will retry may wait for its retry to be launched
#: before its jobs count as orphans (the run retry daemon may be down).
RETRY_WAIT_SECONDS = 300.0

#: Longest chain of retries followed (a guard against a cycle in corrupt run storage).
_MAX_RETRIES_FOLLOWED = 100


def run_of(job: TaskJob) -> str:
    """The run a job's attempt works for."""
    return job.attempt.split("/", 1)[0]


def _end_time(record: RunRecord) -> datetime | None:
    end = record.end_time
    return datetime.fromtimestamp(end, UTC) if end is not None else None


def _will_retry(instance: DagsterInstance, run: DagsterRun) -> bool:
    """Whether Dagster's run retries will re-execute a failed run: its `dagster/will_retry`
    tag, or, before the daemon set it, the daemon's own rule."""
    tag = run.tags.get(WILL_RETRY_TAG)
    if tag is not None:
        return tag.lower() == "true"
    reason = run.tags.get(RUN_FAILURE_REASON_TAG)
    try:
        return auto_reexecution_should_retry_run(
            instance, run, RunFailureReason(reason) if reason else None
        )
    except Exception:  # an unreadable tag or run group: no retry to wait for
        return False


class DagsterRunStates:
    """Each job's run through the instance (`reaping.TaskStates`).

    Only jobs this instance submitted (`INSTANCE_ANNOTATION`) are judged: another instance's
    runs are missing here. A job without the stamp (submitted before it existed) counts only
    when its run is found and ended. A failed run that Dagster's run retries re-execute is
    continued by its retry, whose step reattaches to or replaces the job: the job is over when
    the last retry of the chain ended, or when a retry announced never came.
    """

    orchestrator = ORCHESTRATOR

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance = instance
        self.digest = instance_digest(instance)

    def _records(self, run_ids: Sequence[str]) -> dict[str, RunRecord]:
        if not run_ids:
            return {}
        try:
            found = self.instance.get_run_records(RunsFilter(run_ids=list(run_ids)))
        except Exception as e:  # the run storage (its database) cannot be read
            raise OrchestratorUnreachable(f"Dagster run storage: {e}") from None
        return {r.dagster_run.run_id: r for r in found}

    def _ended(self, subject: str, record: RunRecord) -> TaskState:
        """The state of a run in a final status, following its retries."""
        first, status = record.dagster_run.run_id, record.dagster_run.status.value
        for _ in range(_MAX_RETRIES_FOLLOWED):
            run = record.dagster_run
            retry_id = run.tags.get(AUTO_RETRY_RUN_ID_TAG)
            if run.status is DagsterRunStatus.FAILURE and retry_id:
                retry = self._records([retry_id]).get(retry_id)
                if retry is None:
                    return ended(subject, f"{status}, its retry {retry_id} deleted")
                record = retry
                if retry.dagster_run.status not in FINAL:
                    retrying = retry.dagster_run.status.value
                    return running(subject, f"{status}, its retry {retry_id} is {retrying}")
                continue
            if run.status is DagsterRunStatus.FAILURE and _will_retry(self.instance, run):
                if settled(_end_time(record), wait=RETRY_WAIT_SECONDS):
                    return ended(subject, f"{status}, its retry never launched")
                return running(subject, f"{status}, to be retried")
            break
        last = record.dagster_run
        said = status
        if last.run_id != first:
            said = f"{status}, its retry {last.run_id} is {last.status.value}"
        if settled(_end_time(record)):
            return ended(subject, said)
        return running(subject, f"{said}, its run worker exiting")

    def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:
        mine = [
            j for j in jobs if j.annotations.get(INSTANCE_ANNOTATION, self.digest) == self.digest
        ]
        records = self._records(sorted({run_of(j) for j in mine if run_of(j)}))
        out: dict[tuple[str, str], TaskState] = {}
        for job in mine:
            run_id = run_of(job)
            if not run_id:
                continue  # not a run's job: unknown
            subject = f"dagster run {run_id}"
            record = records.get(run_id)
            if record is None:
                if INSTANCE_ANNOTATION in job.annotations:
                    out[job.key] = ended(subject, "deleted")
                continue  # unstamped: perhaps another instance's run
            if record.dagster_run.status in FINAL:
                out[job.key] = self._ended(subject, record)
            else:
                out[job.key] = running(subject, record.dagster_run.status.value)
        return out


def _load(cursor: str | None) -> tuple[dict[str, str], Counters]:
    if not cursor:
        return {}, Counters()
    saved = json.loads(cursor)
    return dict(saved.get("pending", {})), Counters(**saved.get("counters", {}))


def _said(done: Round, counters: Counters) -> str:
    totals = f"(in all: {counters.cancelled} cancelled, {counters.unreachable} rounds unreachable)"
    if done.unreachable:
        return f"Run storage unreachable, no job cancelled: {done.unreachable} {totals}"
    return (
        f"{done.listed} live Armada jobs of Dagster runs; cancelled {len(done.cancelled)}, "
        f"{done.pending} to confirm next tick {totals}"
    )


def armada_reaper_sensor(
    *,
    resource_key: str = "armada",
    queue: str | None = None,
    name: str = "armada_reaper",
    minimum_interval_seconds: int = int(DEFAULT_INTERVAL),
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> SensorDefinition:
    """A sensor that cancels the Armada jobs of ended or deleted runs, in `queue` (None: the
    queue of the `ArmadaResource` under `resource_key`, whose connection it uses; "": every
    queue the resource's credentials may watch); running by default once in your
    Definitions."""

    @sensor(
        name=name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys={resource_key},
        description="Cancels the Armada jobs of runs that ended or were deleted.",
    )
    def _reaper(context: SensorEvaluationContext) -> SkipReason:
        armada: ArmadaResource = getattr(context.resources, resource_key)
        pending, counters = _load(context.cursor)
        try:
            with armada.get_client() as client:
                reaper = Reaper(
                    client,
                    DagsterRunStates(context.instance),
                    queue=armada.queue if queue is None else queue,
                    pending=pending,
                )
                reaper.counters = counters
                done = reaper.reap_once()
        except Unavailable as e:
            # Armada itself is away (restarting): nothing is decided, the cursor stays.
            context.log.warning(f"Armada unreachable, nothing reaped this tick: {e}")
            return SkipReason(f"Armada unreachable: {e}")
        context.update_cursor(
            json.dumps({"pending": reaper.pending, "counters": counters.as_dict()})
        )
        said = _said(done, counters)
        if done.unreachable:
            context.log.warning(said)
        for job_id, reason in done.cancelled:
            context.log.info(f"Cancelled Armada job {job_id}: {reason}")
        return SkipReason(said)

    return _reaper
