"""Elastic pod groups through the gRPC API: the gangRole and gangRoleMinimum annotations,
members above a role's minimum placed as capacity allows, and a group preempted whole once a
role falls below its minimum (saying why). An elastic member preempted or cancelled goes
alone; the group restarts or is cut only when a role can no longer keep its minimum. What the
storage decides (retries alone, restarts, cuts) runs on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from armada_core import scheduling as sched
from armada_core.api import event_pb2, executor_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import annotations as ann
from armada_core.scheduling import reasons
from armada_core.scheduling.fast import fast_schedule
from armada_core.scheduling.reference import reference_schedule
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig
from armada_server.executors.simulated import DURATION
from armada_server.storage import Storage
from armada_server.storage.database import open_database

from ..jobs.factories import container, item
from .conftest import Stubs
from .test_scheduling_config import leased_jobs, serving, submit, until, wait_reasons
from .test_scheduling_loop import Executor, state


def member(role: str, minimum: int, size: int = 5):
    """A member of pod group "pg" (coordinator 1 + workers 4 when ``size`` is 5)."""
    return item(
        {"containers": [container(cpu="1", memory="1Gi")]},
        annotations={
            ann.GANG_ID: "pg",
            ann.GANG_CARDINALITY: str(size),
            ann.GANG_ROLE: role,
            ann.GANG_ROLE_MINIMUM: str(minimum),
        },
    )


def run_all(ex: Executor) -> None:
    for lease in list(ex.held.values()):
        ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))


def running_group(api: Stubs) -> tuple[Executor, str, list[str]]:
    """Pod group "pg" of queue "a" (a coordinator, 4 workers of minimum 2) running on one
    node with room for all: the executor, the coordinator and the workers."""
    ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
    ex.sync()
    coordinator, *workers = submit(
        api, "a", member("coordinator", 1), *[member("worker", 2) for _ in range(4)]
    )
    ex.wait_leases(5)
    run_all(ex)
    return ex, coordinator, workers


def test_a_pod_group_grows_with_capacity_and_goes_when_a_role_is_lost(tmp_path: Path) -> None:
    with serving(tmp_path) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
        ex.sync()
        coordinator, *workers = submit(
            api, "a", member("coordinator", 1), *[member("worker", 2) for _ in range(4)]
        )
        # Room for the coordinator and three workers: the fourth worker waits.
        ex.wait_leases(4)
        placed = leased_jobs(ex)
        assert coordinator in placed and len(placed & set(workers)) == 3
        [waiting] = [w for w in workers if w not in placed]
        wait_reasons(api, [waiting], reasons.elastic_waits("pg", "worker"))
        run_all(ex)

        # More capacity: the waiting worker joins the running group.
        ex.nodes.append(
            executor_pb2.Node(
                name="e1-n1", allocatable={"cpu": "4", "memory": "8Gi"}, labels={"rack": "r1"}
            )
        )
        ex.sync()
        ex.wait_leases(5)
        assert waiting in leased_jobs(ex)
        run_all(ex)

        # The coordinator is cancelled: its role is below its minimum, so every worker is
        # preempted.
        api.submit.CancelJobs(
            submit_pb2.JobCancelRequest(queue="a", job_set_id="s", job_ids=[coordinator])
        )
        deadline = time.monotonic() + 15
        while len({s.job_id for s in ex.stops if s.preempt}) < 4:
            assert time.monotonic() < deadline, f"stops so far: {ex.stops}"
            ex.sync()
            time.sleep(0.05)
        assert {s.job_id for s in ex.stops if s.preempt} == set(workers)
        # The scheduler says why: the preempting event, then the preempted one once the
        # executor has stopped them.
        why = reasons.role_below_minimum("pg", "coordinator", 0, 1)
        assert {e.reason for e in events(api, "preempting").values()} == {why}
        for w in workers:
            ex.sync(ex.update(ex.lease_of(w), stopped=executor_pb2.RunUpdate.Stopped()))
        assert {w: e.reason for w, e in events(api, "preempted").items()} == dict.fromkeys(
            workers, why
        )


def test_a_new_leader_knows_a_role_whose_members_have_all_ended(
    tmp_path: Path, database_url: str
) -> None:
    """The coordinator is cancelled while no server runs (another replica took the cancel
    before this one came to lead): the server started again has never seen it running, yet
    reads its role and minimum from storage and takes the workers down."""
    with serving(tmp_path, database_url=database_url) as (_, api, _path):
        ex, coordinator, workers = running_group(api)
        held = dict(ex.held)
    engine = open_database(database_url)
    try:
        assert Storage(engine).submissions.cancel("a", "s", [coordinator]) == [coordinator]
    finally:
        engine.dispose()
    with serving(tmp_path, queues=(), database_url=database_url) as (_, api, _path):
        again = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        again.held = {k: v for k, v in held.items() if v.job.id != coordinator}
        until(
            lambda: (
                again.sync() is not None
                and {s.job_id for s in again.stops if s.preempt} >= set(workers)
            ),
            "the workers' preemption",
        )
        why = reasons.role_below_minimum("pg", "coordinator", 0, 1)
        assert {e.reason for e in events(api, "preempting").values()} == {why}


def test_a_pod_group_whose_minimums_do_not_fit_waits_whole(tmp_path: Path) -> None:
    with serving(tmp_path) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="2", memory="8Gi")
        # Submitted before the executor connects: a group that fits no node is refused after.
        ids = submit(
            api, "a", member("coordinator", 1, 3), *[member("worker", 2, 3) for _ in range(2)]
        )
        ex.sync()
        until(lambda: all(w for w in ids), "submission")
        wait_reasons(api, ids)
        ex.sync()
        assert not ex.held


def events(api: Stubs, kind: str) -> dict:
    """The latest event of this kind of each job of job set "s" in queue "a"."""
    stream = api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue="a", id="s"))
    return {
        getattr(m.message, kind).job_id: getattr(m.message, kind)
        for m in stream
        if m.message.WhichOneof("events") == kind
    }


def retry_preemptions(api: Stubs) -> None:
    """Queue "a" retries preempted jobs."""
    api.policies.CreateRetryPolicy(
        submit_pb2.RetryPolicy(
            name="again",
            retry_limit=5,
            default_action=submit_pb2.RETRY_ACTION_FAIL,
            rules=[
                submit_pb2.RetryRule(
                    action=submit_pb2.RETRY_ACTION_RETRY, match_conditions=["Preempted"]
                )
            ],
        )
    )
    api.queues.UpdateQueue(submit_pb2.Queue(name="a", priority_factor=1, retry_policies=["again"]))


def states(api: Stubs, job_ids: list[str]) -> set[str]:
    return {submit_pb2.JobState.Name(state(api, j)) for j in job_ids}


def obey(ex: Executor) -> bool:
    """Sync once and do what the stops say: a preempted run reports that it stopped, any
    other stopped run is no longer held. True, for use in conditions."""
    for stop in ex.sync().stop:
        lease = ex.held.get(stop.run_id)
        if lease is not None and stop.preempt:
            ex.sync(ex.update(lease, stopped=executor_pb2.RunUpdate.Stopped()))
        elif lease is not None:
            ex.held.pop(stop.run_id)
    return True


def steady(ex: Executor, seconds: float = 1.0) -> None:
    """Sync for a while (scheduling cycles run every 0.1 s), collecting any stops."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ex.sync()
        time.sleep(0.05)


