"""One Prefect test server (prefect_test_harness) and one armada-server with the local
executor for the whole session: both take seconds to start."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The harness's API URL; PREFECT_HOME is a temporary directory."""
    home = tmp_path_factory.mktemp("prefect-home")
    old = os.environ.get("PREFECT_HOME")
    os.environ["PREFECT_HOME"] = str(home)
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    # Migrating a new database took over a minute on a loaded two-core machine.
    with prefect_test_harness(server_startup_timeout=300):
        yield str(PREFECT_API_URL.value())
    if old is None:
        os.environ.pop("PREFECT_HOME", None)
    else:
        os.environ["PREFECT_HOME"] = old


@pytest.fixture(scope="session")
def armada_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    root = tmp_path_factory.mktemp("armada")
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        sandbox_dir=str(root / "pods"),
        database_url=f"sqlite:///{root / 'armada.db'}",
        nodes=(NodeGroup(2, "4", "8Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
    )
    with EmbeddedServer(config) as running:
        yield running


@pytest.fixture
def armada(armada_server: EmbeddedServer, prefect_server: str) -> Iterator[ArmadaClient]:
    with ArmadaClient(armada_server.address) as client:
        yield client


@pytest.fixture
def queue(armada: ArmadaClient) -> str:
    """A fresh queue per test, so job counts are the test's own."""
    name = f"q-{uuid.uuid4().hex[:8]}"
    armada.create_queue(submit_pb2.Queue(name=name, priority_factor=1))
    return name


def pod(script: str, *, cpu: str = "500m", memory: str = "256Mi") -> dict[str, Any]:
    """A pod whose one container runs `script` with sh."""
    return {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh", "-c", script],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ]
    }


def python_pod(code: str) -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "main",
                "image": "python",
                "command": [sys.executable, "-c", code],
                "resources": {
                    "requests": {"cpu": "500m", "memory": "512Mi"},
                    "limits": {"cpu": "500m", "memory": "512Mi"},
                },
            }
        ]
    }


def jobs_in(armada: ArmadaClient, queue: str, job_set_id: str) -> list[str]:
    """Every job ever submitted to the job set (from its events)."""
    return [
        m.message.submitted.job_id
        for m in armada.get_job_set_events(queue, job_set_id)
        if m.message.WhichOneof("events") == "submitted"
    ]


def wait_until(predicate: Any, timeout: float = 60, message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {message}")


HERE = Path(__file__).parent
