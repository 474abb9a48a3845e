"""The one wait every integration uses (`lifecycle.wait` / `wait_async`): its pure parts
(progress lines, log runs, status checks, the steps it takes) and the wait itself against real
servers: logs of a running job, waiting reasons, a server restarted mid-wait, vanished jobs,
the orchestrator's cancel check, timeouts and interruptions."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from armada_core.api import binoculars_pb2, event_pb2, job_pb2
from armada_core.api import submit_pb2 as pb
from armada_core.client import (
    ArmadaClient,
    AsyncArmadaClient,
    Cancelled,
    Notice,
    StopSignal,
    WaitTimeout,
    WatchOptions,
    error_for,
    gang_items,
    job_item,
    queue,
)
from armada_core.client import operations as ops
from armada_core.client.lifecycle import (
    AskCancel,
    JobsVanished,
    LogTail,
    News,
    Progress,
    StatusCheck,
    TaskEnd,
    WaitSettings,
    Watch,
    job_labels,
    notice_line,
    wait,
    wait_async,
    wait_steps,
)
from armada_core.client.lifecycle.steps import Pause
from armada_core.client.tracking import TERMINAL, JobResult, JobTracker
from armada_core.retry import load_policy
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

from .conftest import Servers, pod
from .test_watch import FAST, eventually, watchers

# --- pure parts -----------------------------------------------------------------------------


def _event(kind: str, job_id: str, **fields: Any) -> event_pb2.EventStreamMessage:
    message = event_pb2.EventStreamMessage(id="1")
    getattr(message.message, kind).CopyFrom(
        getattr(event_pb2, f"Job{''.join(p.title() for p in kind.split('_'))}Event")(
            job_id=job_id, **fields
        )
    )
    return message


def _replay(events: list[event_pb2.EventStreamMessage]) -> list[tuple[bool, str]]:
    tracker = JobTracker(["a"])
    progress = Progress({"a": "job a"})
    said: list[tuple[bool, str]] = []
    for message in events:
        result = tracker.apply(message)
        assert result is not None
        said += progress.lines(message, result)
    return said


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (
            [_event("submitted", "a"), _event("queued", "a")],
            [(False, "Armada job a is SUBMITTED"), (False, "Armada job a is QUEUED")],
        ),
        # the node is said once placed; a repeated state is not said again
        (
            [
                _event("leased", "a", run_id="r1", node_name="n1"),
                _event("pending", "a", run_id="r1"),
                _event("running", "a", run_id="r1", node_name="n1"),
                _event("reprioritized", "a"),
            ],
            [
                (False, "Armada job a is LEASED on node n1"),
                (False, "Armada job a is PENDING on node n1"),
                (False, "Armada job a is RUNNING on node n1"),
            ],
        ),
        # a failure the server retries is a warning, then the job waits again
        (
            [
                _event("running", "a", run_id="r1", node_name="n1"),
                _event(
                    "failed", "a", run_id="r1", node_name="n1", retryable=True, reason="OOMKilled"
                ),
                _event("running", "a", run_id="r2", node_name="n2"),
                _event("succeeded", "a", run_id="r2", node_name="n2"),
            ],
            [
                (False, "Armada job a is RUNNING on node n1"),
                (True, "Armada job a failed (OOMKilled); the server runs it again"),
                (False, "Armada job a is QUEUED (after 1 server-side retries)"),
                (False, "Armada job a is RUNNING on node n2 (after 1 server-side retries)"),
                (False, "Armada job a is SUCCEEDED on node n2 (after 1 server-side retries)"),
            ],
        ),
        (
            [
                _event("running", "a", run_id="r1", node_name="n1"),
                _event("preempted", "a", run_id="r1"),
            ],
            [
                (False, "Armada job a is RUNNING on node n1"),
                (True, "Armada job a is PREEMPTED on node n1"),
            ],
        ),
    ],
)
def test_progress_lines(
    events: list[event_pb2.EventStreamMessage], expected: list[tuple[bool, str]]
) -> None:
    assert _replay(events) == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("reconnecting", (True, "Armada event stream: m")),
        ("polling", (True, "Armada event stream: m")),
        ("connected", (False, "Armada event stream: m")),
        ("resumed", (False, "Armada event stream: m")),
        ("silent", None),
        ("ended", None),
    ],
)
def test_notice_lines(kind: str, expected: tuple[bool, str] | None) -> None:
    assert notice_line(Notice(kind, "m")) == expected


def test_job_labels() -> None:
    assert job_labels(["a"]) == {"a": "job a"}
    assert job_labels(["a", "b"]) == {"a": "member 0 job a", "b": "member 1 job b"}


@pytest.mark.parametrize(
    ("seen", "followed", "new_runs"),
    [
        # not followed before a run has started
        ([(pb.QUEUED, ""), (pb.LEASED, "r1"), (pb.PENDING, "r1")], {}, []),
        ([(pb.RUNNING, "r1"), (pb.RUNNING, "r1"), (pb.SUCCEEDED, "r1")], {"a": "r1"}, [False]),
        # a server-side retry: the new run is followed from its start
        ([(pb.RUNNING, "r1"), (pb.QUEUED, "r1"), (pb.RUNNING, "r2")], {"a": "r2"}, [False, True]),
        # ended without a run: nothing to read
        ([(pb.CANCELLED, "")], {}, []),
        # ended before its running event was seen (polling): read once at the end
        ([(pb.FAILED, "r1")], {"a": "r1"}, [False]),
    ],
)
def test_log_tail_follows_each_run(
    seen: list[tuple[int, str]], followed: dict[str, str], new_runs: list[bool]
) -> None:
    tail = LogTail(lambda job, line: None)
    noted = []
    for state, run in seen:
        before = dict(tail.runs)
        again = tail.note(JobResult("a", state=state, run_id=run))
        if tail.runs != before:
            noted.append(again)
    assert tail.runs == followed and noted == new_runs
    # every run that started is followed, a replaced one too (it has ended)
    runs = list(dict.fromkeys(run for state, run in seen if run and state not in _NOT_STARTED))
    assert tail.unread() == runs
    assert tail.ended == set(runs[:-1]) | {r for state, r in seen if r and state in TERMINAL}


_NOT_STARTED = (pb.QUEUED, pb.LEASED, pb.PENDING)


class Reads:
    """Answers a LogTail's read calls from each run's lines (a run id -> lines, or an error to
    raise once), and records each call's run id and since_time."""

    def __init__(self, lines: dict[str, list[str] | list[Any]]) -> None:
        self.lines = lines
        self.calls: list[tuple[str, str, str]] = []

    def drive(self, steps: Any) -> None:
        answer: Any = None
        try:
            step = steps.send(None)
            while True:
                if not isinstance(step, ops.Call):
                    step = steps.send(None)  # a Pause
                    continue
                request = step.request
                self.calls.append((request.job_id, request.run_id, request.since_time))
                queued = self.lines[request.run_id or request.job_id]
                if queued and isinstance(queued[0], Exception):
                    step = steps.throw(queued.pop(0))
                    continue
                answer = [
                    binoculars_pb2.LogLine(timestamp=f"2026-01-01T00:00:0{i}Z", line=text)
                    for i, text in enumerate(queued)
                    if f"2026-01-01T00:00:0{i}Z" > request.since_time
                ]
                step = steps.send(answer)
        except StopIteration:
            pass


