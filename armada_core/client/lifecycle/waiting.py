"""The one wait every integration uses: the event stream to the jobs' end, their log lines,
progress and waiting reasons, status checks that ride out a restarting server, the
orchestrator's cancel check, and cancellation when the wait ends first."""

from __future__ import annotations

import asyncio
import copy
import inspect
import queue as queues
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from armada_core.api import event_pb2, job_pb2, submit_pb2
from armada_core.retry import OutcomeReport, map_outcome

from .. import operations as ops
from ..errors import TRANSIENT_CODES, ArmadaError, WaitTimeout
from ..streams import StopSignal
from ..tracking import JobResult, state_name
from ..watching import Notice, WatchOptions
from .result import result_payload
from .run_logs import LogTail
from .steps import LifecycleError, Log, Pause, Step, _adrive, _drive, _ignore, processes_stopping

_WAITING = frozenset(
    {submit_pb2.SUBMITTED, submit_pb2.QUEUED, submit_pb2.LEASED, submit_pb2.PENDING}
)


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
    free; queue ml at 1.4x its fair share; 3rd in line of 120 queued"). Only the scheduler's
    part of the reason counts as a change: the queue's standing and the job's place in line,
    which the server appends when asked, move between polls."""

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
            if (
                said is not None
                and said[:2] == (d.state, _scheduler_part(reason))
                and now - said[2] < self.interval
            ):
                continue
            self._said[job_id] = (d.state, _scheduler_part(reason), now)
            since = d.last_transition_ts.ToNanoseconds() / 1e9 or now
            text = f"Armada {label} {state_name(d.state)} {_duration(now - since)}"
            out.append(f"{text}: {reason}" if reason else text)
        return out


#: Receives (job id, line) for every line a job writes.
LineHandler = Callable[[str, str], None]


#: Receives every event of the task's jobs with the job's result so far.
EventHandler = Callable[[event_pb2.EventStreamMessage, JobResult], None]


#: Whether the orchestrator ended the task: a reason to cancel its jobs with, or None. With
#: `wait_async` it may return an awaitable.
CancelCheck = Callable[[], Any]


@dataclass(frozen=True)
class WaitSettings:
    """How a task waits for its jobs; each integration maps its own options onto these."""

    #: Copy the jobs' log lines to `on_line` while they run, read every `log_interval` s.
    stream_logs: bool = True
    log_interval: float = 2.0
    #: Read the jobs' details every `check_interval` s: why a job still waits, and whether
    #: the server still knows the jobs. A check the server cannot answer now is skipped.
    check_interval: float = 10.0
    #: Say again why a job waits every `waiting_interval` s (at once when the reason changes).
    waiting_interval: float = 60.0
    #: A job missing from every check for this long ends the wait with `JobsVanished`.
    vanish_after: float = 60.0
    #: How often `cancel_check` is asked.
    cancel_check_interval: float = 5.0
    #: Give up after this many seconds (the jobs are cancelled, WaitTimeout raised).
    timeout: float | None = None
    #: How hard to hold on to the event stream (reconnects; polling while it is down).
    watch: WatchOptions = field(default_factory=WatchOptions)


class JobsVanished(LifecycleError):
    """The server no longer knows some of the task's jobs (a lost database, a deleted job):
    raised rather than waiting forever for events that will never come."""

    def __init__(self, message: str, job_ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.job_ids = list(job_ids)


@dataclass(frozen=True)
class TaskEnd:
    """How the task's jobs ended: each job's result (from its events), their details (runs,
    for durations) and, if the orchestrator's cancel check asked for it, why the wait
    cancelled them."""

    queue: str
    job_set_id: str
    job_ids: list[str]
    results: dict[str, JobResult]
    details: dict[str, job_pb2.JobDetails]
    cancelled: str = ""

    @property
    def report(self) -> OutcomeReport:
        """The outcome every integration maps to its own exceptions."""
        return map_outcome([self.results[j].job_end() for j in self.job_ids])

    def payload(self) -> dict[str, Any]:
        """The result payload (`result_payload`)."""
        return result_payload(
            self.queue, self.job_set_id, [self.results[j] for j in self.job_ids], self.details
        )


def job_labels(job_ids: Sequence[str]) -> dict[str, str]:
    """How the task log names each job: `job <id>`, or `member <i> job <id>` in a gang."""
    if len(job_ids) == 1:
        return {job_ids[0]: f"job {job_ids[0]}"}
    return {j: f"member {i} job {j}" for i, j in enumerate(job_ids)}


_PLACED = frozenset(
    {
        submit_pb2.LEASED,
        submit_pb2.PENDING,
        submit_pb2.RUNNING,
        submit_pb2.SUCCEEDED,
        submit_pb2.FAILED,
        submit_pb2.PREEMPTED,
    }
)


class Progress:
    """The task log's lines about the jobs' progress, from their events (pure): one when a
    job's state or run changes, and a warning when a job fails and the server runs it again
    or is preempted. Each line is (is a warning, text)."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = labels
        self._said: dict[str, tuple[int, str]] = {}

    def lines(
        self, message: event_pb2.EventStreamMessage, result: JobResult
    ) -> list[tuple[bool, str]]:
        label = self.labels.get(result.job_id, f"job {result.job_id}")
        out: list[tuple[bool, str]] = []
        if message.message.WhichOneof("events") == "failed" and message.message.failed.retryable:
            why = message.message.failed.reason or "no reason given"
            out.append((True, f"Armada {label} failed ({why}); the server runs it again"))
        return out + self.state_lines(result)

    def state_lines(self, result: JobResult) -> list[tuple[bool, str]]:
        """The line for a job's state or run, if it changed since the last one said (also
        for an end only polling saw, while the event stream was down)."""
        key = (result.state, result.run_id)
        if self._said.get(result.job_id) == key:
            return []
        self._said[result.job_id] = key
        label = self.labels.get(result.job_id, f"job {result.job_id}")
        where = f" on node {result.node}" if result.node and result.state in _PLACED else ""
        retried = (
            f" (after {len(result.retryable_failures)} server-side retries)"
            if result.retryable_failures
            else ""
        )
        return [
            (
                result.state == submit_pb2.PREEMPTED,
                f"Armada {label} is {result.state_name}{where}{retried}",
            )
        ]


