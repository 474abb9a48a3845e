"""`armada report scheduling|queue|job`: the server's scheduling reports, as text (what the
server writes, as upstream's armadactl prints it) and as data (-o json, -o yaml), against a
real server whose local executor runs one job while another waits for its node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer

from .conftest import Armada
from .servers import in_state, job_file, server_config, start, wait_until

NO_ROOM = "0 of 1 matching node has 2 cpu, 256Mi memory free"


@pytest.fixture
def local(tmp_path: Path) -> Iterator[EmbeddedServer]:
    running = start(server_config(tmp_path, "local"))
    yield running
    running.stop()


def test_reports(local: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    armada = Armada(local.address, capsys)
    armada.ok("queue", "create", "q")
    (tmp_path / "jobs.yaml").write_text(job_file("q", "s", "sleep 600", "sleep 600", cpu="2"))
    running, waiting = armada.ok("submit", "-q", str(tmp_path / "jobs.yaml")).split()
    with ArmadaClient(local.address) as c:
        wait_until(in_state(c, running, submit_pb2.RUNNING), "the first job to run")

        def waited_cycles() -> int:
            history = c.job_report(waiting).data["history"]
            return int(history[0]["cycles"] or 0) if history else 0

        wait_until(lambda: waited_cycles() >= 2, "the second job to wait two cycles")

    job = json.loads(armada.ok("report", "job", waiting, "-o", "json"))
    assert job["state"] == "QUEUED" and (job["placeInLine"], job["lineLength"]) == (1, 1)
    assert [s["reason"] for s in job["history"]] == [NO_ROOM]
    assert job["nearestNodes"] == [
        {"executor": "local", "pool": "default", "node": "local-0", "lacks": {"cpu": "2"}}
    ]
    text = armada.ok("report", "job", waiting)
    assert text.startswith(f"job {waiting} (queue q): QUEUED\nwaited because {NO_ROOM} for ")
    assert "\nplace in its queue's line: 1 of 1\n" in text
    assert "node local-0 (local, pool default) lacks 2 cpu" in text
    as_yaml = yaml.safe_load(armada.ok("report", "job", waiting, "-o", "yaml"))
    assert list(as_yaml) == list(job) and as_yaml["nearestNodes"] == job["nearestNodes"]

    queue = json.loads(armada.ok("report", "queue", "q", "-o", "json"))
    assert [(g["reason"], g["count"], g["oldestJobId"]) for g in queue["waiting"]] == [
        (NO_ROOM, 1, waiting)
    ]
    assert queue["standing"]["pools"]["default"]["running"] == 1
    assert f"held back by: {NO_ROOM}" in armada.ok("report", "queue", "q")

    scheduling = json.loads(armada.ok("report", "scheduling", "--cycles", "2", "-o", "json"))
    [latest, before] = scheduling["cycles"]
    assert latest["cycle"] == before["cycle"] + 1
    assert latest["waiting"] == {NO_ROOM: 1}
    assert latest["queues"]["q"]["share"] == 1.0 and latest["queues"]["q"]["demand"] == 2.0
    assert f"cycle {latest['cycle']} at " in armada.ok("report", "scheduling")
    other = json.loads(armada.ok("report", "scheduling", "--pool", "gpu", "-o", "json"))
    assert other["pool"] == "gpu" and all(c["pools"] == {} for c in other["cycles"])
    assert "of pool default" in armada.ok("report", "scheduling", "--pool", "default")


def test_report_errors(armada: Armada) -> None:
    missing = armada("report", "job", "01hzzzzzzzzzzzzzzzzzzzzzzz")
    assert missing.code == 1 and "not found" in missing.err
    assert armada("report", "queue", "nope").code == 1
    usage = armada("report", "scheduling", "--cycles", "0")
    assert usage.code == 2 and "--cycles: 0: at least 1" in usage.err
    assert armada.ok("report", "scheduling") == "no scheduling cycle kept yet\n"