def test_a_run_replaced_before_it_was_read_is_read_to_its_end_by_its_id() -> None:
    got: list[tuple[str, str]] = []
    tail = LogTail(lambda job, line: got.append((job, line)))
    tail.note(JobResult("a", state=pb.RUNNING, run_id="r1"))
    tail.note(JobResult("a", state=pb.QUEUED, run_id="r1"))  # retried by the server
    tail.note(JobResult("a", state=pb.RUNNING, run_id="r2"))
    reads = Reads({"r1": ["first 1", "first 2"], "r2": ["second"]})
    reads.drive(tail.reads())
    assert got == [("a", "first 1"), ("a", "first 2"), ("a", "second")]
    assert [(job, run) for job, run, _ in reads.calls] == [("", "r1"), ("", "r2")]
    # r1 ended before that read: it is done; r2 still runs and is read again from its last line
    reads.lines["r2"].append("more")
    reads.drive(tail.finish([JobResult("a", state=pb.SUCCEEDED, run_id="r2")], {}))
    assert got[3:] == [("a", "more")] and tail.unread() == []
    assert reads.calls[2] == ("", "r2", "2026-01-01T00:00:00Z")


def test_runs_only_the_details_show_are_read_at_the_end() -> None:
    """The events showed the job's end only (e.g. while the stream was down): its runs are
    found in its details, each read to its end; a run that never started is not read."""
    got: list[str] = []
    tail = LogTail(lambda job, line: got.append(line))
    details = {
        "a": job_pb2.JobDetails(
            job_id="a",
            latest_run_id="r2",
            job_runs=[
                job_pb2.JobRunDetails(run_id="r0", state=job_pb2.RUNS_STATE_LEASE_RETURNED),
                job_pb2.JobRunDetails(run_id="r1", state=job_pb2.RUN_STATE_FAILED),
                job_pb2.JobRunDetails(run_id="r2", state=job_pb2.RUN_STATE_SUCCEEDED),
            ],
        )
    }
    reads = Reads({"r1": ["one"], "r2": ["two"]})
    reads.drive(tail.finish([JobResult("a", state=pb.SUCCEEDED)], details))
    assert got == ["one", "two"] and tail.runs == {"a": "r2"}


