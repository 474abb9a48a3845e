"""The reconciler of ended tasks: cancels the live jobs of task attempts their orchestrator
says are over.

An integration cancels its jobs when the orchestrator tells it a task ended (a kill, a
timeout). When the orchestrator ends a task behind its back (an Airflow task marked failed
while no triggerer runs its trigger, a Prefect flow run forced to a final state while its
worker is dead, a Dagster run deleted), nobody is told and the jobs would run on. The reaper
lists the live jobs that carry a task identity (`identity.py`'s annotations, through the
server's `api.TaskJobs` extension service), asks the orchestrator about each task attempt through an
adapter of that orchestrator (`TaskStates`), and cancels the jobs of attempts that ended, with
a reason that names the task's state.

It errs towards leaving jobs alone: a task that runs, or that the orchestrator does not know
or cannot say (unknown, not yet created), keeps its jobs; an orchestrator that cannot be
reached has nothing cancelled, and the round says so (`Round.unreachable`, the reaper's
counters). A job is cancelled only when two rounds in a row found its task over (`confirmed`):
the integration's own cancellation, when it runs, comes first with its own reason, and a
state the orchestrator holds for a moment only is not acted on. Rounds are idempotent:
cancelled jobs are no longer live, so the next round does not see them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Protocol

from armada_core.api import tasks_pb2

from .identity import ATTEMPT_ANNOTATION, GENERATION_ANNOTATION, TASK_ANNOTATION

log = logging.getLogger("armada_core.reaper")

#: A job with this annotation set to "false" is never cancelled by the reaper: its task asked
#: that its jobs outlive a kill (Airflow's `cancel_on_kill=False`).
REAP_ANNOTATION = "armadaproject.io/task-reap"

#: How often the reapers the integrations run look, in seconds: a task that ended has its jobs
#: cancelled by the second round that sees it, within a minute.
DEFAULT_INTERVAL = 20.0


@dataclass(frozen=True)
class TaskJob:
    """A live job of a task attempt, as the server lists it."""

    job_id: str
    queue: str
    job_set_id: str
    state: int
    orchestrator: str
    task: str
    attempt: str
    generation: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """The task attempt the job works for."""
        return (self.task, self.attempt)

    @classmethod
    def from_proto(cls, job: tasks_pb2.LiveTaskJob) -> TaskJob | None:
        """None for a job without the lifecycle's annotations (submitted by other means)."""
        orchestrator, sep, _ = job.external_job_uri.partition("://")
        annotations = dict(job.annotations)
        if not sep or TASK_ANNOTATION not in annotations:
            return None
        generation = annotations.get(GENERATION_ANNOTATION, "0")
        return cls(
            job_id=job.job_id,
            queue=job.queue,
            job_set_id=job.jobset,
            state=job.state,
            orchestrator=orchestrator,
            task=annotations[TASK_ANNOTATION],
            attempt=annotations.get(ATTEMPT_ANNOTATION, ""),
            generation=int(generation) if generation.isdigit() else 0,
            annotations=annotations,
        )


class Status(Enum):
    RUNNING = "running"
    ENDED = "ended"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class TaskState:
    """What the orchestrator says of one task attempt.

    `subject` names the task for people ("airflow task dag/run/task/-1"), `state` is the
    orchestrator's own word for it ("failed", "Cancelled"). `attempt`, when the orchestrator
    knows which attempt of the task is the current one, is that attempt: the jobs of any other
    attempt are then over even while the task runs (an earlier try's job beside a later try).
    """

    status: Status
    subject: str
    state: str = ""
    attempt: str | None = None


#: How long a run's final state must have stood before its jobs count as orphans: the run's own
#: process (a Prefect flow run's, a Dagster run worker's) reports its end, then exits, and its
#: job ends with it.
SETTLE_SECONDS = 15.0


def settled(
    ended_at: datetime | None, now: datetime | None = None, *, wait: float = SETTLE_SECONDS
) -> bool:
    """Whether a final state reached at `ended_at` (aware) has stood `wait` seconds
    (`SETTLE_SECONDS` unless told); an end of unknown time has."""
    if ended_at is None:
        return True
    now = now or datetime.now(UTC)
    return (now - ended_at).total_seconds() >= wait


def running(subject: str, state: str = "running", attempt: str | None = None) -> TaskState:
    return TaskState(Status.RUNNING, subject, state, attempt)


def ended(subject: str, state: str) -> TaskState:
    return TaskState(Status.ENDED, subject, state)


def unknown(subject: str, state: str = "unknown") -> TaskState:
    return TaskState(Status.UNKNOWN, subject, state)


class OrchestratorUnreachable(Exception):
    """The orchestrator could not be asked: the round cancels nothing."""


class TaskStates(Protocol):
    """One orchestrator's adapter: the state of each task attempt its jobs work for."""

    #: The scheme of the jobs' external job URI ("airflow", "dagster", "prefect").
    orchestrator: str

    def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:
        """A state per `TaskJob.key` (a key left out counts as unknown); raises
        `OrchestratorUnreachable` when the orchestrator cannot be asked."""
        ...


class AsyncTaskStates(Protocol):
    """`TaskStates` for adapters that ask their orchestrator with asyncio."""

    orchestrator: str

    async def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]: ...


def decide(
    jobs: Iterable[TaskJob], states: Mapping[tuple[str, str], TaskState]
) -> list[tuple[TaskJob, str]]:
    """The jobs to cancel, each with its reason (pure; see the module docstring)."""
    out: list[tuple[TaskJob, str]] = []
    for job in jobs:
        state = states.get(job.key)
        if job.annotations.get(REAP_ANNOTATION) == "false":
            continue
        if state is None or state.status is Status.UNKNOWN:
            continue
        if state.status is Status.ENDED:
            out.append((job, f"{state.subject} is {state.state}"))
        elif state.attempt is not None and state.attempt != job.attempt:
            out.append(
                (
                    job,
                    f"{state.subject}: attempt {job.attempt} is over, "
                    f"attempt {state.attempt} is {state.state}",
                )
            )
    return out


