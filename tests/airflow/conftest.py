"""One migrated Airflow metadata database and one embedded Armada server per test session.

Airflow reads its configuration at import time, so the environment is set here, before any
test module imports airflow.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

DAGS = Path(__file__).parent / "dags"
_HOME = Path(tempfile.mkdtemp(prefix="airflow-home-"))
atexit.register(shutil.rmtree, _HOME, True)
os.environ.update(
    {
        "AIRFLOW_HOME": str(_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    }
)

from armada_core.api import submit_pb2  # noqa: E402
from armada_core.client import ArmadaClient  # noqa: E402
from armada_server.app import EmbeddedServer  # noqa: E402
from armada_server.config import NodeGroup, PriorityClassConfig, ServerConfig  # noqa: E402

QUEUE = "airflow"
CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Airflow's tables, created once (create_all + stamp: much faster than migrating)."""
    from airflow.utils import db

    db.initdb()
    return _HOME


@pytest.fixture(scope="session")
def armada(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """A real server running jobs as local processes: two general nodes and one small node
    (label role=victim) that the preemption test fills."""
    root = tmp_path_factory.mktemp("armada")
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        sandbox_dir=str(root / "pods"),
        database_url=f"sqlite:///{root / 'armada.db'}",
        nodes=(NodeGroup(2, "2", "2Gi"), NodeGroup(1, "1", "1Gi", labels={"role": "victim"})),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
        priority_classes=CLASSES,
        default_priority_class="low",
        heartbeat_seconds=2.0,
    )
    with EmbeddedServer(config) as server:
        host, port = server.address.rsplit(":", 1)
        os.environ["AIRFLOW_CONN_ARMADA_DEFAULT"] = json.dumps(
            {
                "conn_type": "armada",
                "host": host,
                "port": int(port),
                "extra": {"job_url_template": "http://armada.test/jobs/{job_id}?q={queue}"},
            }
        )
        with ArmadaClient(server.address) as client:
            client.create_queue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
        yield server


@pytest.fixture
def client(armada: EmbeddedServer) -> Iterator[ArmadaClient]:
    with ArmadaClient(armada.address) as c:
        yield c
