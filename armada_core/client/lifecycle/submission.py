"""Submit-or-reattach: the jobs this attempt of a task waits on, found by the task's external job
URI in its lineage's job sets (see the package docstring). Looking and submitting are two
calls, so the server has the last word: it refuses a second live generation of the task, and
the attempt that loses reattaches to the live jobs it names (armada_core.jobs.tasks)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from armada_core.api import job_pb2
from armada_core.jobs.tasks import LIVE_GENERATION_METADATA, LiveGeneration

from .. import operations as ops
from ..errors import AlreadyExists
from ..reattach import LIVE_STATES, decide_reattach
from ..tracking import TERMINAL, state_name
from .identity import ATTEMPT_ANNOTATION, GENERATION_ANNOTATION, TaskIdentity, _short
from .steps import (
    Items,
    LifecycleError,
    Log,
    Pause,
    Step,
    _adrive,
    _drive,
    _ignore,
    processes_stopping,
)


@dataclass(frozen=True)
class FoundJob:
    """A job of the task found on the server."""

    job_id: str
    job_set_id: str
    state: int
    attempt: str
    generation: int
    #: Ended, but its last run's processes may still be terminating (`processes_stopping`).
    stopping: bool = False


@dataclass(frozen=True)
class Plan:
    """What submit-or-reattach does with the jobs it found: reattach to `reattach`, or cancel
    `cancel` (and wait for their end) and submit `generation`."""

    reattach: tuple[str, ...] = ()
    cancel: tuple[FoundJob, ...] = ()
    generation: int = 0
    #: The job set `reattach` is in (a lineage's job set, or the attempt's own).
    job_set_id: str = ""
    #: Why, for the task's log.
    because: str = ""


def plan(identity: TaskIdentity, found: Sequence[FoundJob]) -> Plan:
    """Decide from the task's jobs on the server (pure; see the module docstring)."""
    mine = [j for j in found if j.attempt == _short(identity.attempt)]
    others = [j for j in found if j.attempt != _short(identity.attempt) and j.state in LIVE_STATES]
    latest = max((j.generation for j in mine), default=None)
    if latest is not None:
        current = {j.job_id: j.state for j in mine if j.generation == latest}
        decision = decide_reattach(current)
        # Live jobs of an older generation (a crash between cancelling and submitting).
        others += [j for j in mine if j.generation != latest and j.state in LIVE_STATES]
        where = next(j.job_set_id for j in mine if j.generation == latest)
        if decision.reattach and not others:
            return Plan(
                reattach=tuple(current),
                generation=latest,
                job_set_id=where,
                because=f"this attempt's jobs ({_states(current)})",
            )
        ended_badly = {j: s for j, s in current.items() if j in decision.ended}
        live_mine = tuple(j for j in mine if j.generation == latest and j.state in LIVE_STATES)
        because = (
            f"this attempt's jobs ended without succeeding ({_states(ended_badly)})"
            if ended_badly
            else ""
        )
        if decision.reattach:  # other attempts run beside it: keep this one, stop those
            return Plan(
                reattach=tuple(current),
                cancel=tuple(others),
                generation=latest,
                job_set_id=where,
                because=f"this attempt's jobs ({_states(current)})",
            )
        return Plan(cancel=(*live_mine, *others), generation=latest + 1, because=because)
    because = (
        f"earlier attempts' jobs still live: "
        f"{', '.join(f'{j.job_id} (attempt {j.attempt})' for j in others)}"
        if others
        else ""
    )
    return Plan(cancel=tuple(others), generation=0, because=because)


def _states(states: Mapping[str, int]) -> str:
    return ", ".join(f"{j} {state_name(s)}" for j, s in states.items())


@dataclass(frozen=True)
class Submission:
    """The jobs a task waits on."""

    queue: str
    job_set_id: str
    job_ids: list[str]
    client_id: str
    generation: int
    reattached: bool


Flow = Generator[Step, Any, Submission]


def submit_or_reattach_steps(
    queue: str,
    job_set_id: str,
    identity: TaskIdentity,
    build: Callable[[str], Items],
    *,
    log: Log,
    cancel_wait: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
) -> Flow:
    """The lifecycle's submission as calls to make and pauses to take (see the drivers)."""
    found: list[FoundJob] = []
    for js in dict.fromkeys((job_set_id, *identity.job_sets)):
        states = yield ops.get_job_status_by_external_uri(queue, js, identity.external_job_uri)
        if states:
            details = yield ops.get_job_details(
                list(states), expand_job_spec=True, expand_job_run=True
            )
            found += [_found(j, js, s, details.get(j)) for j, s in states.items()]
    decided = plan(identity, found)
    if decided.because:
        log(f"Found {decided.because}")
    # Jobs that ended while their processes still terminate count as running until they
    # are gone (a task killed and retried at once, its job cancelled just before).
    stopping = () if decided.reattach else tuple(j for j in found if j.stopping)
    if decided.cancel or stopping:
        yield from _cancel_and_wait(
            queue, identity, decided.cancel, stopping, log, cancel_wait, clock
        )
    if decided.reattach:
        log(f"Reattaching to Armada job(s) {', '.join(decided.reattach)}")
        return Submission(
            queue,
            decided.job_set_id or job_set_id,
            list(decided.reattach),
            identity.client_id(decided.generation),
            decided.generation,
            True,
        )
    client_id = identity.client_id(decided.generation)
    items = identity.stamp(build(client_id), decided.generation)
    for _ in range(_REFUSALS):
        try:
            job_ids = yield ops.submit_jobs(queue, job_set_id, items)
        except AlreadyExists as e:
            live = _live_generation(e)
            if live is None:
                raise
            won = yield from _after_refusal(queue, identity, live, log, cancel_wait, clock)
            if won is None:
                continue
            return Submission(queue, live.job_set_id, won, client_id, decided.generation, True)
        log(
            f"Submitted Armada job(s) {', '.join(job_ids)} to queue {queue!r}, job set "
            f"{job_set_id!r} (client id {client_id})"
        )
        return Submission(queue, job_set_id, list(job_ids), client_id, decided.generation, False)
    raise LifecycleError(
        f"the server refused {_REFUSALS} times to start a generation of {identity.name} beside "
        "jobs of the task that were still stopping; not submitting"
    )


