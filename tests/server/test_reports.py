"""The scheduling, queue and job reports (SchedulerReporting) against a real server on each
database: the figures are the cycle's own, a job's reasons are kept as changes, the kept
cycles are bounded, and reads obey queue permissions.

The test speaks the executor protocol itself, as tests/server/test_scheduling_loop.py does.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import func, select

from armada_core.api import (
    executor_pb2,
    executor_pb2_grpc,
    scheduler_reporting_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_core.api import scheduler_reporting_pb2 as pb
from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig
from armada_server.config import ServerConfig
from armada_server.storage import schema as t

from .conftest import Stubs
from .test_scheduling_loop import CLASSES, Executor, high, submit

NO_ROOM = "0 of 2 matching nodes have 4 cpu, 1Gi memory free"


@pytest.fixture
def server(database_url: str, request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A server keeping the last 4 cycles' reports, or as many as the test's indirect
    parameter says."""
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.05,
        lease_timeout=30.0,
        priority_classes=CLASSES,
        default_priority_class="low",
        report_cycles=getattr(request, "param", 4),
    )
    with EmbeddedServer(config) as running:
        yield running


def reporting(api: Stubs) -> scheduler_reporting_pb2_grpc.SchedulerReportingStub:
    return scheduler_reporting_pb2_grpc.SchedulerReportingStub(api.channel)


