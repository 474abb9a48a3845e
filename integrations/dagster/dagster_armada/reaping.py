"""The reaper's Dagster adapter (armada_core.client.lifecycle.reaping) as a sensor:
`armada_reaper_sensor` cancels the live Armada jobs of runs that ended, or were deleted, behind
the integration's back.

A run marked failed while its run worker goes on, deleted, or whose run worker died without a
retry tells no step: its jobs would run on. Each tick, the sensor lists the live jobs of
Dagster tasks in the resource's queue and reads their runs (a job's attempt names its run:
`<run id>/<retry>` for a step's job, the run id for `ArmadaRunLauncher`'s) from the instance
the daemon runs it with. A run that ended (SUCCESS, FAILURE, CANCELED) at least
`SETTLE_SECONDS` ago, or that the instance no longer has, has its jobs cancelled on the next
tick that finds it so. The cursor keeps what awaits that confirmation and the counters; the
tick's skip message says what it did and, when the run storage could not be read, that
nothing was cancelled.
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

from .job import ORCHESTRATOR
from .resource import ArmadaResource

log = logging.getLogger("dagster_armada.reaper")

FINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def run_of(job: TaskJob) -> str:
    """The run a job's attempt works for."""
    return job.attempt.split("/", 1)[0]


class DagsterRunStates:
    """Each job's run through the instance (`reaping.TaskStates`)."""

    orchestrator = ORCHESTRATOR

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance = instance

    def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:
        run_ids = sorted({run_of(j) for j in jobs if run_of(j)})
        try:
            records = {
                r.dagster_run.run_id: r
                for r in self.instance.get_run_records(RunsFilter(run_ids=run_ids))
            }
        except Exception as e:  # the run storage (its database) cannot be read
            raise OrchestratorUnreachable(f"Dagster run storage: {e}") from None
        out: dict[tuple[str, str], TaskState] = {}
        for job in jobs:
            run_id = run_of(job)
            if not run_id:
                continue  # not a run's job: unknown
            subject = f"dagster run {run_id}"
            record = records.get(run_id)
            if record is None:
                out[job.key] = ended(subject, "deleted")
                continue
            status = record.dagster_run.status
            if status in FINAL:
                end = record.end_time
                at = datetime.fromtimestamp(end, UTC) if end is not None else None
                out[job.key] = (
                    ended(subject, status.value)
                    if settled(at)
                    else running(subject, f"{status.value}, its run worker exiting")
                )
            else:
                out[job.key] = running(subject, status.value)
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
        with armada.get_client() as client:
            reaper = Reaper(
                client,
                DagsterRunStates(context.instance),
                queue=armada.queue if queue is None else queue,
                pending=pending,
            )
            reaper.counters = counters
            done = reaper.reap_once()
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
