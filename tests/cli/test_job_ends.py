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


def test_a_preemption_by_the_scheduler_names_the_job_it_made_room_for(
    simulated: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(simulated.address, capsys)
    armada.ok("queue", "create", "batch")
    armada.ok("queue", "create", "urgent")
    sleep = "sleep 600"
    [victim] = submit(armada, tmp_path, job_file("batch", "fill", sleep, cpu="2"))
    with ArmadaClient(simulated.address) as c:
        wait_until(in_state(c, victim, submit_pb2.RUNNING), "the low job to run")
        [urgent] = submit(
            armada, tmp_path, job_file("urgent", "now", sleep, cpu="2", priority_class="high")
        )
        wait_until(in_state(c, victim, submit_pb2.PREEMPTED), "the low job's preemption")
    doc = yaml.safe_load(armada.ok("details", victim))[victim]
    assert doc["state"] == "PREEMPTED"
    assert doc["preemption"] == {
        "kind": "scheduler",
        "requestor": "scheduler",
        "reason": "preempted by the scheduler",
        "preemptingJobId": urgent,
    }
    assert doc["jobRuns"][0]["preemption"]["preemptingJobId"] == urgent
    watched = armada.ok("watch", "batch", "fill", "--exit-if-inactive").splitlines()
    preempted = next(line for line in watched if " preempted " in line)
    assert f"preempted (by the scheduler for job {urgent})" in preempted


def test_a_requested_preemption_names_who_asked_and_why(
    simulated: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(simulated.address, capsys)
    armada.ok("queue", "create", "q")
    [job] = submit(armada, tmp_path, job_file("q", "s", "sleep 600"))
    with ArmadaClient(simulated.address) as c:
        wait_until(in_state(c, job, submit_pb2.RUNNING), "the job to run")
        armada.ok("preempt", "q", "s", job, "--reason", "maintenance")
        wait_until(in_state(c, job, submit_pb2.PREEMPTED), "the preemption")
    doc = yaml.safe_load(armada.ok("details", job))[job]
    assert doc["preemption"] == {
        "kind": "requested",
        "requestor": "anonymous",
        "reason": "maintenance",
    }
    watched = armada.ok("watch", "q", "s", "--exit-if-inactive").splitlines()
    assert any("preempting (requested by anonymous: 'maintenance')" in x for x in watched)
    assert any("preempted (requested by anonymous: 'maintenance')" in x for x in watched)
