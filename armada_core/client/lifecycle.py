"""One task lifecycle for every orchestrator integration: identity, submit-or-reattach, waiting
reasons, and the result payload.

An integration keeps only "orchestrator context -> `TaskIdentity`" and "outcome ->
orchestrator exception"; everything between is here, so Airflow, Dagster and Prefect decide
the same way whether to reattach, when to cancel an earlier attempt, and what a result holds.

Every job a task submits carries the task's external job URI and annotations naming the task,
the attempt and the generation. A new attempt finds the task's jobs by that URI in the job sets
its lineage names, without any state of its own:

- jobs of the same attempt that can still succeed, or did, are reattached to (a crashed
  submitter, a resumed run, a worker taking over a flow run);
- if the same attempt's jobs ended otherwise (cancelled, preempted, failed...), it submits a
  new generation (a new client id, or the server would answer with the ended jobs);
- live jobs of any other attempt are cancelled, and their end awaited, before submitting: two
  attempts of one task never run at once, and no attempt is left running as a zombie.

The logic is written once as a generator of calls (`armada_core.client.operations.Call`) and
pauses, driven by the blocking client (`submit_or_reattach`) or the asyncio one
(`asubmit_or_reattach`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from armada_core.api import job_pb2, submit_pb2

from . import operations as ops
from .errors import ArmadaError
from .reattach import LIVE_STATES, decide_reattach
from .tracking import TERMINAL, JobResult, state_name

#: Annotations stamped on every job a task submits.
TASK_ANNOTATION = "armadaproject.io/task"
ATTEMPT_ANNOTATION = "armadaproject.io/task-attempt"
GENERATION_ANNOTATION = "armadaproject.io/task-generation"

#: Longest task key kept readable in annotations and the external job URI; longer ones are
#: hashed (the server bounds both).
_READABLE = 400

Items = list[submit_pb2.JobSubmitRequestItem]
Log = Callable[[str], None]


def _digest(*parts: Any, size: int = 24) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:size]


def _short(text: str) -> str:
    return text if len(text) <= _READABLE else f"{text[:64]}#{_digest(text, size=32)}"


@dataclass(frozen=True)
class TaskIdentity:
    """A logical task and one attempt of it, as its orchestrator names them.

    `task` stays the same across attempts (Airflow: DAG, run, task, map index; Dagster: the
    root run and step; Prefect: the flow run and task call); `attempt` names this attempt in the
    orchestrator's terms. `job_sets` lists where earlier attempts may have left jobs besides
    the attempt's own job set (a Dagster re-execution's parent runs). `name` is the readable
    part of client ids.
    """

    orchestrator: str
    task: str
    attempt: str
    name: str = "task"
    job_sets: tuple[str, ...] = ()

    @property
    def external_job_uri(self) -> str:
        """Shared by every attempt's jobs: how any attempt finds them."""
        return f"{self.orchestrator}://{_short(self.task)}"

    def client_id(self, generation: int = 0) -> str:
        """Deterministic per attempt and generation: a resubmission (two processes of one
        attempt, a retried call) is deduplicated by the server."""
        readable = "".join(c if c.isalnum() or c in "-_." else "-" for c in self.name[:40])
        suffix = f".{generation}" if generation else ""
        return (f"{self.orchestrator}-{readable}{suffix}-"
                f"{_digest(self.orchestrator, self.task, self.attempt, generation)}")

    def annotations(self, generation: int = 0) -> dict[str, str]:
        return {TASK_ANNOTATION: _short(self.task), ATTEMPT_ANNOTATION: _short(self.attempt),
                GENERATION_ANNOTATION: str(generation)}

    def stamp(self, items: Items, generation: int) -> Items:
        """The items with the task's external job URI and annotations set."""
        for item in items:
            item.external_job_uri = self.external_job_uri
            item.annotations.update(self.annotations(generation))
        return items