def test_the_last_read_is_tried_again_when_the_server_cannot_answer() -> None:
    got: list[str] = []
    warnings: list[str] = []
    tail = LogTail(lambda job, line: got.append(line), warnings.append)
    unavailable = error_for(grpc.StatusCode.UNAVAILABLE, "busy", "Logs")
    reads = Reads({"r1": [unavailable, unavailable, "line"]})
    reads.drive(tail.finish([JobResult("a", state=pb.SUCCEEDED, run_id="r1")], {}))
    assert got == ["line"] and warnings == [] and len(reads.calls) == 3
    # a server that never answers: the run's lines are said to be missing, not lost silently
    tail = LogTail(lambda job, line: got.append(line), warnings.append)
    reads = Reads({"r1": [unavailable] * 5})
    reads.drive(tail.finish([JobResult("a", state=pb.SUCCEEDED, run_id="r1")], {}, pause=0))
    assert warnings == [
        "could not read the last log lines of Armada job a (run r1): the server did not answer"
    ]


def test_a_server_without_run_reads_is_read_by_job_id() -> None:
    """Upstream Armada refuses a read by run id (job_id empty): the job's latest run is read
    by job id instead."""
    got: list[str] = []
    tail = LogTail(lambda job, line: got.append(line))
    refused = error_for(grpc.StatusCode.INVALID_ARGUMENT, "job_id: must not be empty", "Logs")
    reads = Reads({"r1": [refused], "a": ["line"]})
    reads.drive(tail.finish([JobResult("a", state=pb.SUCCEEDED, run_id="r1")], {}, pause=0))
    assert got == ["line"] and [(j, r) for j, r, _ in reads.calls] == [("", "r1"), ("a", "")]


def _details(**states: int) -> dict[str, job_pb2.JobDetails]:
    return {j: job_pb2.JobDetails(job_id=j, state=s) for j, s in states.items()}


def test_status_check_counts_a_job_gone_only_after_vanish_after() -> None:
    check = StatusCheck(["a", "b"], vanish_after=60)
    assert check.answered(_details(a=pb.QUEUED, b=pb.QUEUED), 0) == []
    assert check.answered(_details(a=pb.QUEUED), 10) == []  # b missing since 10
    assert check.answered(_details(a=pb.QUEUED, b=pb.RUNNING), 20) == []  # back: forgotten
    assert check.answered(_details(a=pb.QUEUED), 30) == []
    assert check.answered(_details(a=pb.QUEUED, b=pb.UNKNOWN), 89) == []
    assert check.answered(_details(a=pb.QUEUED), 90) == ["b"]
    assert StatusCheck(["a"], vanish_after=0).answered({}, 5) == ["a"]


@pytest.mark.parametrize(
    ("code", "stops"),
    [
        (grpc.StatusCode.UNAVAILABLE, False),  # a server restarting: skipped
        (grpc.StatusCode.DEADLINE_EXCEEDED, False),
        (grpc.StatusCode.INTERNAL, False),
        (grpc.StatusCode.UNIMPLEMENTED, True),  # a server without the Jobs service
        (grpc.StatusCode.PERMISSION_DENIED, True),
    ],
)
def test_status_check_rides_over_transient_failures(code: grpc.StatusCode, stops: bool) -> None:
    check = StatusCheck(["a"], vanish_after=60)
    warning = check.failed(error_for(code, "no"))
    assert (warning is not None) == stops and check.enabled is not stops


