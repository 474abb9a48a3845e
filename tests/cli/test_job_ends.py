"""`armada details` and `armada watch` say how jobs ended, as the web UI's job page does: the
state always (QUEUED too), exit codes, termination messages, failure reasons, and for a
preemption who asked for it and which job it made room for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer

from .conftest import Armada
from .servers import ended, in_state, job_file, server_config, start, wait_until


@pytest.fixture
def local(tmp_path: Path) -> Iterator[EmbeddedServer]:
    running = start(server_config(tmp_path, "local"))
    yield running
    running.stop()


@pytest.fixture
def simulated(tmp_path: Path) -> Iterator[EmbeddedServer]:
    running = start(server_config(tmp_path, "simulated"))
    yield running
    running.stop()


def submit(armada: Armada, tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    return armada.ok("submit", "-q", str(path)).split()


def test_details_says_queued(armada: Armada, tmp_path: Path) -> None:
    armada.ok("queue", "create", "q")
    [job] = submit(armada, tmp_path, job_file("q", "s", "true"))
    doc = yaml.safe_load(armada.ok("details", job))[job]
    assert doc["state"] == "QUEUED"
    assert '"state": "QUEUED"' in armada.ok("details", job, "-o", "json")


def test_details_of_a_failed_job(
    local: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(local.address, capsys)
    armada.ok("queue", "create", "q")
    script = "echo 'bad input file' > /dev/termination-log; exit 3"
    [job] = submit(armada, tmp_path, job_file("q", "s", script))
    with ArmadaClient(local.address) as c:
        wait_until(ended(c, job), "the job's end")
    doc = yaml.safe_load(armada.ok("details", job))[job]
    assert doc["state"] == "FAILED"
    assert doc["exitCodes"] == {"main": 3}
    assert doc["terminationMessages"]["main"].strip() == "bad input file"
    assert "container main exited with code 3" in doc["error"]
    [run] = doc["jobRuns"]
    assert run["state"] == "RUN_STATE_FAILED" and run["outcome"] == "failed"
    assert run["exitCodes"] == {"main": 3}
    assert run["failureReason"]
    assert "retried" not in run  # the job failed for good


def test_details_of_a_succeeded_job(
    local: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(local.address, capsys)
    armada.ok("queue", "create", "q")
    [job] = submit(armada, tmp_path, job_file("q", "s", "true"))
    with ArmadaClient(local.address) as c:
        wait_until(ended(c, job), "the job's end")
    doc = yaml.safe_load(armada.ok("details", job, "-o", "json"))[job]
    assert doc["state"] == "SUCCEEDED"
    assert doc["exitCodes"] == {"main": 0}
    assert doc["jobRuns"][0]["outcome"] == "succeeded"


def preempted_by_the_scheduler(
    armada: Armada, server: EmbeddedServer, tmp_path: Path
) -> tuple[str, str]:
    """A low-priority job (queue batch, job set fill) preempted by the scheduler to make room
    for a high-priority one: both ids."""
    armada.ok("queue", "create", "batch")
    armada.ok("queue", "create", "urgent")
    [victim] = submit(
        armada, tmp_path, job_file("batch", "fill", "sleep 600", cpu="2", simulated_seconds=600)
    )
    with ArmadaClient(server.address) as c:
        wait_until(in_state(c, victim, submit_pb2.RUNNING), "the low job to run")
        [urgent] = submit(
            armada,
            tmp_path,
            job_file(
                "urgent", "now", "sleep 600", cpu="2", priority_class="high", simulated_seconds=600
            ),
        )
        wait_until(in_state(c, victim, submit_pb2.PREEMPTED), "the low job's preemption")
    return victim, urgent


def preempted_on_request(armada: Armada, server: EmbeddedServer, tmp_path: Path) -> str:
    """A job (queue q, job set s) preempted by `armada preempt --reason maintenance`."""
    armada.ok("queue", "create", "q")
    [job] = submit(armada, tmp_path, job_file("q", "s", "sleep 600", simulated_seconds=600))
    with ArmadaClient(server.address) as c:
        wait_until(in_state(c, job, submit_pb2.RUNNING), "the job to run")
        armada.ok("preempt", "q", "s", job, "--reason", "maintenance")
        wait_until(in_state(c, job, submit_pb2.PREEMPTED), "the preemption")
    return job


def test_details_of_a_preemption_by_the_scheduler(
    simulated: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(simulated.address, capsys)
    victim, urgent = preempted_by_the_scheduler(armada, simulated, tmp_path)
    doc = yaml.safe_load(armada.ok("details", victim))[victim]
    assert doc["state"] == "PREEMPTED"
    assert doc["preemption"] == {
        "kind": "scheduler",
        "requestor": "scheduler",
        "reason": "preempted by the scheduler",
        "preemptingJobId": urgent,
    }
    [run] = doc["jobRuns"]
    assert run["outcome"] == "preempted" and run["preemption"]["preemptingJobId"] == urgent


def test_watch_names_the_job_a_preemption_made_room_for(
    simulated: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(simulated.address, capsys)
    _, urgent = preempted_by_the_scheduler(armada, simulated, tmp_path)
    watched = armada.ok("watch", "batch", "fill", "--exit-if-inactive").splitlines()
    assert any(" preempting (by the scheduler)  |" in line for line in watched)
    assert any(f" preempted (by the scheduler for job {urgent})  |" in x for x in watched)


def test_details_of_a_requested_preemption(
    simulated: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(simulated.address, capsys)
    job = preempted_on_request(armada, simulated, tmp_path)
    doc = yaml.safe_load(armada.ok("details", job))[job]
    assert doc["preemption"] == {
        "kind": "requested",
        "requestor": "anonymous",
        "reason": "maintenance",
    }


def test_watch_names_who_asked_for_a_preemption(
    simulated: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(simulated.address, capsys)
    preempted_on_request(armada, simulated, tmp_path)
    watched = armada.ok("watch", "q", "s", "--exit-if-inactive").splitlines()
    assert any(" preempting (requested by anonymous: 'maintenance')  |" in x for x in watched)
    assert any(" preempted (requested by anonymous: 'maintenance')  |" in x for x in watched)