def until(check: Callable[[], Any], what: str, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


def job_report(api: Stubs, job_id: str) -> dict[str, Any]:
    answer = reporting(api).GetJobReport(pb.JobReportRequest(job_id=job_id))
    report: dict[str, Any] = json.loads(answer.json)
    return report


# Enough cycles kept that the job's reasons outlive the test's reads: with 4, the reason it
# waited for went within 4 cycles of its placement, sometimes before a read saw both.
@pytest.mark.parametrize("server", [1000], indirect=True)
def test_reports_say_what_the_cycles_did_and_why_a_job_waits(
    api: Stubs, queue: str, server: EmbeddedServer
) -> None:
    ex = Executor(api.channel, nodes=2, cpu="4", memory="8Gi")
    ex.sync()
    first, second = submit(api, high(cpu="4"), high(cpu="4"))
    ex.wait_leases(2)
    [waiting] = submit(api, high(cpu="4"))
    until(lambda: job_report(api, waiting)["history"], "no reason was kept for the job")
    # Some cycles later the job still waits for the same reason: one change is kept.
    until(lambda: (job_report(api, waiting)["history"][0]["cycles"] or 0) >= 3, "no cycles")
    said = job_report(api, waiting)
    [span] = said["history"]
    assert span["reason"] == NO_ROOM
    assert said["state"] == "QUEUED" and (said["placeInLine"], said["lineLength"]) == (1, 1)
    assert said["needs"].startswith("room on a matching node")
    # Both nodes match and each lacks the 4 CPUs the running jobs hold.
    assert [n["lacks"] for n in said["nearestNodes"]] == [{"cpu": "4"}, {"cpu": "4"}]

    # The scheduling report: the cycle's own figures. q holds the cluster's 8 CPUs and asks
    # for 4 more: actual share 1.0, demand 1.5; alone, its fair share is 1, capped at demand.
    answer = reporting(api).GetSchedulingReport(pb.SchedulingReportRequest(cycles=2))
    report = json.loads(answer.json)
    latest = report["cycles"][0]
    assert [c["cycle"] for c in report["cycles"]] == [latest["cycle"], latest["cycle"] - 1]
    q = latest["queues"]["q"]
    assert (q["fairShare"], q["adjustedFairShare"], q["share"], q["demand"]) == (
        1.0,
        1.0,
        1.0,
        1.5,
    )
    assert (q["queued"], q["running"]) == (1, 2)
    assert q["pools"] == {"default": {"running": 2, "scheduled": 0, "preempted": 0}}
    assert latest["considered"] == {"queued": 1, "running": 2}
    assert latest["waiting"] == {NO_ROOM: 1}
    assert latest["pools"]["default"]["nodes"] == 2
    assert f"cycle {latest['cycle']}" in answer.report and NO_ROOM in answer.report

    # The queue report: one job waits, for want of room.
    queue_report = reporting(api).GetQueueReport(pb.QueueReportRequest(queue_name="q"))
    found = json.loads(queue_report.json)
    assert [(g["reason"], g["count"], g["oldestJobId"]) for g in found["waiting"]] == [
        (NO_ROOM, 1, waiting)
    ]
    assert found["heldBy"] == NO_ROOM and found["standing"]["demand"] == 1.5
    assert f"held back by: {NO_ROOM}" in queue_report.report

    # A running job ends: the waiting one is placed, and its history says so.
    ex.sync(ex.update(ex.lease_of(first), succeeded=executor_pb2.RunUpdate.Succeeded()))
    until(lambda: len(job_report(api, waiting)["history"]) == 2, "the job was not placed")
    waited, placed = job_report(api, waiting)["history"]
    assert waited["reason"] == NO_ROOM and waited["cycles"] >= 3
    assert (
        placed["reason"] == "placed"
        and placed["fromCycle"] == waited["fromCycle"] + waited["cycles"]
    )
    text = reporting(api).GetJobReport(pb.JobReportRequest(job_id=waiting)).report
    assert f"waited because {NO_ROOM} for {waited['cycles']} cycles" in text
    assert f"then placed in cycle {placed['fromCycle']}" in text
    assert second  # still running


def test_only_the_last_cycles_are_kept(api: Stubs, queue: str, server: EmbeddedServer) -> None:
    ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
    ex.sync()
    submit(api, high(cpu="4"))
    ex.wait_leases(1)
    store = server.server.storage
    assert store is not None
    until(lambda: store.cycle_reports.next_cycle() > 10, "fewer than 10 cycles ran")
    kept = store.cycle_reports.cycles(100)
    assert 1 <= len(kept) <= 4  # report_cycles
    numbers = [c.cycle for c in kept]
    assert numbers == sorted(numbers, reverse=True) and numbers[0] - numbers[-1] < 4


def test_reason_history_is_pruned_but_keeps_a_waiting_jobs_reason(
    api: Stubs, queue: str, server: EmbeddedServer
) -> None:
    store = server.server.storage
    assert store is not None
    ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
    ex.sync()
    submit(api, high(cpu="4"))
    ex.wait_leases(1)
    [waiting] = submit(api, high(cpu="4"))
    until(lambda: store.cycle_reports.history(waiting), "no reason kept")
    first = store.cycle_reports.history(waiting)[0][0]
    # Many cycles later (beyond report_cycles, so reasons were pruned) it is still there.
    until(lambda: store.cycle_reports.next_cycle() > first + 12, "too few cycles")
    assert store.cycle_reports.history(waiting) == [
        (first, "0 of 1 matching node has 4 cpu, 1Gi memory free")
    ]
    with store.engine.connect() as conn:
        rows = conn.execute(select(func.count()).select_from(t.job_reasons)).scalar_one()
    assert rows == 0  # its only reason is the one in force, kept on its row


def test_reports_refuse_what_does_not_exist(api: Stubs, queue: str) -> None:
    stub = reporting(api)
    with pytest.raises(grpc.RpcError) as missing_queue:
        stub.GetQueueReport(pb.QueueReportRequest(queue_name="nope"))
    assert missing_queue.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as missing_job:
        stub.GetJobReport(pb.JobReportRequest(job_id="01hzzzzzzzzzzzzzzzzzzzzzzz"))
    assert missing_job.value.code() == grpc.StatusCode.NOT_FOUND
    assert "not found" in (missing_job.value.details() or "")
    with pytest.raises(grpc.RpcError) as bad:
        stub.GetSchedulingReport(pb.SchedulingReportRequest(cycles=-1))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cycles: -1" in (bad.value.details() or "")
    empty = stub.GetSchedulingReport(pb.SchedulingReportRequest())
    assert empty.report == "no scheduling cycle kept yet\n"


# --- permissions ---------------------------------------------------------------------------


def basic(user: str) -> list[tuple[str, str]]:
    token = base64.b64encode(f"{user}:{user}-pw".encode()).decode()
    return [("authorization", f"Basic {token}")]


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    users = {name: {"password": f"{name}-pw"} for name in ("alice", "bob", "carol")}
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        scheduling_period=0.05,
        auth=AuthConfig.from_mapping({"basic": {"users": users}, "admins": ["alice"]}),
        database_url=f"sqlite:///{tmp_path / 'a.db'}",
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as running:
        yield running


def test_reports_obey_queue_permissions(auth_server: EmbeddedServer) -> None:
    channel = grpc.insecure_channel(auth_server.address)
    queues = submit_pb2_grpc.QueueServiceStub(channel)
    watch_q = submit_pb2.Queue.Permissions(
        subjects=[submit_pb2.Queue.Permissions.Subject(kind="User", name="bob")],
        verbs=["watch"],
    )
    queues.CreateQueue(submit_pb2.Queue(name="q", permissions=[watch_q]), metadata=basic("alice"))
    queues.CreateQueue(submit_pb2.Queue(name="secret"), metadata=basic("alice"))
    submit_stub = submit_pb2_grpc.SubmitStub(channel)
    ids = {}
    for name in ("q", "secret"):
        response = submit_stub.SubmitJobs(
            submit_pb2.JobSubmitRequest(queue=name, job_set_id="s", job_request_items=[high()]),
            metadata=basic("alice"),
        )
        ids[name] = response.job_response_items[0].job_id
    ex = Executor(channel, nodes=1, cpu="4", memory="8Gi")
    ex.stub = _AsAdmin(executor_pb2_grpc.ExecutorApiStub(channel))  # type: ignore[assignment]
    ex.wait_leases(2)
    stub = scheduler_reporting_pb2_grpc.SchedulerReportingStub(channel)

    def queues_seen(user: str) -> set[str]:
        answer = stub.GetSchedulingReport(pb.SchedulingReportRequest(), metadata=basic(user))
        cycles = json.loads(answer.json)["cycles"]
        return set(cycles[0]["queues"]) if cycles else set()

    until(lambda: queues_seen("alice") == {"q", "secret"}, "no cycle weighed both queues")
    assert queues_seen("bob") == {"q"}
    assert queues_seen("carol") == set()

    def code(call: Callable[..., object], request: object, user: str | None) -> grpc.StatusCode:
        try:
            call(request, metadata=basic(user) if user else None)
        except grpc.RpcError as e:
            return e.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK

    for user, allowed in (("alice", {"q", "secret"}), ("bob", {"q"}), ("carol", set())):
        for name in ("q", "secret"):
            want = grpc.StatusCode.OK if name in allowed else grpc.StatusCode.PERMISSION_DENIED
            queue_call = pb.QueueReportRequest(queue_name=name)
            assert code(stub.GetQueueReport, queue_call, user) == want
            assert code(stub.GetJobReport, pb.JobReportRequest(job_id=ids[name]), user) == want
    anonymous = code(stub.GetQueueReport, pb.QueueReportRequest(queue_name="q"), None)
    assert anonymous == grpc.StatusCode.UNAUTHENTICATED
    channel.close()


class _AsAdmin:
    """The test's executor speaks as an administrator."""

    def __init__(self, stub: executor_pb2_grpc.ExecutorApiStub) -> None:
        self.stub = stub

    def Sync(self, request: executor_pb2.SyncRequest) -> executor_pb2.SyncResponse:
        return self.stub.Sync(request, metadata=basic("alice"))


def test_no_reports_are_kept_with_report_cycles_0(database_url: str) -> None:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.05,
        priority_classes=CLASSES,
        default_priority_class="low",
        report_cycles=0,
    )
    with EmbeddedServer(config) as running, grpc.insecure_channel(running.address) as channel:
        submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        ex = Executor(channel, nodes=1, cpu="4", memory="8Gi")
        ex.sync()
        jobs = submit_pb2_grpc.SubmitStub(channel).SubmitJobs(
            submit_pb2.JobSubmitRequest(queue="q", job_set_id="s", job_request_items=[high()] * 5)
        )
        ex.wait_leases(4)  # the fifth waits for room, as the cycles go on
        waiting = next(i.job_id for i in jobs.job_response_items if not ex_has(ex, i.job_id))
        store = running.server.storage
        assert store is not None
        until(lambda: store.job_reads.scheduling_reasons([waiting]), "no reason was given")
        stub = scheduler_reporting_pb2_grpc.SchedulerReportingStub(channel)
        said = stub.GetSchedulingReport(pb.SchedulingReportRequest())
        assert said.report == "no scheduling cycle kept yet\n"
        assert (
            json.loads(stub.GetJobReport(pb.JobReportRequest(job_id=waiting)).json)["history"] == []
        )
        assert store.cycle_reports.next_cycle() == 1


def ex_has(ex: Executor, job_id: str) -> bool:
    return any(lease.job.id == job_id for lease in ex.held.values())


@pytest.mark.parametrize(
    ("value", "error"),
    [(-1, "report_cycles: must be at least 0, got -1"), ("many", "must be a whole number")],
)
def test_report_cycles_is_checked(value: object, error: str) -> None:
    from armada_server.config import ConfigError

    with pytest.raises(ConfigError, match=error):
        ServerConfig(report_cycles=value).validate()  # type: ignore[arg-type]