def _steps(**kwargs: Any) -> tuple[Any, Any, list[str]]:
    said: list[str] = []
    now = [0.0]
    flow = wait_steps(
        "q", "js", ["a"], log=said.append, clock=lambda: now[0], wall=lambda: 1000.0, **kwargs
    )
    return flow, now, said


def test_steps_check_first_then_follow_the_stream_and_read_details_at_the_end() -> None:
    settings = WaitSettings(stream_logs=False, check_interval=10)
    flow, now, said = _steps(settings=settings)
    step = next(flow)
    assert step == Watch(0.0)  # the first check is due at once
    step = flow.send(News())
    assert isinstance(step, ops.Call) and step.method == "GetJobDetails"
    step = flow.send(_details(a=pb.QUEUED))
    assert step == Watch(10.0)
    now[0] = 4.0
    step = flow.send(News(events=[(_event("cancelled", "a"), JobResult("a", state=pb.CANCELLED))]))
    assert step == Watch(6.0)
    step = flow.send(News(results={"a": JobResult("a", state=pb.CANCELLED)}))
    assert isinstance(step, ops.Call) and step.request.expand_job_run
    with pytest.raises(StopIteration) as done:
        flow.send({})
    end: TaskEnd = done.value.value
    assert end.report.outcome.value == "cancelled" and end.payload()["job_ids"] == ["a"]
    assert said == ["Armada job a QUEUED 0s", "Armada job a is CANCELLED"]


def test_steps_ask_the_cancel_check_and_cancel_once() -> None:
    settings = WaitSettings(stream_logs=False, check_interval=1000, cancel_check_interval=5)
    flow, now, said = _steps(settings=settings, cancel_check=True)
    next(flow)
    step = flow.send(News())  # details
    step = flow.send(_details(a=pb.RUNNING))
    assert step == Watch(5.0)
    now[0] = 5.0
    assert flow.send(News()) == AskCancel()
    step = flow.send(None)  # not yet
    assert step == Watch(5.0)
    now[0] = 10.0
    assert flow.send(News()) == AskCancel()
    step = flow.send("flow run cancelled")
    assert isinstance(step, ops.Call) and step.method == "CancelJobs"
    assert step.request.reason == "flow run cancelled"
    step = flow.send(["a"])
    assert step == Watch(990.0)  # never asked again
    step = flow.send(News(results={"a": JobResult("a", state=pb.CANCELLED)}))
    with pytest.raises(StopIteration) as done:
        flow.send({})
    assert done.value.value.cancelled == "flow run cancelled"
    assert "Cancelling Armada job(s) a: flow run cancelled" in said


def _ended_run(job_id: str, *, finished: bool) -> dict[str, job_pb2.JobDetails]:
    run = job_pb2.JobRunDetails(run_id="r", job_id=job_id, state=job_pb2.RUN_STATE_CANCELLED)
    if finished:
        run.finished_ts.seconds = 1
    return {job_id: job_pb2.JobDetails(job_id=job_id, state=pb.CANCELLED, job_runs=[run])}