def test_a_preempted_elastic_member_is_retried_alone(tmp_path: Path, database_url: str) -> None:
    with serving(tmp_path, database_url=database_url) as (_, api, _path):
        retry_preemptions(api)
        ex, coordinator, workers = running_group(api)
        # One worker (above the minimum of 2) is preempted by hand and stops: it alone goes
        # back to the queue and runs again, as a late member; no one else is stopped.
        elastic = workers[-1]
        first = ex.lease_of(elastic)
        api.submit.PreemptJobs(
            submit_pb2.JobPreemptRequest(
                queue="a", job_set_id="s", job_ids=[elastic], reason="maintenance"
            )
        )
        until(lambda: ex.sync().stop, "the stop of the preempted worker")
        assert {(s.job_id, s.preempt) for s in ex.stops} == {(elastic, True)}
        ex.sync(ex.update(first, stopped=executor_pb2.RunUpdate.Stopped()))
        ex.wait_leases(5)
        assert ex.lease_of(elastic).run_index == 1
        steady(ex, 0.5)
        assert {s.job_id for s in ex.stops} == {elastic}
        assert states(api, [coordinator, *workers[:-1]]) == {"RUNNING"}
        assert {lease.run_index for lease in ex.held.values() if lease.job.id != elastic} == {0}