def notice_line(notice: Notice) -> tuple[bool, str] | None:
    """The task log's line for an event-stream notice, None for routine ones (a silent or
    ended stream is reopened as a matter of course)."""
    if notice.kind in ("silent", "ended"):
        return None
    return notice.kind in ("reconnecting", "polling"), f"Armada event stream: {notice.message}"


class StatusCheck:
    """Whether the server still knows the task's jobs, from the details every check reads
    (pure). Jobs missing from every answer for `vanish_after` seconds have vanished. A check
    the server cannot answer now (restarting, a network drop) is skipped: the event stream
    rides out the outage and so does the check; any other failure turns the checks off."""

    def __init__(self, job_ids: Sequence[str], vanish_after: float) -> None:
        self.job_ids = list(job_ids)
        self.vanish_after = vanish_after
        self.enabled = True
        self._missing: dict[str, float] = {}

    def answered(self, details: Mapping[str, job_pb2.JobDetails], now: float) -> list[str]:
        """The vanished jobs, given a check's answer at `now`."""
        gone = [
            j for j in self.job_ids if j not in details or details[j].state == submit_pb2.UNKNOWN
        ]
        self._missing = {j: self._missing.get(j, now) for j in gone}
        return [j for j in gone if now - self._missing[j] >= self.vanish_after]

    def failed(self, error: ArmadaError) -> str | None:
        """A check failed: None to try again next time, or a warning for the task log when
        the checks stop."""
        if error.code in TRANSIENT_CODES:
            return None
        self.enabled = False
        return (
            f"cannot read the details of Armada job(s) {', '.join(self.job_ids)} "
            f"({error.code.name}: {error.details}); not saying why they wait nor checking "
            "that the server still knows them"
        )