@pytest.mark.parametrize("cancelled_by_the_wait", [True, False])
def test_jobs_the_wait_cancelled_end_once_their_processes_are_gone(
    cancelled_by_the_wait: bool,
) -> None:
    """A run the server ended has no finished time until its executor confirms its processes
    gone: after cancelling, the wait reads the details again until it has one. Jobs cancelled
    by someone else end the wait at once (their end is not the task's doing)."""
    settings = WaitSettings(stream_logs=False, check_interval=1000, cancel_check_interval=5)
    flow, now, said = _steps(settings=settings, cancel_check=True)
    next(flow)
    flow.send(News())
    flow.send(_details(a=pb.RUNNING))
    if cancelled_by_the_wait:
        now[0] = 5.0
        assert flow.send(News()) == AskCancel()
        flow.send("flow run cancelled")
        flow.send(["a"])
    step = flow.send(News(results={"a": JobResult("a", state=pb.CANCELLED)}))
    assert isinstance(step, ops.Call) and step.request.expand_job_run
    if cancelled_by_the_wait:
        assert flow.send(_ended_run("a", finished=False)) == Pause(0.5)
        step = flow.send(None)
        assert isinstance(step, ops.Call) and step.method == "GetJobDetails"
        assert flow.send(_ended_run("a", finished=False)) == Pause(0.5)
        flow.send(None)
        assert said.count("Waiting for the processes of Armada job(s) a to stop") == 1
    with pytest.raises(StopIteration) as done:
        flow.send(_ended_run("a", finished=cancelled_by_the_wait))
    end: TaskEnd = done.value.value
    assert end.details["a"].job_runs[0].HasField("finished_ts") is cancelled_by_the_wait


def test_the_wait_for_cancelled_processes_gives_up_after_its_limit() -> None:
    """A server that never confirms the processes gone does not hold the task forever."""
    settings = WaitSettings(stream_logs=False, check_interval=1000, cancel_check_interval=5)
    warnings: list[str] = []
    flow, now, _ = _steps(settings=settings, cancel_check=True, warn=warnings.append)
    next(flow)
    flow.send(News())
    flow.send(_details(a=pb.RUNNING))
    now[0] = 5.0
    assert flow.send(News()) == AskCancel()
    flow.send("flow run cancelled")
    flow.send(["a"])
    flow.send(News(results={"a": JobResult("a", state=pb.CANCELLED)}))
    assert flow.send(_ended_run("a", finished=False)) == Pause(0.5)
    now[0] = 304.0
    flow.send(None)
    assert flow.send(_ended_run("a", finished=False)) == Pause(0.5)  # not yet: 299 s
    now[0] = 305.0
    flow.send(None)
    with pytest.raises(StopIteration) as done:
        flow.send(_ended_run("a", finished=False))
    assert done.value.value.cancelled == "flow run cancelled"
    assert warnings == [
        "Armada job(s) a were cancelled, but their processes were not confirmed gone within 300 s"
    ]


def test_steps_raise_when_the_jobs_vanish_or_the_stream_fails() -> None:
    flow, _, _ = _steps(settings=WaitSettings(vanish_after=0))
    next(flow)
    flow.send(News())
    with pytest.raises(JobsVanished, match="no longer knows job"):
        flow.send({})
    flow, _, _ = _steps()
    next(flow)
    with pytest.raises(WaitTimeout):
        flow.send(News(error=WaitTimeout("jobs still not finished: a")))


# --- against real servers -------------------------------------------------------------------

QUICK = WatchOptions(
    reconnect_delay=0.02, max_reconnect_delay=0.1, poll_interval=0.2, silence_timeout=5.0
)


def _settings(**overrides: Any) -> WaitSettings:
    values: dict[str, Any] = dict(
        log_interval=0.2,
        check_interval=0.2,
        waiting_interval=60,
        cancel_check_interval=0.2,
        watch=QUICK,
    )
    return WaitSettings(**{**values, **overrides})


class Flavour:
    """Runs the wait with the blocking client, or the asyncio one on a loop of its own."""

    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address

    def wait(self, *args: Any, **kwargs: Any) -> TaskEnd:
        settings = {"timeout": 10, "options": FAST}
        if self.name == "sync":
            with ArmadaClient(self.address, **settings) as client:
                return wait(client, *args, **kwargs)

        async def run() -> TaskEnd:
            async with AsyncArmadaClient(self.address, **settings) as client:
                return await wait_async(client, *args, **kwargs)

        return asyncio.run(run())


@pytest.fixture(params=["sync", "async"])
def flavour(request: pytest.FixtureRequest, servers: Servers) -> Flavour:
    return Flavour(request.param, servers.address)