@dataclass(frozen=True)
class FoundJob:
    """A job of the task found on the server."""

    job_id: str
    job_set_id: str
    state: int
    attempt: str
    generation: int


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
    others = [j for j in found if j.attempt != _short(identity.attempt)
              and j.state in LIVE_STATES]
    latest = max((j.generation for j in mine), default=None)
    if latest is not None:
        current = {j.job_id: j.state for j in mine if j.generation == latest}
        decision = decide_reattach(current)
        # Live jobs of an older generation (a crash between cancelling and submitting).
        others += [j for j in mine if j.generation != latest and j.state in LIVE_STATES]
        where = next(j.job_set_id for j in mine if j.generation == latest)
        if decision.reattach and not others:
            return Plan(reattach=tuple(current), generation=latest, job_set_id=where,
                        because=f"this attempt's jobs ({_states(current)})")
        ended_badly = {j: s for j, s in current.items() if j in decision.ended}
        live_mine = tuple(j for j in mine if j.generation == latest and j.state in LIVE_STATES)
        because = (f"this attempt's jobs ended without succeeding ({_states(ended_badly)})"
                   if ended_badly else "")
        if decision.reattach:  # other attempts run beside it: keep this one, stop those
            return Plan(reattach=tuple(current), cancel=tuple(others), generation=latest,
                        job_set_id=where, because=f"this attempt's jobs ({_states(current)})")
        return Plan(cancel=(*live_mine, *others), generation=latest + 1, because=because)
    because = (f"earlier attempts' jobs still live: "
               f"{', '.join(f'{j.job_id} (attempt {j.attempt})' for j in others)}"
               if others else "")
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


class LifecycleError(ArmadaError):
    """Earlier attempts' jobs did not end in time after being cancelled."""


@dataclass(frozen=True)
class Pause:
    seconds: float


Step = ops.Call[Any] | Pause
Flow = Generator[Step, Any, Submission]


def submit_or_reattach_steps(queue: str, job_set_id: str, identity: TaskIdentity,
                             build: Callable[[str], Items], *, log: Log,
                             cancel_wait: float = 300.0,
                             clock: Callable[[], float] = time.monotonic) -> Flow:
    """The lifecycle's submission as calls to make and pauses to take (see the drivers)."""
    found: list[FoundJob] = []
    for js in dict.fromkeys((job_set_id, *identity.job_sets)):
        states = yield ops.get_job_status_by_external_uri(queue, js, identity.external_job_uri)
        if states:
            details = yield ops.get_job_details(list(states), expand_job_spec=True)
            found += [_found(j, js, s, details.get(j)) for j, s in states.items()]
    decided = plan(identity, found)
    if decided.because:
        log(f"Found {decided.because}")
    if decided.cancel:
        yield from _cancel_and_wait(queue, identity, decided.cancel, log, cancel_wait, clock)
    if decided.reattach:
        log(f"Reattaching to Armada job(s) {', '.join(decided.reattach)}")
        return Submission(queue, decided.job_set_id or job_set_id, list(decided.reattach),
                          identity.client_id(decided.generation), decided.generation, True)
    client_id = identity.client_id(decided.generation)
    items = identity.stamp(build(client_id), decided.generation)
    job_ids = yield ops.submit_jobs(queue, job_set_id, items)
    log(f"Submitted Armada job(s) {', '.join(job_ids)} to queue {queue!r}, job set "
        f"{job_set_id!r} (client id {client_id})")
    return Submission(queue, job_set_id, list(job_ids), client_id, decided.generation, False)


def _found(job_id: str, job_set_id: str, state: int,
           details: job_pb2.JobDetails | None) -> FoundJob:
    annotations = details.job_spec.annotations if details is not None else {}
    try:
        generation = int(annotations.get(GENERATION_ANNOTATION, "0"))
    except ValueError:
        generation = 0
    return FoundJob(job_id, job_set_id, state, annotations.get(ATTEMPT_ANNOTATION, ""),
                    generation)