@dataclass(frozen=True)
class Watch:
    """A wait step: up to `seconds` for news from the event stream (answered with `News`)."""

    seconds: float


@dataclass(frozen=True)
class AskCancel:
    """A wait step: ask the orchestrator's cancel check (answered with its reason or None)."""


@dataclass
class News:
    """What the event stream brought since the last `Watch`."""

    events: list[tuple[event_pb2.EventStreamMessage, JobResult]] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    #: Every job's result, once every job has ended.
    results: dict[str, JobResult] | None = None
    #: Why following the stream failed (WaitTimeout, a non-transient error).
    error: BaseException | None = None


_NEVER = float("inf")
#: How often the processes of jobs the wait cancelled are checked for their end.
_SETTLE_POLL = 0.5
#: How long at most it waits for them.
_SETTLE_LIMIT = 300.0


@dataclass
class _Reporter:
    """Tells the task log (and `on_event`) what the event stream brought."""

    labels: Mapping[str, str]
    log: Log
    warn: Log
    progress: Progress
    tail: LogTail | None
    on_event: EventHandler | None

    def say(self, warning: bool, line: str) -> None:
        (self.warn if warning else self.log)(line)

    def news(self, news: News) -> dict[str, JobResult] | None:
        """Tell the news; returns every job's result once all have ended, raises the error
        that ended the stream."""
        for message, result in news.events:
            for warning, line in self.progress.lines(message, result):
                self.say(warning, line)
            if self.tail is not None and self.tail.note(result):
                label = self.labels.get(result.job_id, result.job_id)
                self.log(f"[{label}] --- new run {result.run_id} ---")
            if self.on_event is not None:
                self.on_event(message, result)
        for notice in news.notices:
            said = notice_line(notice)
            if said is not None:
                self.say(*said)
        if news.error is not None:
            raise news.error
        if news.results is not None:
            for result in news.results.values():
                for warning, line in self.progress.state_lines(result):
                    self.say(warning, line)
        return news.results


def _check_status(
    ids: list[str],
    check: StatusCheck,
    reasons: WaitingReasons,
    reporter: _Reporter,
    now: Callable[[], float],
    wall: Callable[[], float],
) -> Generator[Step, Any, list[str]]:
    """One status check: why waiting jobs do not run yet; returns the jobs that vanished."""
    try:
        details = yield ops.get_job_details(ids)
    except ArmadaError as e:
        problem = check.failed(e)
        if problem is not None:
            reporter.warn(problem)
        return []
    for line in reasons.lines(details, wall()):
        reporter.log(line)
    return check.answered(details, now())


def _ask_cancel(
    queue: str, job_set_id: str, ids: list[str], reporter: _Reporter
) -> Generator[Any, Any, str]:
    """Ask the orchestrator's cancel check; its reason cancels the jobs. Returns the reason
    ("" to go on waiting)."""
    reason: str = yield AskCancel()
    if not reason:
        return ""
    reporter.log(f"Cancelling Armada job(s) {', '.join(ids)}: {reason}")
    try:
        yield ops.cancel_jobs(queue, job_set_id, ids, reason)
    except ArmadaError as e:
        reporter.warn(f"Cancelling Armada job(s) {', '.join(ids)} failed: {e}")
    return reason