class Lines(list[str]):
    """Thread-safe enough for appends; `has` waits for a line containing a text."""

    def has(self, text: str, timeout: float = 20) -> None:
        eventually(lambda: any(text in line for line in list(self)), timeout)


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as e:  # checked by the test
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_the_wait_rides_over_a_server_restart(
    servers: Servers, client: ArmadaClient, flavour: Flavour
) -> None:
    """Waiting lines come from the details checks; while the server restarts (same
    database and address) checks and stream fail and the wait goes on; the jobs' end after
    the restart ends it."""
    client.create_queue(queue("q"))
    ids = client.submit_jobs("q", "s", [job_item(pod()) for _ in range(2)])
    lines, warnings = Lines(), Lines()
    thread, outcome = _in_thread(
        lambda: flavour.wait(
            "q",
            "s",
            ids,
            log=lines.append,
            warn=warnings.append,
            settings=_settings(vanish_after=0),
        )
    )
    lines.has(f"Armada member 0 job {ids[0]} QUEUED")
    lines.has(f"Armada member 1 job {ids[1]} QUEUED")
    servers.stop()
    warnings.has("Armada event stream: event stream failed")
    time.sleep(1.0)  # several checks meet the stopped server
    servers.start()
    with ArmadaClient(servers.address, timeout=10) as admin:
        admin.cancel_jobs("q", "s", ids, reason="done with it")
    thread.join(30)
    assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
    end: TaskEnd = outcome["value"]
    assert end.job_ids == ids
    assert {r.state for r in end.results.values()} == {pb.CANCELLED}
    payload = end.payload()
    assert payload["outcome"] == "cancelled" and payload["job_ids"] == ids
    assert {j["cancel_reason"] for j in payload["jobs"]} == {"done with it"}
    assert f"Armada member 0 job {ids[0]} is CANCELLED" in lines
    assert not [w for w in warnings if "cannot read the details" in w]  # checks skipped only


def test_a_stop_signal_ends_a_blocking_wait_at_once(servers: Servers, client: ArmadaClient) -> None:
    client.create_queue(queue("q"))
    [job] = client.submit_jobs("q", "s", [job_item(pod())])
    stop = StopSignal()
    thread, outcome = _in_thread(lambda: client.wait_for_jobs("q", "s", [job], stop=stop))
    eventually(lambda: watchers(servers) == 1)
    stop.set()
    thread.join(5)
    assert isinstance(outcome.get("error"), Cancelled)
    eventually(lambda: watchers(servers) == 0)
    with pytest.raises(Cancelled):  # set before: no stream is opened
        client.wait_for_jobs("q", "s", [job], stop=stop)


def test_jobs_the_server_does_not_know_end_the_wait(
    servers: Servers, client: ArmadaClient, flavour: Flavour
) -> None:
    client.create_queue(queue("q"))
    started = time.monotonic()
    with pytest.raises(JobsVanished) as vanished:
        flavour.wait("q", "s", ["01nosuchjob"], settings=_settings(vanish_after=0.5))
    assert vanished.value.job_ids == ["01nosuchjob"]
    assert time.monotonic() - started < 10


def test_the_orchestrator_cancel_check_cancels_the_jobs(
    servers: Servers, client: ArmadaClient, flavour: Flavour
) -> None:
    client.create_queue(queue("q"))
    [job] = client.submit_jobs("q", "s", [job_item(pod())])
    asked = []

    def check() -> str | None:
        asked.append(True)
        return "the flow run was cancelled" if len(asked) == 3 else None

    async def acheck() -> str | None:
        return check()

    lines = Lines()
    end = flavour.wait(
        "q",
        "s",
        [job],
        log=lines.append,
        settings=_settings(),
        cancel_check=check if flavour.name == "sync" else acheck,
    )
    assert len(asked) == 3 and end.cancelled == "the flow run was cancelled"
    assert end.results[job].cancel_reason == "the flow run was cancelled"
    assert end.report.outcome.value == "cancelled"
    assert f"Cancelling Armada job(s) {job}: the flow run was cancelled" in lines


def test_a_timeout_cancels_the_jobs(
    servers: Servers, client: ArmadaClient, flavour: Flavour
) -> None:
    client.create_queue(queue("q"))
    [job] = client.submit_jobs("q", "s", [job_item(pod())])
    warnings = Lines()
    with pytest.raises(WaitTimeout):
        flavour.wait("q", "s", [job], warn=warnings.append, settings=_settings(timeout=0.5))
    assert client.get_job_details([job])[job].cancel_reason == "timed out after 0.5 s"
    assert f"Cancelling Armada job(s) {job}: timed out after 0.5 s" in warnings