def test_a_core_member_retried_restarts_the_group(tmp_path: Path, database_url: str) -> None:
    with serving(tmp_path, database_url=database_url) as (_, api, _path):
        retry_preemptions(api)
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        coordinator, *workers = submit(
            api, "a", member("coordinator", 1, 3), *[member("worker", 1, 3) for _ in range(2)]
        )
        ex.wait_leases(3)
        run_all(ex)
        # The coordinator is the whole of its role: its retry breaks the group, which
        # starts again as a whole (the workers are stopped and queued with it).
        api.submit.PreemptJobs(
            submit_pb2.JobPreemptRequest(queue="a", job_set_id="s", job_ids=[coordinator])
        )
        until(lambda: obey(ex) and not ex.held, "every member's stop")
        leases = ex.wait_leases(3)
        assert {lease.job.id: lease.run_index for lease in leases} == {
            coordinator: 1,
            workers[0]: 1,
            workers[1]: 1,
        }


def test_cancelling_elastic_members_leaves_the_group(tmp_path: Path, database_url: str) -> None:
    with serving(tmp_path, database_url=database_url) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="2", memory="8Gi")
        # Submitted before the executor connects: a group that fits no node is refused after.
        coordinator, *workers = submit(
            api, "a", member("coordinator", 1), *[member("worker", 2) for _ in range(4)]
        )
        ex.sync()
        wait_reasons(api, [coordinator, *workers])
        # Queued: one worker cancelled, the rest still reach every minimum and wait on.
        api.submit.CancelJobs(
            submit_pb2.JobCancelRequest(queue="a", job_set_id="s", job_ids=[workers[0]])
        )
        assert states(api, [coordinator, *workers[1:]]) == {"QUEUED"}
        # With room, the four left run.
        ex.nodes[0].allocatable["cpu"] = "8"
        ex.wait_leases(4)
        assert leased_jobs(ex) == {coordinator, *workers[1:]}
        run_all(ex)
        # Running: another worker cancelled (the role keeps its minimum of 2): only it stops.
        api.submit.CancelJobs(
            submit_pb2.JobCancelRequest(queue="a", job_set_id="s", job_ids=[workers[1]])
        )
        steady(ex)
        assert {(s.job_id, s.preempt) for s in ex.stops} == {(workers[1], False)}
        assert states(api, [coordinator, *workers[2:]]) == {"RUNNING"}
        # One more: the workers are below their minimum, and the group is preempted.
        api.submit.CancelJobs(
            submit_pb2.JobCancelRequest(queue="a", job_set_id="s", job_ids=[workers[2]])
        )
        until(
            lambda: (
                obey(ex) and {s.job_id for s in ex.stops if s.preempt} == {coordinator, workers[3]}
            ),
            "the group's preemption",
        )


def test_cancelling_a_role_below_its_minimum_cuts_a_waiting_group(
    tmp_path: Path, database_url: str
) -> None:
    with serving(tmp_path, database_url=database_url) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="2", memory="8Gi")
        # Submitted before the executor connects: a group that fits no node is refused after.
        coordinator, *workers = submit(
            api, "a", member("coordinator", 1), *[member("worker", 2) for _ in range(4)]
        )
        ex.sync()
        wait_reasons(api, [coordinator, *workers])
        api.submit.CancelJobs(
            submit_pb2.JobCancelRequest(queue="a", job_set_id="s", job_ids=workers[:2])
        )
        assert states(api, [coordinator, *workers[2:]]) == {"QUEUED"}
        api.submit.CancelJobs(
            submit_pb2.JobCancelRequest(queue="a", job_set_id="s", job_ids=[workers[2]])
        )
        assert states(api, [coordinator, workers[3]]) == {"FAILED"}
        failed = events(api, "failed")
        assert failed[coordinator].reason == (
            f"gang member {workers[2]} was cancelled: role worker can no longer reach its "
            "minimum (1 of its 2 members left or succeeded)"
        )


