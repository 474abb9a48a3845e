"""A real armada-server (local executor) shared by the Dagster tests, and an isolated
DAGSTER_HOME so nothing touches the developer's Dagster instance."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterEventType, DagsterInstance
from dagster._core.instance.ref import InstanceRef

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig
from dagster_armada import ArmadaResource

_queues = itertools.count()


@pytest.fixture(scope="session")
def dagster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = old


@pytest.fixture(scope="session")
def server(
    tmp_path_factory: pytest.TempPathFactory, dagster_home: Path
) -> Iterator[EmbeddedServer]:
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
        heartbeat_seconds=1,
    )
    with EmbeddedServer(config) as running:
        yield running


@pytest.fixture(scope="session")
def admin(server: EmbeddedServer) -> Iterator[ArmadaClient]:
    with ArmadaClient(server.address) as client:
        yield client


@pytest.fixture
def queue(admin: ArmadaClient) -> str:
    """A fresh queue per test, so tests never see each other's jobs."""
    name = f"dagster-{next(_queues)}"
    admin.create_queue(submit_pb2.Queue(name=name, priority_factor=1))
    return name


@pytest.fixture
def armada(server: EmbeddedServer, queue: str) -> ArmadaResource:
    return ArmadaResource(
        address=server.address,
        queue=queue,
        log_poll_interval=0.2,
        status_check_interval=5,
        log_destination="both",
        lookout_url_template="http://lookout.test/jobs/{job_id}",
    )


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[DagsterInstance]:
    """A real on-disk Dagster instance (SQLite storage, local compute logs)."""
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as inst:
        yield inst


def event_log(instance: DagsterInstance, run_id: str) -> list[str]:
    """The user messages of a run's event log."""
    return [record.user_message for record in instance.all_logs(run_id)]


def compute_log(instance: DagsterInstance, result: Any) -> str:
    """Everything the run's steps wrote to stdout, as Dagster captured it."""
    out = []
    for event in result.all_events:
        if event.event_type == DagsterEventType.LOGS_CAPTURED:
            data = event.event_specific_data
            key = instance.compute_log_manager.build_log_key_for_run(result.run_id, data.file_key)
            captured = instance.compute_log_manager.get_log_data(key)
            out.append((captured.stdout or b"").decode())
    return "".join(out)
