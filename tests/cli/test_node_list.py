"""`armada node list`: each executor's nodes with capacity, use, free room, state and jobs,
through the extension service api.Nodes, against a real server whose local executor runs a
job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, Unauthenticated
from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig
from armada_server.config import NodeGroup

from .conftest import Armada
from .servers import in_state, job_file, server_config, start, wait_until


@pytest.fixture
def local(tmp_path: Path) -> Iterator[EmbeddedServer]:
    running = start(server_config(tmp_path, "local", nodes=(NodeGroup(2, "2", "2Gi"),)))
    yield running
    running.stop()


def test_node_list(
    local: EmbeddedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armada = Armada(local.address, capsys)
    armada.ok("queue", "create", "q")
    (tmp_path / "jobs.yaml").write_text(job_file("q", "s", "sleep 600"))
    [job] = armada.ok("submit", "-q", str(tmp_path / "jobs.yaml")).split()
    with ArmadaClient(local.address) as c:
        wait_until(in_state(c, job, submit_pb2.RUNNING), "the job to run")
        node = c.get_job_details([job], expand_job_run=True)[job].job_runs[0].node
    armada.ok("node", "cordon", "local-1" if node == "local-0" else "local-0")
    nodes = {
        f"{n['executor']}/{n['name']}": n
        for n in json.loads(armada.ok("node", "list", "-o", "json"))
    }
    assert sorted(nodes) == ["local/local-0", "local/local-1"]
    busy = nodes[f"local/{node}"]
    idle = next(n for n in nodes.values() if n is not busy)
    assert busy["jobs"] == 1 and idle["jobs"] == 0
    assert busy["allocatable"] == {"cpu": "2", "memory": "2Gi"}
    assert busy["used"] == {"cpu": "1", "memory": "256Mi"}
    assert busy["free"] == {"cpu": "1", "memory": "1792Mi"}
    assert idle["used"] == {} and idle["free"] == {"cpu": "2", "memory": "2Gi"}
    assert busy["cordoned"] is False and idle["cordoned"] is True
    assert idle["cordonedBy"] == "anonymous" and idle["cordonedAt"]
    assert busy["executorLive"] is True and busy["pool"] == "default"
    assert list(busy) == [k for k in idle if k != "cordonedAt"]  # every field, in one order
    as_yaml = yaml.safe_load(armada.ok("node", "list", "-o", "yaml"))
    assert [(n["name"], n["jobs"], n["free"]) for n in as_yaml] == [
        (n["name"], n["jobs"], n["free"]) for n in nodes.values()
    ]
    table = armada.ok("node", "list").splitlines()
    assert table[0].split() == ["NODE", "POOL", "STATE", "JOBS", "CAPACITY", "USED", "FREE"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert rows[f"local/{node}"] == [
        "default",
        "schedulable",
        "1",
        "cpu=2,memory=2Gi",
        "cpu=1,memory=256Mi",
        "cpu=1,memory=1792Mi",
    ]
    idle_id = f"local/{idle['name']}"
    assert rows[idle_id] == [
        "default",
        "cordoned",
        "0",
        "cpu=2,memory=2Gi",
        "-",
        "cpu=2,memory=2Gi",
    ]
    only = json.loads(armada.ok("node", "list", "--executor", "elsewhere", "-o", "json"))
    assert only == []
    armada.ok("cancel", "q", "s", job)


def test_node_list_needs_authentication(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    auth = AuthConfig.from_mapping({"basic": {"users": {"alice": {"password": "a-pw"}}}})
    server = start(server_config(tmp_path, "simulated", auth=auth))
    try:
        with ArmadaClient(server.address) as anonymous, pytest.raises(Unauthenticated):
            anonymous.get_nodes()
        armada = Armada(server.address, capsys)
        signed_in = ("--username", "alice", "--password", "a-pw", "node", "list")
        # The simulated executor reports its node at its first sync, after the server starts.
        wait_until(lambda: len(armada.ok(*signed_in).splitlines()) > 1, "the node to be reported")
        table = armada.ok(*signed_in)
        assert table.splitlines()[1].split()[1:4] == ["default", "schedulable", "0"]
    finally:
        server.stop()
