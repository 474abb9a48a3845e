"""The scheduling loop and the executor protocol, end to end over gRPC.

The test speaks the executor protocol itself (a real client of the real server): it reports
nodes and run updates exactly as an executor would, so every decision is the server's own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from armada_core.api import event_pb2, executor_pb2, executor_pb2_grpc, job_pb2, submit_pb2
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import PriorityClassConfig, ServerConfig

from ..jobs.factories import container, item
from .conftest import Stubs

CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)


class Executor:
    """Speaks the executor protocol for the test."""

    def __init__(
        self,
        channel: grpc.Channel,
        name: str = "e1",
        nodes: int = 2,
        cpu: str = "4",
        memory: str = "8Gi",
    ) -> None:
        self.stub = executor_pb2_grpc.ExecutorApiStub(channel)
        self.name = name
        self.nodes = [
            executor_pb2.Node(
                name=f"{name}-n{i}",
                allocatable={"cpu": cpu, "memory": memory},
                labels={"rack": f"r{i % 2}"},
            )
            for i in range(nodes)
        ]
        self.held: dict[str, executor_pb2.Lease] = {}
        self.stops: list[executor_pb2.StopRun] = []

    def sync(self, *updates: executor_pb2.RunUpdate) -> executor_pb2.SyncResponse:
        response = self.stub.Sync(
            executor_pb2.SyncRequest(
                executor_id=self.name,
                pool="default",
                nodes=self.nodes,
                run_ids=list(self.held),
                updates=list(updates),
            )
        )
        for lease in response.leases:
            self.held[lease.run_id] = lease
        self.stops += response.stop
        for update in updates:
            if update.WhichOneof("update") in ("succeeded", "failed", "returned", "stopped"):
                self.held.pop(update.run_id, None)
        return response

    def wait_leases(self, count: int, timeout: float = 10) -> list[executor_pb2.Lease]:
        deadline = time.monotonic() + timeout
        while len(self.held) < count and time.monotonic() < deadline:
            self.sync()
            time.sleep(0.05)
        assert len(self.held) >= count, f"only {len(self.held)} of {count} leases arrived"
        return list(self.held.values())

    def run_leases(self, count: int) -> dict[str, executor_pb2.Lease]:
        """Wait for `count` leases and report each running: the leases by job id."""
        leases = {lease.job.id: lease for lease in self.wait_leases(count)}
        for lease in leases.values():
            self.sync(self.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
        return leases

    def lease_of(self, job_id: str) -> executor_pb2.Lease:
        return next(lease for lease in self.held.values() if lease.job.id == job_id)

    @staticmethod
    def update(lease: executor_pb2.Lease, **kind) -> executor_pb2.RunUpdate:
        return executor_pb2.RunUpdate(run_id=lease.run_id, job_id=lease.job.id, **kind)


@pytest.fixture
def server(database_url: str) -> Iterator[EmbeddedServer]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.1,
        lease_timeout=2.0,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as running:
        yield running


def submit(api: Stubs, *items, job_set: str = "s") -> list[str]:
    response = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(queue="q", job_set_id=job_set, job_request_items=list(items))
    )
    return [i.job_id for i in response.job_response_items]


def state(api: Stubs, job_id: str) -> int:
    return api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=[job_id])).job_states[job_id]


def wait_state(
    api: Stubs, job_id: str, wanted: int, executor: Executor | None = None, timeout: float = 10
) -> None:
    deadline = time.monotonic() + timeout
    while state(api, job_id) != wanted and time.monotonic() < deadline:
        if executor is not None:
            executor.sync()
        time.sleep(0.05)
    assert submit_pb2.JobState.Name(state(api, job_id)) == submit_pb2.JobState.Name(wanted)


def kinds(api: Stubs, job_id: str, job_set: str = "s") -> list[str]:
    stream = api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue="q", id=job_set))
    out = []
    for m in stream:
        kind = m.message.WhichOneof("events")
        if getattr(m.message, kind).job_id == job_id:
            out.append(kind)
    return out


def low(cpu: str = "1", **kw) -> submit_pb2.JobSubmitRequestItem:
    return item({"containers": [container(cpu=cpu)], "priorityClassName": "low"}, **kw)


def high(cpu: str = "1", **kw) -> submit_pb2.JobSubmitRequestItem:
    return item({"containers": [container(cpu=cpu)], "priorityClassName": "high"}, **kw)


def test_jobs_are_leased_run_and_finish(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel)
    ex.sync()
    ok, bad = submit(api, low(), low())
    ex.wait_leases(2)
    a, b = ex.lease_of(ok), ex.lease_of(bad)
    assert a.pod_name == f"armada-{ok}-0" and a.node in {n.name for n in ex.nodes}
    ex.sync(
        ex.update(a, pending=executor_pb2.RunUpdate.Pending(kubernetes_id="uid-1")),
        ex.update(b, running=executor_pb2.RunUpdate.Running(node=b.node)),
    )
    ex.sync(ex.update(a, running=executor_pb2.RunUpdate.Running(node=a.node)))
    ex.sync(
        ex.update(a, succeeded=executor_pb2.RunUpdate.Succeeded()),
        ex.update(
            b,
            failed=executor_pb2.RunUpdate.Failed(
                reason="Error",
                containers=[
                    executor_pb2.ContainerResult(
                        name="main", exit_code=3, message="bad input", reason="Error"
                    )
                ],
            ),
        ),
    )
    assert state(api, ok) == submit_pb2.SUCCEEDED
    assert state(api, bad) == submit_pb2.FAILED
    assert kinds(api, ok) == ["submitted", "queued", "leased", "pending", "running", "succeeded"]
    errors = api.jobs.GetJobErrors(job_pb2.JobErrorsRequest(job_ids=[bad])).job_errors
    assert "exited with code 3: bad input" in errors[bad]
    runs = (
        api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[ok], expand_job_run=True))
        .job_details[ok]
        .job_runs
    )
    assert [(r.state, r.cluster, r.node) for r in runs] == [
        (job_pb2.RUN_STATE_SUCCEEDED, "e1", a.node)
    ]


def test_oom_is_retried_by_a_queue_policy_on_another_node(api: Stubs) -> None:
    api.policies.CreateRetryPolicy(
        submit_pb2.RetryPolicy(
            name="oom",
            retry_limit=2,
            default_action=submit_pb2.RETRY_ACTION_FAIL,
            rules=[
                submit_pb2.RetryRule(
                    action=submit_pb2.RETRY_ACTION_RETRY,
                    match_conditions=["OOMKilled"],
                    anti_affinity_mode="node",
                )
            ],
        )
    )
    api.queues.CreateQueue(submit_pb2.Queue(name="q", retry_policies=["oom"]))
    ex = Executor(api.channel)
    ex.sync()
    [job] = submit(api, low())
    [first] = ex.wait_leases(1)
    ex.sync(
        ex.update(
            first,
            failed=executor_pb2.RunUpdate.Failed(
                reason="OOMKilled",
                condition="OOMKilled",
                containers=[
                    executor_pb2.ContainerResult(name="main", exit_code=137, reason="OOMKilled")
                ],
            ),
        )
    )
    [second] = ex.wait_leases(1)
    assert second.run_index == 1 and second.pod_name == f"armada-{job}-0-1"
    assert second.node != first.node  # anti-affinity to the failed run's node
    assert kinds(api, job)[-3:] == ["failed", "queued", "leased"]


def test_cancel_stops_the_run(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel)
    ex.sync()
    [job] = submit(api, low())
    [lease] = ex.wait_leases(1)
    ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    api.submit.CancelJobs(submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[job]))
    ex.sync()
    assert [(s.run_id, s.preempt) for s in ex.stops] == [(lease.run_id, False)]
    assert state(api, job) == submit_pb2.CANCELLED


def test_a_cancel_acknowledged_before_a_runs_failure_wins_and_not_after(
    api: Stubs, queue: str
) -> None:
    """What decides how a cancelled Prefect flow run's job ends: a failure the executor reports
    after the cancel was acknowledged changes nothing (CANCELLED, no failed event); a failure
    reported before any cancel was asked for stays a failure, and the cancel that follows
    finds the job ended. No event is rewritten either way."""
    ex = Executor(api.channel)
    ex.sync()
    cancelled_first, failed_first = submit(api, low(), low())
    leases = {lease.job.id: lease for lease in ex.wait_leases(2)}
    ex.sync(
        *(
            ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node))
            for lease in leases.values()
        )
    )
    exited = executor_pb2.RunUpdate.Failed(
        reason="Error", containers=[executor_pb2.ContainerResult(name="main", exit_code=1)]
    )

    def cancel(job_id: str) -> list[str]:
        request = submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[job_id])
        return list(api.submit.CancelJobs(request).cancelled_ids)

    assert cancel(cancelled_first) == [cancelled_first]
    ex.sync(ex.update(leases[cancelled_first], failed=exited))
    ex.sync(ex.update(leases[failed_first], failed=exited))
    assert cancel(failed_first) == []

    assert state(api, cancelled_first) == submit_pb2.CANCELLED
    assert "failed" not in kinds(api, cancelled_first)
    assert kinds(api, cancelled_first)[-2:] == ["cancelling", "cancelled"]
    assert state(api, failed_first) == submit_pb2.FAILED
    assert kinds(api, failed_first)[-1] == "failed"
    assert not {"cancelling", "cancelled"} & set(kinds(api, failed_first))


def test_urgent_job_preempts_a_preemptible_one(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel, nodes=1, cpu="2")
    ex.sync()
    fillers = submit(api, low(), low())
    for lease in ex.wait_leases(2):
        ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    [urgent] = submit(api, high(), job_set="urgent")
    deadline = time.monotonic() + 10
    while not ex.stops and time.monotonic() < deadline:
        ex.sync()
        time.sleep(0.05)
    [stop] = ex.stops
    assert stop.preempt and stop.job_id in fillers
    victim = ex.held[stop.run_id]
    ex.sync(ex.update(victim, stopped=executor_pb2.RunUpdate.Stopped()))
    assert state(api, stop.job_id) == submit_pb2.PREEMPTED
    assert kinds(api, stop.job_id)[-2:] == ["preempting", "preempted"]
    [preempted] = [
        m.message.preempted
        for m in api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue="q", id="s"))
        if m.message.preempted.job_id == stop.job_id
    ]
    assert preempted.preempting_job_id == urgent  # the job placed in its room
    ex.wait_leases(2)
    assert any(lease.job.id == urgent for lease in ex.held.values())
    survivor = next(j for j in fillers if j != stop.job_id)
    assert state(api, survivor) == submit_pb2.RUNNING


def test_a_gang_is_leased_together(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel, nodes=2, cpu="4")
    ex.sync()
    gang = {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "3", ann.GANG_NODE_UNIFORMITY_LABEL: "rack"}
    # Two members fit on one rack (one node of 4 CPU); three need both racks: never placed,
    # so refused at submission (test_submission_checks.py).
    with pytest.raises(grpc.RpcError) as refused:
        submit(api, *[low(cpu="2", annotations=gang) for _ in range(3)])
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "label 'rack'" in refused.value.details()
    pair = {ann.GANG_ID: "pair", ann.GANG_CARDINALITY: "2", ann.GANG_NODE_UNIFORMITY_LABEL: "rack"}
    members = submit(api, *[low(cpu="2", annotations=pair) for _ in range(2)], job_set="pair")
    leases = ex.wait_leases(2)
    assert {lease.job.id for lease in leases} == set(members)
    assert len({lease.node for lease in leases}) == 1


def test_unschedulable_job_says_why(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel, nodes=1, cpu="2")
    # Submitted before any executor connects: a job that fits no node would be refused after.
    [job] = submit(api, low(cpu="64"))
    deadline = time.monotonic() + 10
    reason = ""
    while not reason and time.monotonic() < deadline:
        # Syncing on, as an executor does: one silent for the lease timeout (2 s here) is
        # gone, and with no executor left no cycle runs, so none gives a reason.
        ex.sync()
        details = api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[job]))
        reason = details.job_details[job].scheduling_reason
        time.sleep(0.05)
    assert reason and state(api, job) == submit_pb2.QUEUED


def test_a_silent_executor_loses_its_leases(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel)
    ex.sync()
    [job] = submit(api, low())
    [lease] = ex.wait_leases(1)
    ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    # No more syncs from e1: after lease_timeout the run expires and the job is retried
    # elsewhere (returned leases are retried up to maxAttemptedRuns).
    other = Executor(api.channel, name="e2")
    other.sync()
    [again] = other.wait_leases(1, timeout=15)
    assert again.job.id == job and again.run_index == 1
    assert "lease_expired" in kinds(api, job)
    ex.sync()  # e1 comes back: told to stop the stale run
    assert [s.run_id for s in ex.stops] == [lease.run_id]


def test_lost_pod_is_failed_and_retried(api: Stubs, queue: str) -> None:
    ex = Executor(api.channel)
    ex.sync()
    [job] = submit(api, low())
    [lease] = ex.wait_leases(1)
    ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    ex.held.clear()  # the executor restarted and lost the pod
    [again] = ex.wait_leases(1)
    assert again.job.id == job and again.run_index == 1


def test_executor_sync_validates_its_input(api: Stubs) -> None:
    stub = executor_pb2_grpc.ExecutorApiStub(api.channel)
    with pytest.raises(grpc.RpcError) as raised:
        stub.Sync(executor_pb2.SyncRequest(executor_id=""))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as raised:
        stub.Sync(
            executor_pb2.SyncRequest(
                executor_id="e", nodes=[executor_pb2.Node(name="a"), executor_pb2.Node(name="a")]
            )
        )
    assert "nodes[1].name" in raised.value.details()


def test_jobs_can_target_a_pool(api: Stubs, queue: str) -> None:
    cpu = Executor(api.channel, name="cpu-cluster")
    gpu = Executor(api.channel, name="gpu-cluster")
    cpu.sync()
    gpu.stub.Sync(executor_pb2.SyncRequest(executor_id="gpu-cluster", pool="gpu", nodes=gpu.nodes))
    [job] = submit(api, low(annotations={ann.POOL: "gpu"}))
    deadline = time.monotonic() + 10
    leases: list[executor_pb2.Lease] = []
    while not leases and time.monotonic() < deadline:
        leases = list(
            gpu.stub.Sync(
                executor_pb2.SyncRequest(executor_id="gpu-cluster", pool="gpu", nodes=gpu.nodes)
            ).leases
        )
        cpu.sync()
        time.sleep(0.05)
    assert [lease.job.id for lease in leases] == [job]
    assert cpu.held == {}


def test_a_gang_is_retried_as_a_whole(api: Stubs) -> None:
    api.policies.CreateRetryPolicy(
        submit_pb2.RetryPolicy(
            name="flaky",
            retry_limit=1,
            default_action=submit_pb2.RETRY_ACTION_FAIL,
            rules=[
                submit_pb2.RetryRule(
                    action=submit_pb2.RETRY_ACTION_RETRY,
                    exit_code_operator="In",
                    exit_code_values=[42],
                )
            ],
        )
    )
    api.queues.CreateQueue(submit_pb2.Queue(name="q", retry_policies=["flaky"]))
    ex = Executor(api.channel)
    ex.sync()
    gang = {ann.GANG_ID: "retry-me", ann.GANG_CARDINALITY: "2"}
    a, b = submit(api, low(annotations=gang), low(annotations=gang))
    first = ex.run_leases(2)
    # Member a fails in a way its policy retries: b, still running, is stopped and both are
    # placed again together (a new generation of the gang).
    ex.sync(
        ex.update(
            first[a],
            failed=executor_pb2.RunUpdate.Failed(
                reason="Error",
                containers=[
                    executor_pb2.ContainerResult(name="main", exit_code=42, reason="Error")
                ],
            ),
        )
    )
    assert first[b].run_id in {s.run_id for s in ex.stops}
    ex.held.pop(first[b].run_id)
    second = {lease.job.id: lease for lease in ex.wait_leases(2)}
    assert {j: lease.run_index for j, lease in second.items()} == {a: 1, b: 1}
    assert kinds(api, b)[-4:] == ["running", "failed", "queued", "leased"]


def test_a_retried_gang_does_not_wait_for_a_member_that_succeeded(api: Stubs) -> None:
    api.policies.CreateRetryPolicy(
        submit_pb2.RetryPolicy(
            name="flaky",
            retry_limit=2,
            default_action=submit_pb2.RETRY_ACTION_FAIL,
            rules=[
                submit_pb2.RetryRule(
                    action=submit_pb2.RETRY_ACTION_RETRY,
                    exit_code_operator="In",
                    exit_code_values=[42],
                )
            ],
        )
    )
    api.queues.CreateQueue(submit_pb2.Queue(name="q", retry_policies=["flaky"]))
    ex = Executor(api.channel)
    ex.sync()
    gang = {ann.GANG_ID: "trainers", ann.GANG_CARDINALITY: "3"}
    a, b, c = submit(api, *[low(annotations=gang) for _ in range(3)])
    first = ex.run_leases(3)
    # b finishes; then a fails in a way its policy retries. c is restarted with a, and the
    # new generation is {a, c}: b is not run again, and not waited for.
    ex.sync(ex.update(first[b], succeeded=executor_pb2.RunUpdate.Succeeded()))
    ex.sync(
        ex.update(
            first[a],
            failed=executor_pb2.RunUpdate.Failed(
                reason="Error",
                containers=[
                    executor_pb2.ContainerResult(name="main", exit_code=42, reason="Error")
                ],
            ),
        )
    )
    assert first[c].run_id in {s.run_id for s in ex.stops}
    ex.held.pop(first[c].run_id)
    second = {lease.job.id: lease for lease in ex.wait_leases(2)}
    assert {j: lease.run_index for j, lease in second.items()} == {a: 1, c: 1}
    assert state(api, b) == submit_pb2.SUCCEEDED
    # The smaller generation is retried as a whole again, and can finish.
    for lease in second.values():
        ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    ex.sync(
        ex.update(
            second[c],
            failed=executor_pb2.RunUpdate.Failed(
                reason="Error",
                containers=[
                    executor_pb2.ContainerResult(name="main", exit_code=42, reason="Error")
                ],
            ),
        )
    )
    assert second[a].run_id in {s.run_id for s in ex.stops}
    ex.held.pop(second[a].run_id)
    third = {lease.job.id: lease for lease in ex.wait_leases(2)}
    assert {j: lease.run_index for j, lease in third.items()} == {a: 2, c: 2}
    for lease in third.values():
        ex.sync(ex.update(lease, succeeded=executor_pb2.RunUpdate.Succeeded()))
    for job in (a, b, c):
        wait_state(api, job, submit_pb2.SUCCEEDED, ex)
    assert kinds(api, b)[-2:] == ["running", "succeeded"]


def test_a_cycle_writes_its_leases_in_slices_that_never_split_a_gang() -> None:
    from armada_server.scheduling.loop import slices

    where = ("e1", "n", "default")
    scheduled = {f"j{i}": where for i in range(7)}
    gangs = {"j1": ("q", "g"), "j2": ("q", "g"), "j3": ("q", "g"), "j5": ("q", "h")}
    parts = list(slices(scheduled, gangs, 2))
    assert [sorted(p) for p in parts] == [["j0", "j1", "j2", "j3"], ["j4", "j5"], ["j6"]]
    assert list(slices({}, {}, 2)) == [{}]  # preemptions and reasons are still written


def test_a_cycle_finds_the_gang_members_among_its_jobs() -> None:
    from armada_core.scheduling import Job
    from armada_server.scheduling.loop import _gang_keys

    jobs = [
        Job("a", "q", "default", gang_id="g", gang_cardinality=2),
        Job("b", "q", "default"),
        Job(
            "c", "r", "default", gang_id="", gang_cardinality=1
        ),  # an empty gang id is still a gang's
        Job("d", "q", "default", gang_id="g", gang_cardinality=2),
    ]
    assert _gang_keys(jobs) == {"a": ("q", "g"), "c": ("r", ""), "d": ("q", "g")}
    assert _gang_keys([]) == {}


def test_a_cycle_finds_its_scheduled_gang_members_from_the_views_their_rows_hold() -> None:
    from types import SimpleNamespace

    from armada_core.scheduling import Job
    from armada_server.scheduling.loop import _scheduled_gang_keys

    jobs = [
        Job("a", "q", "default", gang_id="g", gang_cardinality=2),
        Job("b", "q", "default"),
        Job("c", "r", "default", gang_id="", gang_cardinality=1),
        Job("d", "q", "default", gang_id="g", gang_cardinality=2),
        Job("e", "q", "default", gang_id="h", gang_cardinality=2),  # not scheduled
    ]
    rows = {j.id: SimpleNamespace(view=j) for j in jobs}
    scheduled = ["a", "b", "c", "d"]
    found = _scheduled_gang_keys(scheduled, rows, jobs)  # type: ignore[arg-type]
    assert found == {"a": ("q", "g"), "c": ("r", ""), "d": ("q", "g")}
    # A row without a view (a node to avoid): every job of the snapshot is walked instead.
    rows["b"] = SimpleNamespace(view=None)
    walked = _scheduled_gang_keys(scheduled, rows, jobs)  # type: ignore[arg-type]
    assert walked == {"a": ("q", "g"), "c": ("r", ""), "d": ("q", "g"), "e": ("q", "h")}
    assert _scheduled_gang_keys([], rows, jobs) == {}  # type: ignore[arg-type]


def test_jobs_differing_only_in_their_ids_share_one_conversion() -> None:
    from datetime import UTC, datetime

    from armada_core.jobs import job_from_item
    from armada_server.scheduling.snapshot import _convert, _job
    from armada_server.storage.scheduling_reads import QueuedJob

    now = datetime.now(UTC)
    gang = {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2"}
    specs = [
        job_from_item(
            low(cpu="2", annotations=gang),
            job_id=job_id,
            queue="q",
            job_set_id="s",
            owner="o",
            now=now,
            groups=(),
        )
        for job_id in ("01aaaaaaaaaaaaaaaaaaaaaaaa", "01bbbbbbbbbbbbbbbbbbbbbbbb")
    ]
    other = job_from_item(
        high(),
        job_id="01cccccccccccccccccccccccc",
        queue="q",
        job_set_id="s",
        owner="o",
        now=now,
        groups=(),
    )
    for spec in [*specs, other]:
        queued = QueuedJob(spec.id, "q", 1.0, now, spec.SerializeToString(), None, 1)
        kw = {"priority": 1.0, "submitted_at": now, "avoid_node": None, "gang_cardinality": 1}
        assert _convert(queued, **kw) == _job(spec, **kw)
    # A spec whose id is not where the serialiser puts it is converted from the spec.
    odd = QueuedJob("x", "q", 1.0, now, specs[0].SerializeToString(), None)
    assert _convert(odd, priority=1.0, submitted_at=now).id == specs[0].id


def test_a_large_held_state_is_kept_out_of_collections_until_the_next_full_read() -> None:
    """From FREEZE_FROM held jobs, a cycle that read everything freezes what it holds; the
    next such cycle returns it to the collector and collects first, so a reference cycle
    caught by a freeze waits one full read at most. Fewer jobs, or a read of changes only,
    leave the collector as it is."""
    import gc
    import weakref

    from armada_server.storage.gcpause import FREEZE_FROM, long_lived

    class Cyclic:
        def __init__(self) -> None:
            self.me = self

    gc.unfreeze()
    try:
        with long_lived(True, lambda: FREEZE_FROM - 1):
            pass
        with long_lived(False, lambda: FREEZE_FROM):
            pass
        assert gc.get_freeze_count() == 0
        caught = Cyclic()
        gone = weakref.ref(caught)
        with long_lived(True, lambda: FREEZE_FROM):
            pass
        assert gc.get_freeze_count() > 0
        del caught  # garbage now, but frozen: no collection sees it
        gc.collect()
        assert gone() is not None
        with long_lived(False, lambda: FREEZE_FROM):
            gc.collect()
            assert gone() is not None  # a read of changes only leaves it
        with long_lived(True, lambda: 0):
            assert gone() is None  # the next full read collected it first
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def retried_beside_a_preemption(api: Stubs) -> tuple[Executor, str, str, executor_pb2.Lease]:
    """A gang of two running (a, b); b's preemption is asked for, then the executor gives
    a's lease back (it lost contact and fenced it): a is queued for a retry while b's
    preemption is still under way. Returns the executor, a, b and b's lease."""
    api.queues.CreateQueue(submit_pb2.Queue(name="q"))
    ex = Executor(api.channel)
    ex.sync()
    gang = {ann.GANG_ID: "pair", ann.GANG_CARDINALITY: "2"}
    a, b = submit(api, low(annotations=gang), low(annotations=gang))
    first = ex.run_leases(2)
    api.submit.PreemptJobs(submit_pb2.JobPreemptRequest(queue="q", job_set_id="s", job_ids=[b]))
    ex.sync(
        ex.update(
            first[a],
            returned=executor_pb2.RunUpdate.Returned(reason="fenced", run_attempted=True),
        )
    )
    assert state(api, a) == submit_pb2.QUEUED
    return ex, a, b, first[b]