def _cancel_and_wait(queue: str, identity: TaskIdentity, jobs: Sequence[FoundJob], log: Log,
                     cancel_wait: float, clock: Callable[[], float]
                     ) -> Generator[Step, Any, None]:
    by_set: dict[str, list[str]] = {}
    for j in jobs:
        by_set.setdefault(j.job_set_id, []).append(j.job_id)
    ids = [j.job_id for j in jobs]
    log(f"Cancelling Armada job(s) {', '.join(ids)} before submitting attempt "
        f"{identity.attempt}, so that two attempts never run at once")
    for js, job_ids in by_set.items():
        yield ops.cancel_jobs(queue, js, job_ids,
                              f"replaced by attempt {identity.attempt} of {identity.name}")
    deadline = clock() + cancel_wait
    while True:
        states = yield ops.get_job_status(ids)
        live = [j for j in ids if states.get(j, submit_pb2.UNKNOWN) not in TERMINAL
                and states.get(j) != submit_pb2.UNKNOWN]
        if not live:
            return
        if clock() >= deadline:
            raise LifecycleError(f"Armada job(s) {', '.join(live)} of an earlier attempt did "
                                 f"not end within {cancel_wait:.0f} s of being cancelled; "
                                 "not submitting a second copy beside them")
        yield Pause(1.0)


def _drive(client: Any, flow: Flow) -> Submission:
    step: Step | None = next(flow)
    try:
        while True:
            if isinstance(step, Pause):
                time.sleep(step.seconds)
                step = flow.send(None)
            else:
                step = flow.send(client._run(step))
    except StopIteration as done:
        return done.value


async def _adrive(client: Any, flow: Flow) -> Submission:
    step: Step | None = next(flow)
    try:
        while True:
            if isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
                step = flow.send(None)
            else:
                step = flow.send(await client._run(step))
    except StopIteration as done:
        return done.value


def _ignore(_: str) -> None:
    pass


def submit_or_reattach(client: Any, queue: str, job_set_id: str, identity: TaskIdentity,
                       build: Callable[[str], Items], *, log: Log = _ignore,
                       cancel_wait: float = 300.0) -> Submission:
    """With an `ArmadaClient`: the jobs this attempt of the task waits on (see the module
    docstring). `build(client_id)` makes the request items; their external job URI and the
    task annotations are set here."""
    return _drive(client, submit_or_reattach_steps(queue, job_set_id, identity, build,
                                                   log=log, cancel_wait=cancel_wait))


async def asubmit_or_reattach(client: Any, queue: str, job_set_id: str,
                              identity: TaskIdentity, build: Callable[[str], Items], *,
                              log: Log = _ignore, cancel_wait: float = 300.0) -> Submission:
    """`submit_or_reattach` with an `AsyncArmadaClient`."""
    return await _adrive(client, submit_or_reattach_steps(queue, job_set_id, identity, build,
                                                          log=log, cancel_wait=cancel_wait))


# --- waiting reasons ------------------------------------------------------------------------

_WAITING = frozenset({submit_pb2.SUBMITTED, submit_pb2.QUEUED, submit_pb2.LEASED,
                      submit_pb2.PENDING})


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _scheduler_part(reason: str) -> str:
    return reason.split("; queue ", 1)[0]


@dataclass
class WaitingReasons:
    """Turns job details into the task log's "why is it still waiting" lines: one per waiting
    job when its state or the scheduler's reason changes, and again every `interval` seconds
    while it waits (e.g. "job 01h.. QUEUED 3m: 0 of 40 matching nodes have 8 nvidia.com/gpu
    free; queue ml at 1.4x its fair share"). Only the scheduler's part of the reason counts
    as a change: where the queue stands against its fair share moves between polls."""

    labels: Mapping[str, str]
    interval: float = 60.0
    _said: dict[str, tuple[int, str, float]] = field(default_factory=dict)

    def lines(self, details: Mapping[str, job_pb2.JobDetails], now: float) -> list[str]:
        out = []
        for job_id, label in self.labels.items():
            d = details.get(job_id)
            if d is None or d.state not in _WAITING:
                self._said.pop(job_id, None)
                continue
            reason = d.scheduling_reason
            said = self._said.get(job_id)
            if said is not None and said[:2] == (d.state, _scheduler_part(reason)) and \
                    now - said[2] < self.interval:
                continue
            self._said[job_id] = (d.state, _scheduler_part(reason), now)
            since = d.last_transition_ts.ToNanoseconds() / 1e9 or now
            text = f"Armada {label} {state_name(d.state)} {_duration(now - since)}"
            out.append(f"{text}: {reason}" if reason else text)
        return out


