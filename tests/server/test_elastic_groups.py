"""Elastic pod groups through the gRPC API: the gangRole and gangRoleMinimum annotations,
members above a role's minimum placed as capacity allows, and a group preempted whole once a
role falls below its minimum."""

from __future__ import annotations

import time
from pathlib import Path

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.scheduling import reasons

from ..jobs.factories import container, item
from .test_scheduling_config import leased_jobs, serving, submit, until, wait_reasons
from .test_scheduling_loop import Executor


def member(role: str, minimum: int, size: int = 5):
    """A member of pod group "pg" (coordinator 1 + workers 4 when ``size`` is 5)."""
    return item({"containers": [container(cpu="1", memory="1Gi")]}, annotations={
        ann.GANG_ID: "pg", ann.GANG_CARDINALITY: str(size), ann.GANG_ROLE: role,
        ann.GANG_ROLE_MINIMUM: str(minimum)})


def run_all(ex: Executor) -> None:
    for lease in list(ex.held.values()):
        ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))


def test_a_pod_group_grows_with_capacity_and_goes_when_a_role_is_lost(tmp_path: Path) -> None:
    with serving(tmp_path) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
        ex.sync()
        coordinator, *workers = submit(
            api, "a", member("coordinator", 1), *[member("worker", 2) for _ in range(4)])
        # Room for the coordinator and three workers: the fourth worker waits.
        ex.wait_leases(4)
        placed = leased_jobs(ex)
        assert coordinator in placed and len(placed & set(workers)) == 3
        [waiting] = [w for w in workers if w not in placed]
        wait_reasons(api, [waiting], reasons.elastic_waits("pg", "worker"))
        run_all(ex)

        # More capacity: the waiting worker joins the running group.
        ex.nodes.append(executor_pb2.Node(name="e1-n1", allocatable={
            "cpu": "4", "memory": "8Gi"}, labels={"rack": "r1"}))
        ex.sync()
        ex.wait_leases(5)
        assert waiting in leased_jobs(ex)
        run_all(ex)

        # The coordinator is cancelled: its role is below its minimum, so every worker is
        # preempted.
        api.submit.CancelJobs(submit_pb2.JobCancelRequest(
            queue="a", job_set_id="s", job_ids=[coordinator]))
        deadline = time.monotonic() + 15
        while len({s.job_id for s in ex.stops if s.preempt}) < 4:
            assert time.monotonic() < deadline, f"stops so far: {ex.stops}"
            ex.sync()
            time.sleep(0.05)
        assert {s.job_id for s in ex.stops if s.preempt} == set(workers)


def test_a_pod_group_whose_minimums_do_not_fit_waits_whole(tmp_path: Path) -> None:
    with serving(tmp_path) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="2", memory="8Gi")
        ex.sync()
        ids = submit(api, "a", member("coordinator", 1, 3), *[member("worker", 2, 3)
                                                               for _ in range(2)])
        until(lambda: all(w for w in ids), "submission")
        wait_reasons(api, ids)
        ex.sync()
        assert not ex.held