def test_a_retried_gang_does_not_wait_for_a_member_whose_preemption_ended_it(api: Stubs) -> None:
    """A member being preempted is left to finish its preemption when a sibling is retried;
    when that preemption ends the member for good, the retried generation goes on without
    it (before, it waited for it for ever: "gang incomplete: 1 of 2 members queued")."""
    ex, a, b, preempted = retried_beside_a_preemption(api)
    ex.sync(ex.update(preempted, stopped=executor_pb2.RunUpdate.Stopped()))
    wait_state(api, b, submit_pb2.PREEMPTED, ex)
    [again] = ex.wait_leases(1)
    assert (again.job.id, again.run_index) == (a, 1)


def test_cancelling_the_member_a_retried_gang_waits_for_ends_the_gang(api: Stubs) -> None:
    """As above, but the member being preempted is cancelled instead: the member queued for
    the retry can no longer be placed whole, so it fails and says why."""
    ex, a, b, _ = retried_beside_a_preemption(api)
    api.submit.CancelJobs(submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[b]))
    wait_state(api, a, submit_pb2.FAILED, ex)
    stream = api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue="q", id="s"))
    [failed] = [m.message.failed for m in stream if m.message.failed.job_id == a]
    assert f"gang member {b} was cancelled" in failed.reason