#: How often a submission refused for jobs that are still stopping is tried again.
_REFUSALS = 3


def _live_generation(error: AlreadyExists) -> LiveGeneration | None:
    """The live generation a refused submission names (None: refused for another reason)."""
    for key, value in error.trailing_metadata:
        if key == LIVE_GENERATION_METADATA and isinstance(value, bytes):
            return LiveGeneration.decode(value)
    return None


def _after_refusal(
    queue: str,
    identity: TaskIdentity,
    live: LiveGeneration,
    log: Log,
    cancel_wait: float,
    clock: Callable[[], float],
) -> Generator[Step, Any, list[str] | None]:
    """The server refused the submission for the task's live generation `live` (another
    submitter of the task won the race, or jobs still stopping): the jobs to reattach to
    when some of them run or wait to, else None once the stopping ones are gone."""
    details = yield ops.get_job_details(list(live.job_ids), expand_job_run=True)
    if any(j in details and details[j].state not in TERMINAL for j in live.job_ids):
        log(
            f"Another submission of this task started its jobs first: reattaching to Armada "
            f"job(s) {', '.join(live.job_ids)} (attempt {live.attempt}, generation "
            f"{live.generation}, job set {live.job_set_id!r})"
        )
        return list(live.job_ids)
    stopping = [
        FoundJob(j, live.job_set_id, details[j].state, live.attempt, 0, True)
        for j in live.job_ids
        if j in details
    ]
    yield from _cancel_and_wait(queue, identity, (), stopping, log, cancel_wait, clock)
    return None


def _found(
    job_id: str, job_set_id: str, state: int, details: job_pb2.JobDetails | None
) -> FoundJob:
    annotations = details.job_spec.annotations if details is not None else {}
    try:
        generation = int(annotations.get(GENERATION_ANNOTATION, "0"))
    except ValueError:
        generation = 0
    return FoundJob(
        job_id,
        job_set_id,
        state,
        annotations.get(ATTEMPT_ANNOTATION, ""),
        generation,
        state in TERMINAL and processes_stopping(details),
    )


def _cancel_and_wait(
    queue: str,
    identity: TaskIdentity,
    jobs: Sequence[FoundJob],
    stopping: Sequence[FoundJob],
    log: Log,
    cancel_wait: float,
    clock: Callable[[], float],
) -> Generator[Step, Any, None]:
    """Cancel `jobs`, then wait until they and `stopping` have ended and their processes
    are gone, so that two attempts never run at once."""
    by_set: dict[str, list[str]] = {}
    for j in jobs:
        by_set.setdefault(j.job_set_id, []).append(j.job_id)
    if jobs:
        log(
            f"Cancelling Armada job(s) {', '.join(j.job_id for j in jobs)} before submitting "
            f"attempt {identity.attempt}, so that two attempts never run at once"
        )
    for js, job_ids in by_set.items():
        yield ops.cancel_jobs(
            queue, js, job_ids, f"replaced by attempt {identity.attempt} of {identity.name}"
        )
    ids = list(dict.fromkeys([j.job_id for j in (*jobs, *stopping)]))
    deadline = clock() + cancel_wait
    told = False
    while True:
        details = yield ops.get_job_details(ids, expand_job_run=True)
        live = [j for j in ids if j in details and details[j].state not in TERMINAL]
        ending = [j for j in ids if j in details and processes_stopping(details[j])]
        if not live and not ending:
            return
        if clock() >= deadline:
            if live:
                raise LifecycleError(
                    f"Armada job(s) {', '.join(live)} of an earlier attempt "
                    f"did not end within {cancel_wait:.0f} s of being "
                    "cancelled; not submitting a second copy beside them"
                )
            log(
                f"Armada job(s) {', '.join(ending)} ended, but their pods were not confirmed "
                f"gone within {cancel_wait:.0f} s; trying to submit attempt {identity.attempt} "
                "(the server refuses while they still hold their nodes)"
            )
            return
        if ending and not live and not told:
            told = True
            log(
                f"Waiting for the pods of Armada job(s) {', '.join(ending)} to stop before "
                f"submitting attempt {identity.attempt}"
            )
        yield Pause(1.0)


def submit_or_reattach(
    client: Any,
    queue: str,
    job_set_id: str,
    identity: TaskIdentity,
    build: Callable[[str], Items],
    *,
    log: Log = _ignore,
    cancel_wait: float = 300.0,
) -> Submission:
    """With an `ArmadaClient`: the jobs this attempt of the task waits on (see the module
    docstring). `build(client_id)` makes the request items; their external job URI and the
    task annotations are set here."""
    return _drive(
        client,
        submit_or_reattach_steps(
            queue, job_set_id, identity, build, log=log, cancel_wait=cancel_wait
        ),
    )


async def asubmit_or_reattach(
    client: Any,
    queue: str,
    job_set_id: str,
    identity: TaskIdentity,
    build: Callable[[str], Items],
    *,
    log: Log = _ignore,
    cancel_wait: float = 300.0,
) -> Submission:
    """`submit_or_reattach` with an `AsyncArmadaClient`."""
    return await _adrive(
        client,
        submit_or_reattach_steps(
            queue, job_set_id, identity, build, log=log, cancel_wait=cancel_wait
        ),
    )
