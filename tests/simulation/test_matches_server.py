"""The simulator decides as the server does: one workload through the simulator (the
server's storage and loop in-process, idle cycles skipped) and through a running server
(submissions and executor syncs over gRPC, a cycle every period) on the same virtual clock
gives the same leases, on the same nodes, and the same preemptions, in the same cycles."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest

from armada_server.app import EmbeddedServer
from armada_server.config import PriorityClassConfig, ServerConfig
from armada_server.executors.nodes import virtual_nodes
from armada_server.simulation.clock import VirtualClock
from armada_server.simulation.driver import EXECUTOR, Driver
from armada_server.simulation.ports import InProcess, OverGrpc
from armada_server.simulation.recording import Recording
from armada_server.simulation.run import simulation_config
from armada_server.simulation.workload import Workload, parse_workload

pytestmark = pytest.mark.slow  # simulations of hours, through real storage

CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)

# Queue a fills the cluster with preemptible jobs; b's urgent jobs then take room from them
# (preemptions), a's later short jobs with a lifetime wait; then everything ends.
WORKLOAD = {
    "queues": [{"name": "a"}, {"name": "b", "priority_factor": 2}],
    "nodes": [{"count": 2, "cpu": "8", "memory": "32Gi"}],
    "jobs": [
        {"queue": "a", "count": 20, "every": 5, "runtime": 300, "cpu": "2", "memory": "2Gi"},
        {"queue": "b", "at": 60, "count": 4, "runtime": 120, "cpu": "4", "priority_class": "high"},
        {"queue": "a", "at": 200, "count": 6, "runtime": 60, "cpu": "1", "lifetime": 30},
        {"queue": "b", "at": 400, "count": 3, "every": 40, "runtime": 200, "cpu": "3"},
    ],
}


def config() -> ServerConfig:
    return ServerConfig(
        priority_classes=CLASSES,
        default_priority_class="low",
        scheduling_period=10.0,
        lease_timeout=30.0,
    )


def decisions(rec: Recording) -> list[tuple[int, str, str, str]]:
    """Each cycle's decisions (in no particular order within a cycle: a sync lists the
    runs to stop in the database's order)."""
    return sorted((d.step, d.kind, d.job, d.node) for d in rec.decisions)


def in_process(workload: Workload, tmp: Path, every_cycle: bool = False) -> Recording:
    tmp.mkdir(parents=True, exist_ok=True)
    clock = VirtualClock()
    settings = simulation_config(config())
    port = InProcess(settings, tmp / "simulated.db", clock.now)
    nodes = virtual_nodes(workload.nodes, EXECUTOR)
    try:
        driver = Driver(workload, settings, port, clock, nodes, every_cycle=every_cycle)
        return asyncio.run(driver.run())
    finally:
        port.close()


def over_grpc(workload: Workload, database_url: str) -> Recording:
    clock = VirtualClock()
    settings = simulation_config(config())
    server = EmbeddedServer(
        settings, database_url=database_url, clock=clock.now, cycles=False
    ).start()
    try:
        assert server.server.scheduler is not None
        port = OverGrpc(server.address, server.server.scheduler)
        nodes = virtual_nodes(workload.nodes, EXECUTOR)
        try:
            driver = Driver(workload, settings, port, clock, nodes, every_cycle=True)
            return asyncio.run(driver.run())
        finally:
            port.close()
    finally:
        server.stop()


def test_the_simulator_decides_as_the_server_does(database_url: str) -> None:
    workload = parse_workload(WORKLOAD, "comparison")
    with tempfile.TemporaryDirectory() as tmp:
        simulated = in_process(workload, Path(tmp))
    served = over_grpc(workload, database_url)
    assert decisions(simulated) == decisions(served)
    kinds = {d.kind for d in simulated.decisions}
    assert kinds == {"leased", "preempted"}, "the workload must make both kinds of decision"
    # Every job ran, and succeeded unless preempted (a preempted job fails, as it does on the
    # server without a retry policy); skipping idle cycles made the simulator take fewer steps.
    assert all(j.runs and (j.succeeded or j.preemptions) for j in simulated.jobs.values())
    assert len(simulated.times) < len(served.times)


@pytest.mark.parametrize("every_cycle", [False, True])
def test_two_runs_of_a_workload_are_identical(tmp_path: Path, every_cycle: bool) -> None:
    workload = parse_workload(WORKLOAD, "twice")
    first = in_process(workload, tmp_path / "1", every_cycle)
    second = in_process(workload, tmp_path / "2", every_cycle)
    assert decisions(first) == decisions(second)
    assert first.shares == second.shares