def test_members_that_succeeded_keep_their_roles(tmp_path: Path, database_url: str) -> None:
    """The coordinator ends first, then a worker: they succeeded, so nothing is preempted;
    a worker preempted later is retried alone while the one running and the one that
    succeeded keep the workers' minimum."""
    with serving(tmp_path, database_url=database_url) as (_, api, _path):
        retry_preemptions(api)
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        coordinator, *workers = submit(
            api, "a", member("coordinator", 1, 4), *[member("worker", 2, 4) for _ in range(3)]
        )
        ex.wait_leases(4)
        run_all(ex)
        for done in (coordinator, workers[0]):
            ex.sync(ex.update(ex.lease_of(done), succeeded=executor_pb2.RunUpdate.Succeeded()))
        steady(ex)
        # (A run reported ended is told to stop once, as no longer active.)
        assert {s.job_id for s in ex.stops} <= {coordinator, workers[0]}
        assert not [s for s in ex.stops if s.preempt]
        assert states(api, [coordinator, workers[0]]) == {"SUCCEEDED"}
        assert states(api, workers[1:]) == {"RUNNING"}
        # workers[1] preempted: workers[2] running and workers[0] succeeded keep the minimum
        # of 2, and the coordinator's role is kept by the one that succeeded.
        first = ex.lease_of(workers[1])
        api.submit.PreemptJobs(
            submit_pb2.JobPreemptRequest(queue="a", job_set_id="s", job_ids=[workers[1]])
        )
        until(lambda: ex.sync().stop, "the stop of the preempted worker")
        ex.sync(ex.update(first, stopped=executor_pb2.RunUpdate.Stopped()))
        ex.wait_leases(2)
        assert ex.lease_of(workers[1]).run_index == 1
        run_all(ex)
        steady(ex, 0.5)
        assert {s.job_id for s in ex.stops if s.preempt} == {workers[1]}
        assert {s.job_id for s in ex.stops} <= {coordinator, *workers[:2]}
        assert ex.lease_of(workers[2]).run_index == 0
        for w in workers[1:]:
            ex.sync(ex.update(ex.lease_of(w), succeeded=executor_pb2.RunUpdate.Succeeded()))
        assert states(api, [coordinator, *workers]) == {"SUCCEEDED"}


def test_a_pod_group_whose_members_end_at_different_times_succeeds(database_url: str) -> None:
    """Through the simulated executor: the coordinator ends first, the workers one after
    the other; every member succeeds and none is preempted."""
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="simulated",
        database_url=database_url,
        nodes=(NodeGroup(1, "8", "16Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.1,
    )

    def pod(role: str, minimum: int, seconds: float) -> submit_pb2.JobSubmitRequestItem:
        return job_item(
            {
                "containers": [
                    {
                        "name": "main",
                        "command": ["true"],
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ]
            },
            annotations={
                ann.GANG_ID: "pg",
                ann.GANG_CARDINALITY: "4",
                ann.GANG_ROLE: role,
                ann.GANG_ROLE_MINIMUM: str(minimum),
                DURATION: str(seconds),
            },
        )

    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="a", priority_factor=1))
        ids = armada.submit_jobs(
            "a",
            "s",
            [
                pod("coordinator", 1, 0.2),
                pod("worker", 2, 0.6),
                pod("worker", 2, 1.0),
                pod("worker", 2, 1.4),
            ],
        )
        final = {
            submit_pb2.SUCCEEDED,
            submit_pb2.FAILED,
            submit_pb2.CANCELLED,
            submit_pb2.PREEMPTED,
        }
        until(
            lambda: set(armada.get_job_status(ids).values()) <= final,
            "every member's end",
            timeout=60,
        )
        assert set(armada.get_job_status(ids).values()) == {submit_pb2.SUCCEEDED}


@pytest.mark.parametrize("impl", [fast_schedule, reference_schedule])
def test_both_schedulers_say_why_a_broken_group_is_preempted(impl) -> None:  # type: ignore[no-untyped-def]
    """The reason the server stores comes from the role rules both implementations share."""

    def worker(k: int) -> sched.Job:
        return sched.Job(
            f"w{k}",
            "a",
            "low",
            sched.Resources(cpu=1000),
            gang_id="g",
            gang_cardinality=3,
            gang_role="worker",
            gang_role_min=2,
            node="e/n1",
            start_time=1.0,
            gang_roles=(("coordinator", 1), ("worker", 2)),
        )

    snapshot = sched.Snapshot(
        queues=(sched.Queue("a"),),
        priority_classes=(sched.PriorityClass("low", 0, preemptible=True),),
        nodes=(sched.Node("e/n1", sched.Resources(cpu=4000)),),
        jobs=(worker(1), worker(2)),
    )
    result = impl(snapshot)
    why = reasons.role_below_minimum("g", "coordinator", 0, 1)
    assert result.preempted == {"w1", "w2"}
    assert result.preempt_reasons == {"w1": why, "w2": why}