@pytest.mark.parametrize("reason", ["the step was interrupted", None])
def test_an_interrupted_wait_cancels_the_jobs_only_with_a_reason(
    servers: Servers, client: ArmadaClient, reason: str | None
) -> None:
    """The blocking wait: an exception out of the task's own code (here its log) ends it."""
    client.create_queue(queue("q"))
    [job] = client.submit_jobs("q", "s", [job_item(pod())])

    def log(line: str) -> None:
        if "is QUEUED" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), ArmadaClient(servers.address, timeout=10) as waiting:
        wait(waiting, "q", "s", [job], log=log, settings=_settings(), cancel_reason=reason)
    state = client.get_job_status([job])[job]
    assert state == (pb.CANCELLED if reason else pb.QUEUED)
    if reason:
        assert client.get_job_details([job])[job].cancel_reason == reason


@pytest.mark.parametrize("reason", ["the Prefect run was interrupted", None])
async def test_cancelling_the_waiting_task_cancels_the_jobs_only_with_a_reason(
    servers: Servers, client: ArmadaClient, aclient: AsyncArmadaClient, reason: str | None
) -> None:
    client.create_queue(queue("q"))
    [job] = client.submit_jobs("q", "s", [job_item(pod())])
    lines = Lines()
    task = asyncio.create_task(
        wait_async(
            aclient, "q", "s", [job], log=lines.append, settings=_settings(), cancel_reason=reason
        )
    )
    for _ in range(500):
        if any("is QUEUED" in line for line in lines):
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state = client.get_job_status([job])[job]
    assert state == (pb.CANCELLED if reason else pb.QUEUED)
    if reason:
        assert client.get_job_details([job])[job].cancel_reason == reason


# --- with a local executor: logs of running jobs --------------------------------------------


