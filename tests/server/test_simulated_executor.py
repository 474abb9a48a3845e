"""The simulated executor on a real server: runs that last their annotated time, one node's
room shared in turn, stops, and a job whose duration annotation is not a number of seconds.

Each run is a timer, not a task (executors/simulated.py): these check what a run's timer
decides against what the server then shows, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.executors.simulated import DURATION

from .test_metrics import job
from .test_preemption_events import in_state, one_node_config, wait_until


@pytest.fixture
def one_node(database_url: str) -> Iterator[ArmadaClient]:
    """One simulated node of 2 CPUs and 4Gi (no HTTP port: tests run side by side)."""
    config = one_node_config(database_url)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        yield armada


def test_runs_take_the_node_in_turn_and_a_bad_duration_fails_only_its_job(
    one_node: ArmadaClient,
) -> None:
    armada = one_node
    [first] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="0.5")])
    bad = job(cpu="2", seconds="0.5")
    bad.annotations[DURATION] = "soon"
    [broken] = armada.submit_jobs("q", "s", [bad])
    [second] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="0.5")])
    for job_id in (first, second):
        wait_until(in_state(armada, job_id, submit_pb2.SUCCEEDED), "each whole-node job to end")
    wait_until(in_state(armada, broken, submit_pb2.FAILED), "the job of a bad duration to fail")
    error = armada.get_job_errors([broken])[broken]
    assert f"{DURATION} must be a number of seconds (0 or more), got 'soon'" in error, error
    [running] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="600")])
    wait_until(in_state(armada, running, submit_pb2.RUNNING), "a long job to run")
    assert armada.cancel_jobs("q", "s", [running]) == [running]
    [after] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="0")])
    wait_until(in_state(armada, running, submit_pb2.CANCELLED), "the long job to be cancelled")
    wait_until(in_state(armada, after, submit_pb2.SUCCEEDED), "the node to be free again")
