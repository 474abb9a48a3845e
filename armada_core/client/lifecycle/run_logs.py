"""Which runs of a task's jobs the wait copies log lines from, and reading them to their end.

Every run is followed by its own id (Binoculars' `LogRequest.run_id`) from its own start, not
"the job's latest run": a run that a server-side retry replaced before its last lines were
read, or that ended before the wait saw it start (a job that ends at once, a wait that begins
late, a run the event stream never showed), is still read to its end. A run is read once more
after the wait learns that it ended, since an executor reports a run's end only once its log is
complete; a read the server cannot answer now is tried again, so a busy server delays lines but
never loses them silently. Each line goes to `on_line` once (`LogCursor`, per run).

A server without the run-id extension (upstream Armada) refuses those reads; the wait then
reads each job's latest run by job id, as upstream allows.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from typing import Any

import grpc

from armada_core.api import job_pb2, submit_pb2

from .. import operations as ops
from ..errors import TRANSIENT_CODES, ArmadaError
from ..logs import LineHandler, LogCursor
from ..tracking import TERMINAL, JobResult
from .steps import Log, Pause, Step

#: What a server without the run-id extension answers a read by run id.
_NO_RUN_READS = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED})
#: States of a run whose pod existed (it may have logged), when a job's details show it.
_LOGGED = frozenset(
    {
        job_pb2.RUN_STATE_RUNNING,
        job_pb2.RUN_STATE_SUCCEEDED,
        job_pb2.RUN_STATE_FAILED,
        job_pb2.RUN_STATE_PREEMPTED,
        job_pb2.RUN_STATE_CANCELLED,
    }
)


class LogTail:
    """The runs the task log follows (pure but for its reads): each job's runs once they have
    started, each from its start; `runs` names each job's latest one."""

    def __init__(self, on_line: LineHandler, on_warning: Log | None = None) -> None:
        self.runs: dict[str, str] = {}
        #: Every run followed, with its job.
        self.job_of: dict[str, str] = {}
        #: Runs the server said have ended (their next read is their last).
        self.ended: set[str] = set()
        #: Runs read to their end.
        self.finished: set[str] = set()
        #: False once the server refused a read by run id (upstream Armada).
        self.by_run = True
        self.on_warning = on_warning
        self.cursor = LogCursor((), lambda run_id, line: on_line(self.job_of[run_id], line))

    def note(self, result: JobResult) -> bool:
        """Follow the job's run once it has started (also when its end is the first news of
        it); True when a new run replaces one followed before."""
        started = result.state == submit_pb2.RUNNING or result.state in TERMINAL
        if not result.run_id or not started:
            return False
        return self.follow(result.job_id, result.run_id, ended=result.state in TERMINAL)

    def follow(self, job_id: str, run_id: str, *, ended: bool) -> bool:
        """Follow `run_id`, the latest run of `job_id`, from its start (once); the run it
        replaces has ended. True when it replaces one followed before."""
        if ended:
            self.ended.add(run_id)
        if run_id in self.job_of:
            return False
        previous = self.runs.get(job_id)
        if previous is not None:
            self.ended.add(previous)
        self.runs[job_id] = run_id
        self._add(job_id, run_id)
        return previous is not None

    def discover(self, details: Mapping[str, job_pb2.JobDetails]) -> None:
        """At the end: follow the ended jobs' runs that the events did not show."""
        for job_id, detail in details.items():
            for run in detail.job_runs:
                if run.run_id and (run.state in _LOGGED or run.HasField("started_ts")):
                    self.ended.add(run.run_id)
                    if run.run_id not in self.job_of:
                        self._add(job_id, run.run_id)
            if job_id not in self.runs and detail.latest_run_id in self.job_of:
                self.runs[job_id] = detail.latest_run_id

    def _add(self, job_id: str, run_id: str) -> None:
        self.job_of[run_id] = job_id
        self.cursor.restart(run_id)

    def unread(self) -> list[str]:
        """The runs not yet read to their end (and not given up)."""
        return [r for r in self.cursor.jobs() if r not in self.finished]

    def reads(self) -> Generator[Step, Any, None]:
        """Read every followed run's new lines; a run known to have ended is then done. A run
        whose log cannot be read is given up with one warning; a transient failure is tried
        again next time."""
        for run_id in self.unread():
            job_id = self.job_of[run_id]
            ended = run_id in self.ended  # before the read: it then has every line
            if not self.by_run and self.runs.get(job_id) != run_id:
                self.finished.add(run_id)  # an earlier run: only readable by run id
                continue
            since = self.cursor.since[run_id]
            call = (
                ops.logs(job_id, run_id=run_id, since_time=since)
                if self.by_run
                else ops.logs(job_id, since_time=since)
            )
            try:
                lines = yield call
            except ArmadaError as e:
                if self.by_run and e.code in _NO_RUN_READS:
                    self.by_run = False  # read again by job id next time
                else:
                    self._failed(job_id, run_id, e)
                continue
            self.cursor.take(run_id, lines)
            if ended:
                self.finished.add(run_id)

    def finish(
        self,
        results: Iterable[JobResult],
        details: Mapping[str, job_pb2.JobDetails],
        *,
        attempts: int = 5,
        pause: float = 1.0,
    ) -> Generator[Step, Any, None]:
        """Every job has ended (`results`; `details` show their runs): read every run to its
        end, trying reads the server cannot answer now `attempts` times, `pause` s apart; a
        run still unread then costs a warning."""
        for result in results:
            self.note(result)
        self.discover(details)
        self.ended.update(self.job_of)
        for attempt in range(attempts):
            yield from self.reads()
            if not self.unread():
                return
            if attempt + 1 < attempts:
                yield Pause(pause)
        for run_id in self.unread():
            self._warn(
                f"could not read the last log lines of Armada job {self.job_of[run_id]} "
                f"(run {run_id}): the server did not answer"
            )

    def _failed(self, job_id: str, run_id: str, error: ArmadaError) -> None:
        if error.code in TRANSIENT_CODES:
            return  # tried again next time
        self.cursor.gave_up.add(run_id)
        self._warn(
            f"cannot follow the logs of Armada job {job_id} (run {run_id}): "
            f"{error.details or error.code.name}"
        )

    def _warn(self, text: str) -> None:
        if self.on_warning is not None:
            self.on_warning(text)