@pytest.fixture(scope="module")
def running_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    root = tmp_path_factory.mktemp("armada-local")
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        sandbox_dir=str(root / "pods"),
        database_url=f"sqlite:///{root / 'armada.db'}",
        nodes=(NodeGroup(1, "4", "8Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
        heartbeat_seconds=1,
    )
    with EmbeddedServer(config) as running:
        with ArmadaClient(running.address) as admin:
            admin.create_queue(queue("q"))
        yield running


def _script(script: str) -> dict[str, Any]:
    spec = pod()
    spec["containers"][0]["command"] = ["sh", "-c", script]
    return spec


@pytest.mark.parametrize("name", ["sync", "async"])
def test_a_task_the_cancel_check_ended_ends_once_its_process_is_gone(
    running_server: EmbeddedServer, tmp_path: Path, name: str
) -> None:
    """The job's process takes a second to stop on its termination signal (a flow run's
    process cancelling its own tasks' jobs): the wait returns only after it has."""
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    spec = _script(
        f"trap 'sleep 1; touch {stopped}; exit 0' TERM; touch {started}; "
        "while true; do sleep 0.1; done"
    )
    spec["terminationGracePeriodSeconds"] = 30
    with ArmadaClient(running_server.address) as admin:
        [job] = admin.submit_jobs("q", f"stops-{name}", [job_item(spec)])

    def check() -> str | None:
        return "the flow run was cancelled" if started.exists() else None

    async def acheck() -> str | None:
        return check()

    said = Lines()
    end = Flavour(name, running_server.address).wait(
        "q",
        f"stops-{name}",
        [job],
        log=said.append,
        settings=_settings(),
        cancel_check=check if name == "sync" else acheck,
    )
    assert stopped.exists(), "the wait ended before the job's process did"
    assert end.report.outcome.value == "cancelled"
    assert all(run.HasField("finished_ts") for run in end.details[job].job_runs)
    assert f"Waiting for the processes of Armada job(s) {job} to stop" in said


@pytest.mark.parametrize("name", ["sync", "async"])
def test_the_jobs_log_lines_reach_the_task_log_once_each(
    running_server: EmbeddedServer, tmp_path: Path, name: str
) -> None:
    with ArmadaClient(running_server.address) as admin:
        ids = admin.submit_jobs(
            "q",
            f"logs-{name}",
            [
                job_item(_script("for i in 1 2 3; do echo line $i; sleep 0.3; done")),
                job_item(_script("echo other; exit 3")),
            ],
        )
    lines: list[tuple[str, str]] = []
    said = Lines()
    events: list[str] = []
    end = Flavour(name, running_server.address).wait(
        "q",
        f"logs-{name}",
        ids,
        log=said.append,
        on_line=lambda job, line: lines.append((job, line)),
        on_event=lambda m, r: events.append(m.message.WhichOneof("events")),
        settings=_settings(),
    )
    assert [line for job, line in lines if job == ids[0]] == ["line 1", "line 2", "line 3"]
    assert [line for job, line in lines if job == ids[1]] == ["other"]
    assert f"Armada member 0 job {ids[0]} is RUNNING on node " in "\n".join(said)
    assert "running" in events and "succeeded" in events and "failed" in events
    payload = end.payload()
    assert payload["outcome"] == "user_error"
    assert [j["state"] for j in payload["jobs"]] == ["SUCCEEDED", "FAILED"]
    assert payload["jobs"][1]["exit_codes"] == {"main": 3}
    assert payload["duration_seconds"] is not None


#: How many times each of the jobs that end at once runs: enough to meet a read that races
#: the end of a run.
ROUNDS = 5


@pytest.mark.parametrize("name", ["sync", "async"])
def test_every_line_of_jobs_that_end_at_once_reaches_the_task_log_once(
    running_server: EmbeddedServer, name: str
) -> None:
    """A job and a gang of three whose containers write a line and exit at once, round after
    round: each member's line is copied once, however the end and the reads interleave."""
    flavour = Flavour(name, running_server.address)
    with ArmadaClient(running_server.address) as admin:
        for round_ in range(ROUNDS):
            for size in (1, 3):
                job_set = f"at-once-{name}-{round_}-{size}"
                spec = _script("echo line of $ARMADA_JOB_ID")
                items = [job_item(spec)] if size == 1 else gang_items(spec, replicas=3)
                ids = admin.submit_jobs("q", job_set, items)
                lines: list[tuple[str, str]] = []
                flavour.wait(
                    "q",
                    job_set,
                    ids,
                    on_line=lambda job, line, lines=lines: lines.append((job, line)),
                    settings=_settings(log_interval=0.05),
                )
                assert sorted(lines) == sorted((j, f"line of {j}") for j in ids), job_set


RETRY_EXIT_3 = """
kind: RetryPolicy
metadata: {name: retry-exit-3}
spec:
  retryLimit: 1
  rules:
    - action: Retry
      onExitCodes: {operator: In, values: [3]}
"""


@pytest.mark.parametrize("name", ["sync", "async"])
def test_a_run_the_server_retried_keeps_its_lines(
    running_server: EmbeddedServer, tmp_path: Path, name: str
) -> None:
    """The first run writes a line and fails at once, the server runs the job again: the
    first run is read to its end by its own id although the second replaced it before any
    read (the wait reads only at the end here)."""
    marker = tmp_path / "first-run"
    script = (
        f"if [ -e {marker} ]; then echo second run; else touch {marker}; echo first run; exit 3; fi"
    )
    with ArmadaClient(running_server.address) as admin:
        if "retry-exit-3" not in [p.name for p in admin.get_retry_policies()]:
            admin.create_retry_policy(load_policy(RETRY_EXIT_3))
        ids = admin.submit_jobs(
            "q", f"retried-{name}", [job_item(_script(script), retry_policy="retry-exit-3")]
        )
    lines: list[str] = []
    end = Flavour(name, running_server.address).wait(
        "q",
        f"retried-{name}",
        ids,
        on_line=lambda job, line: lines.append(line),
        settings=_settings(log_interval=3600),
    )
    [result] = end.results.values()
    assert result.state == pb.SUCCEEDED and len(result.retryable_failures) == 1
    assert lines == ["first run", "second run"]


def test_the_default_log_lines_are_labelled(running_server: EmbeddedServer) -> None:
    with ArmadaClient(running_server.address) as admin:
        [job] = admin.submit_jobs("q", "labelled", [job_item(_script("echo hello"))])
        said = Lines()
        end = wait(admin, "q", "labelled", [job], log=said.append, settings=_settings())
    assert f"[job {job}] hello" in said
    assert end.report.outcome.value == "succeeded"