def wait_steps(
    queue: str,
    job_set_id: str,
    job_ids: Sequence[str],
    *,
    log: Log,
    warn: Log | None = None,
    on_line: LineHandler | None = None,
    on_event: EventHandler | None = None,
    labels: Mapping[str, str] | None = None,
    settings: WaitSettings = WaitSettings(),
    cancel_check: bool = False,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> Generator[Any, Any, TaskEnd]:
    """The wait as steps (see `wait`): event-stream news (`Watch`), log reads and job details
    between them, and the orchestrator's cancel check (`AskCancel`) when `cancel_check`; once
    that check has cancelled the jobs, details and pauses until their processes are gone."""
    ids = list(dict.fromkeys(job_ids))
    labels = dict(labels or job_labels(ids))
    warn = warn or log
    if on_line is None:

        def on_line(job_id: str, line: str) -> None:
            log(f"[{labels.get(job_id, job_id)}] {line}")

    tail = LogTail(on_line, warn) if settings.stream_logs else None
    reporter = _Reporter(labels, log, warn, Progress(labels), tail, on_event)
    reasons = WaitingReasons(labels, settings.waiting_interval)
    check = StatusCheck(ids, settings.vanish_after)
    next_logs = clock() + settings.log_interval if tail is not None else _NEVER
    next_check = clock()
    next_cancel = clock() + settings.cancel_check_interval if cancel_check else _NEVER
    cancelled = ""
    while True:
        due = min(next_logs, next_check if check.enabled else _NEVER, next_cancel)
        news: News = yield Watch(max(0.0, due - clock()) if due < _NEVER else 3600.0)
        results = reporter.news(news)
        if results is not None:
            break
        # next_logs stays _NEVER without a tail
        if clock() >= next_logs and tail is not None:
            yield from tail.reads()
            next_logs = clock() + settings.log_interval
        if check.enabled and clock() >= next_check:
            gone = yield from _check_status(ids, check, reasons, reporter, clock, wall)
            if gone:
                raise JobsVanished(
                    f"the Armada server no longer knows job(s) {', '.join(gone)} of job "
                    f"set {job_set_id!r} in queue {queue!r}",
                    gone,
                )
            next_check = clock() + settings.check_interval
        if clock() >= next_cancel:
            reason = yield from _ask_cancel(queue, job_set_id, ids, reporter)
            if reason:
                cancelled = reason
                next_cancel = _NEVER
            else:
                next_cancel = clock() + settings.cancel_check_interval
    details = yield from _final_details(ids, reporter, clock, settle=bool(cancelled))
    if tail is not None:  # every run to its end: what the jobs wrote last, runs unseen
        yield from tail.finish(results.values(), details)
    return TaskEnd(queue, job_set_id, ids, {j: results[j] for j in ids}, dict(details), cancelled)


def _final_details(
    ids: list[str], reporter: _Reporter, clock: Callable[[], float], *, settle: bool
) -> Generator[Any, Any, Mapping[str, job_pb2.JobDetails]]:
    """The jobs' details once they ended. When the wait cancelled them (the orchestrator
    ended the task), also once their runs' processes are gone: the task is not reported ended
    while its pods still run their termination (a flow run's process cancelling the jobs of
    its own tasks). The server bounds that by each pod's grace period; the wait gives up
    after `_SETTLE_LIMIT` all the same (a server that never confirms it)."""
    told = False
    deadline = clock() + _SETTLE_LIMIT
    while True:
        try:
            details: Mapping[str, job_pb2.JobDetails] = yield ops.get_job_details(
                ids, expand_job_run=True
            )
        except ArmadaError:
            return {}
        ending = [j for j in ids if processes_stopping(details.get(j))] if settle else []
        if not ending:
            return details
        if clock() >= deadline:
            reporter.warn(
                f"Armada job(s) {', '.join(ending)} were cancelled, but their processes were "
                f"not confirmed gone within {_SETTLE_LIMIT:.0f} s"
            )
            return details
        if not told:
            told = True
            reporter.log(f"Waiting for the processes of Armada job(s) {', '.join(ending)} to stop")
        yield Pause(_SETTLE_POLL)


def _collect(items: Sequence[tuple[str, Any]]) -> News:
    news = News()
    for kind, value in items:
        if kind == "event":
            news.events.append(value)
        elif kind == "notice":
            news.notices.append(value)
        elif kind == "done":
            news.results = value
        else:
            news.error = value
    return news


class _Events:
    """The event stream followed on a thread (`ArmadaClient.wait_for_jobs`), its news queued
    for the blocking driver; `close` ends it at once."""

    def __init__(
        self, client: Any, queue: str, job_set_id: str, ids: list[str], settings: WaitSettings
    ) -> None:
        self.finished = False
        self._news: queues.Queue[tuple[str, Any]] = queues.Queue()
        self._stop = StopSignal()
        self._thread = threading.Thread(
            target=self._run,
            name="armada-task-events",
            args=(client, queue, job_set_id, ids, settings),
            daemon=True,
        )
        self._thread.start()

    def _run(
        self, client: Any, queue: str, job_set_id: str, ids: list[str], settings: WaitSettings
    ) -> None:
        put = self._news.put
        try:
            results = client.wait_for_jobs(
                queue,
                job_set_id,
                ids,
                timeout=settings.timeout,
                options=settings.watch,
                on_event=lambda m, r: put(("event", (m, copy.copy(r)))),
                on_notice=lambda n: put(("notice", n)),
                stop=self._stop,
            )
        except BaseException as e:  # handed to the driver, which raises it
            if not self._stop.is_set():
                put(("error", e))
        else:
            put(("done", results))

    def answer(self, step: Watch) -> News:
        items: list[tuple[str, Any]] = []
        try:
            items.append(self._news.get(timeout=step.seconds))
            while True:
                items.append(self._news.get_nowait())
        except queues.Empty:
            pass
        news = _collect(items)
        self.finished = self.finished or news.results is not None
        return news

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class _AsyncEvents:
    """`_Events` for the asyncio driver: the stream followed by a task."""

    def __init__(
        self, client: Any, queue: str, job_set_id: str, ids: list[str], settings: WaitSettings
    ) -> None:
        self.finished = False
        self._news: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._task = asyncio.create_task(
            self._run(client, queue, job_set_id, ids, settings), name="armada-task-events"
        )

    async def _run(
        self, client: Any, queue: str, job_set_id: str, ids: list[str], settings: WaitSettings
    ) -> None:
        put = self._news.put_nowait
        try:
            results = await client.wait_for_jobs(
                queue,
                job_set_id,
                ids,
                timeout=settings.timeout,
                options=settings.watch,
                on_event=lambda m, r: put(("event", (m, copy.copy(r)))),
                on_notice=lambda n: put(("notice", n)),
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # handed to the driver, which raises it
            put(("error", e))
        else:
            put(("done", results))

    async def answer(self, step: Watch) -> News:
        items: list[tuple[str, Any]] = []
        if self._news.empty():
            # Waited for without cancelling this task (not asyncio.timeout or wait_for): a
            # timeout that fires as the task is cancelled would replace the CancelledError it
            # was given, and callers read why they were cancelled from it (Airflow's triggerer
            # kills the jobs only on a user action's message). A cancelled get loses no item.
            getter = asyncio.ensure_future(self._news.get())
            try:
                await asyncio.wait({getter}, timeout=step.seconds)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                items.append(getter.result())
        while not self._news.empty():
            items.append(self._news.get_nowait())
        news = _collect(items)
        self.finished = self.finished or news.results is not None
        return news

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _exit_reason(
    error: BaseException, settings: WaitSettings, cancel_reason: str | None
) -> str | None:
    """Why the jobs are cancelled when the wait ends before they do (None: left running)."""
    if isinstance(error, WaitTimeout):
        return f"timed out after {settings.timeout:g} s"
    if isinstance(error, JobsVanished):
        return None
    return cancel_reason


def wait(
    client: Any,
    queue: str,
    job_set_id: str,
    job_ids: Sequence[str],
    *,
    log: Log = _ignore,
    warn: Log | None = None,
    on_line: LineHandler | None = None,
    on_event: EventHandler | None = None,
    labels: Mapping[str, str] | None = None,
    settings: WaitSettings = WaitSettings(),
    cancel_check: CancelCheck | None = None,
    cancel_reason: str | None = None,
) -> TaskEnd:
    """With an `ArmadaClient`: wait until every job of the task has ended (server-side
    retries are waited through) and return how they ended.

    Meanwhile it follows the job set's event stream (resuming after disconnects and server
    restarts, polling status while the stream is down), logs each job's progress to `log`
    (warnings to `warn`), copies the jobs' log lines to `on_line` (default: `log` prefixed
    with the job's label), logs why a waiting job does not run yet, checks through the jobs'
    details that the server still knows them (`JobsVanished`), and asks `cancel_check`
    whether the orchestrator ended the task (its reason cancels the jobs).

    If the wait ends before the jobs do, they are cancelled: on a timeout always, on any
    other interruption (an exception, KeyboardInterrupt, an orchestrator's interrupt) with
    `cancel_reason`; without one they are left running (a process handing the wait over).
    """
    ids = list(dict.fromkeys(job_ids))
    flow = wait_steps(
        queue,
        job_set_id,
        ids,
        log=log,
        warn=warn,
        on_line=on_line,
        on_event=on_event,
        labels=labels,
        settings=settings,
        cancel_check=cancel_check is not None,
    )
    events = _Events(client, queue, job_set_id, ids, settings)

    def answer(step: Any) -> Any:
        if isinstance(step, Watch):
            return events.answer(step)
        return cancel_check() if cancel_check is not None else None

    try:
        return _drive(client, flow, answer)
    except BaseException as e:
        events.close()
        reason = _exit_reason(e, settings, cancel_reason)
        if reason and not events.finished:
            (warn or log)(f"Cancelling Armada job(s) {', '.join(ids)}: {reason}")
            try:
                client.cancel_jobs(queue, job_set_id, ids, reason=reason)
            except ArmadaError as failed:
                (warn or log)(f"Cancelling Armada job(s) {', '.join(ids)} failed: {failed}")
        raise
    finally:
        events.close()
        flow.close()


async def wait_async(
    client: Any,
    queue: str,
    job_set_id: str,
    job_ids: Sequence[str],
    *,
    log: Log = _ignore,
    warn: Log | None = None,
    on_line: LineHandler | None = None,
    on_event: EventHandler | None = None,
    labels: Mapping[str, str] | None = None,
    settings: WaitSettings = WaitSettings(),
    cancel_check: CancelCheck | None = None,
    cancel_reason: str | None = None,
) -> TaskEnd:
    """`wait` with an `AsyncArmadaClient` (`cancel_check` may be a coroutine function).
    Cancelling the awaiting task ends the wait and closes the event stream; the jobs are then
    cancelled with `cancel_reason`, if given."""
    ids = list(dict.fromkeys(job_ids))
    flow = wait_steps(
        queue,
        job_set_id,
        ids,
        log=log,
        warn=warn,
        on_line=on_line,
        on_event=on_event,
        labels=labels,
        settings=settings,
        cancel_check=cancel_check is not None,
    )
    events = _AsyncEvents(client, queue, job_set_id, ids, settings)

    async def answer(step: Any) -> Any:
        if isinstance(step, Watch):
            return await events.answer(step)
        reason = cancel_check() if cancel_check is not None else None
        return await reason if inspect.isawaitable(reason) else reason

    try:
        return await _adrive(client, flow, answer)
    except BaseException as e:
        await events.close()
        reason = _exit_reason(e, settings, cancel_reason)
        if reason and not events.finished:
            (warn or log)(f"Cancelling Armada job(s) {', '.join(ids)}: {reason}")
            await asyncio.shield(_acancel(client, queue, job_set_id, ids, reason, warn or log))
        raise
    finally:
        await events.close()
        flow.close()


async def _acancel(
    client: Any, queue: str, job_set_id: str, ids: list[str], reason: str, warn: Log
) -> None:
    try:
        await client.cancel_jobs(queue, job_set_id, ids, reason=reason)
    except ArmadaError as e:
        warn(f"Cancelling Armada job(s) {', '.join(ids)} failed: {e}")