class WaitingReporter:
    """Polls job details every `poll` seconds in a thread and logs `WaitingReasons` lines;
    for blocking waits (the asyncio flavour is `report_waiting`)."""

    def __init__(self, client: Any, labels: Mapping[str, str], log: Log, *,
                 interval: float = 60.0, poll: float = 10.0) -> None:
        self.client, self.log, self.poll = client, log, poll
        self.reasons = WaitingReasons(dict(labels), interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="armada-waiting", daemon=True)

    def start(self) -> WaitingReporter:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                details = self.client.get_job_details(list(self.reasons.labels))
            except ArmadaError:
                details = {}
            for line in self.reasons.lines(details, time.time()):
                self.log(line)
            self._stop.wait(self.poll)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def __enter__(self) -> WaitingReporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def report_waiting(client: Any, labels: Mapping[str, str], log: Log, *,
                         interval: float = 60.0, poll: float = 10.0) -> None:
    """Log `WaitingReasons` lines until cancelled (run it as a task beside the wait)."""
    reasons = WaitingReasons(dict(labels), interval)
    while True:
        try:
            details = await client.get_job_details(list(labels))
        except ArmadaError:
            details = {}
        for line in reasons.lines(details, time.time()):
            log(line)
        await asyncio.sleep(poll)


# --- result ---------------------------------------------------------------------------------

def _seconds(ts: Any) -> float | None:
    return ts.ToNanoseconds() / 1e9 if ts is not None and ts.ToNanoseconds() else None


def result_payload(queue: str, job_set_id: str, results: Sequence[JobResult],
                   details: Mapping[str, job_pb2.JobDetails]) -> dict[str, Any]:
    """The task's result, the same for every integration (JSON-serialisable): outcome
    (`armada_core.retry.map_outcome`), summary text, and per job its state, run, node, exit
    codes, termination messages, failure, server-side retries and duration."""
    from armada_core.retry import map_outcome

    report = map_outcome([r.job_end() for r in results])
    jobs: list[dict[str, Any]] = []
    for r in results:
        started = finished = None
        d = details.get(r.job_id)
        if d is not None:
            for run in d.job_runs:
                if run.run_id == (r.run_id or d.latest_run_id):
                    started, finished = _seconds(run.started_ts), _seconds(run.finished_ts)
        jobs.append({
            "job_id": r.job_id, "state": r.state_name, "run_id": r.run_id, "node": r.node,
            "cluster": r.cluster, "exit_codes": dict(r.exit_codes),
            "termination_messages": dict(r.termination_messages),
            "failure_reason": r.failure_reason, "failure_category": r.failure_category,
            "failure_subcategory": r.failure_subcategory, "condition": r.condition,
            "cancel_reason": r.cancel_reason, "server_retries": len(r.retryable_failures),
            "duration_seconds": (round(finished - started, 3)
                                 if started is not None and finished is not None else None),
        })
    durations = [j["duration_seconds"] for j in jobs if j["duration_seconds"] is not None]
    return {
        "outcome": report.outcome.value, "summary": report.summary, "queue": queue,
        "job_set_id": job_set_id, "job_ids": [j["job_id"] for j in jobs],
        "run_ids": [j["run_id"] for j in jobs], "nodes": [j["node"] for j in jobs],
        "duration_seconds": max(durations) if durations else None, "jobs": jobs,
    }


__all__ = [
    "ATTEMPT_ANNOTATION", "GENERATION_ANNOTATION", "TASK_ANNOTATION", "FoundJob",
    "LifecycleError", "Plan", "Submission", "TaskIdentity", "WaitingReasons",
    "WaitingReporter", "asubmit_or_reattach", "plan", "report_waiting", "result_payload",
    "submit_or_reattach", "submit_or_reattach_steps",
]