def confirmed(
    decided: list[tuple[TaskJob, str]], before: Mapping[str, str]
) -> list[tuple[TaskJob, str]]:
    """What the previous round (`before`: job id -> reason) decided alike."""
    return [(job, reason) for job, reason in decided if before.get(job.job_id) == reason]


@dataclass(frozen=True)
class Round:
    """What one round saw and did."""

    listed: int = 0
    #: Cancelled job ids, each with its reason.
    cancelled: tuple[tuple[str, str], ...] = ()
    #: Jobs found over for the first time: cancelled next round if still so.
    pending: int = 0
    #: Why the orchestrator could not be asked ("" when it could).
    unreachable: str = ""


@dataclass
class Counters:
    """The reaper's totals since it started, for the integration to show."""

    rounds: int = 0
    cancelled: int = 0
    unreachable: int = 0
    last_unreachable: str = ""

    def add(self, done: Round) -> None:
        self.rounds += 1
        self.cancelled += len(done.cancelled)
        if done.unreachable:
            self.unreachable += 1
            self.last_unreachable = done.unreachable

    def as_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "cancelled": self.cancelled,
            "unreachable": self.unreachable,
            "last_unreachable": self.last_unreachable,
        }


def _batches(decided: list[tuple[TaskJob, str]]) -> dict[tuple[str, str, str], list[str]]:
    """One cancel call per queue, job set and reason."""
    out: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for job, reason in decided:
        out[(job.queue, job.job_set_id, reason)].append(job.job_id)
    return out


def _listed(found: Iterable[tasks_pb2.LiveTaskJob], orchestrator: str) -> list[TaskJob]:
    jobs = (TaskJob.from_proto(j) for j in found)
    return [j for j in jobs if j is not None and j.orchestrator == orchestrator]


def _unreachable(orchestrator: str, error: Exception, listed: int) -> Round:
    log.warning(
        "%s cannot be reached (%s): no job cancelled this round (%d live task jobs)",
        orchestrator,
        error,
        listed,
    )
    return Round(listed=listed, unreachable=str(error))


def _log_cancelled(orchestrator: str, reason: str, job_ids: list[str]) -> None:
    log.info("Cancelled %s job(s) %s: %s", orchestrator, ", ".join(job_ids), reason)


class Reaper:
    """Rounds of the reconciler with the blocking client (`ArmadaClient`)."""

    def __init__(
        self,
        client: Any,
        adapter: TaskStates,
        *,
        queue: str = "",
        pending: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.adapter = adapter
        self.queue = queue
        self.counters = Counters()
        #: Job id -> reason, as the previous round decided (see `confirmed`); a reaper that
        #: does not live between rounds (a Dagster sensor) keeps it and hands it back.
        self.pending: dict[str, str] = dict(pending or {})

    def reap_once(self) -> Round:
        found = self.client.get_live_task_jobs(self.queue, self.adapter.orchestrator)
        jobs = _listed(found, self.adapter.orchestrator)
        if not jobs:
            self.pending = {}
            done = Round()
        else:
            try:
                states = self.adapter.states(jobs)
            except OrchestratorUnreachable as e:
                self.pending = {}  # what comes next is seen anew
                done = _unreachable(self.adapter.orchestrator, e, len(jobs))
            else:
                decided = decide(jobs, states)
                cancelled: list[tuple[str, str]] = []
                for (queue, job_set, reason), ids in _batches(
                    confirmed(decided, self.pending)
                ).items():
                    self.client.cancel_jobs(queue, job_set, ids, reason=reason)
                    _log_cancelled(self.adapter.orchestrator, reason, ids)
                    cancelled += [(j, reason) for j in ids]
                self.pending = {j.job_id: r for j, r in decided}
                done = Round(len(jobs), tuple(cancelled), len(decided) - len(cancelled))
        self.counters.add(done)
        return done


class AsyncReaper:
    """Rounds of the reconciler with the asyncio client (`AsyncArmadaClient`)."""

    def __init__(
        self,
        client: Any,
        adapter: AsyncTaskStates,
        *,
        queue: str = "",
        pending: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.adapter = adapter
        self.queue = queue
        self.counters = Counters()
        #: Job id -> reason, as the previous round decided (see `confirmed`); a reaper that
        #: does not live between rounds (a Dagster sensor) keeps it and hands it back.
        self.pending: dict[str, str] = dict(pending or {})

    async def reap_once(self) -> Round:
        found = await self.client.get_live_task_jobs(self.queue, self.adapter.orchestrator)
        jobs = _listed(found, self.adapter.orchestrator)
        if not jobs:
            self.pending = {}
            done = Round()
        else:
            try:
                states = await self.adapter.states(jobs)
            except OrchestratorUnreachable as e:
                self.pending = {}  # what comes next is seen anew
                done = _unreachable(self.adapter.orchestrator, e, len(jobs))
            else:
                decided = decide(jobs, states)
                cancelled: list[tuple[str, str]] = []
                for (queue, job_set, reason), ids in _batches(
                    confirmed(decided, self.pending)
                ).items():
                    await self.client.cancel_jobs(queue, job_set, ids, reason=reason)
                    _log_cancelled(self.adapter.orchestrator, reason, ids)
                    cancelled += [(j, reason) for j in ids]
                self.pending = {j.job_id: r for j, r in decided}
                done = Round(len(jobs), tuple(cancelled), len(decided) - len(cancelled))
        self.counters.add(done)
        return done
