"""Run the example DAG end to end: embedded Armada server (local executor) + dag.test().

    .venv/bin/python examples/airflow/run.py

Exits 0 only if every task of the DAG run succeeded.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="armada-airflow-example-"))
    # Airflow reads its configuration when imported: set it up first.
    os.environ.update(
        {
            "AIRFLOW_HOME": str(work / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(HERE / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{work / 'airflow.db'}",
        }
    )
    from airflow.utils import db

    from armada_core.api import submit_pb2
    from armada_core.client import ArmadaClient
    from armada_server.app import EmbeddedServer
    from armada_server.config import NodeGroup, ServerConfig

    db.initdb()
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        database_url=f"sqlite:///{work / 'armada.db'}",
        sandbox_dir=str(work / "pods"),
        nodes=(NodeGroup(2, "2", "2Gi"),),
        scheduling_period=0.2,
        executor_sync_interval=0.2,
    )
    with EmbeddedServer(config) as server:
        host, port = server.address.rsplit(":", 1)
        os.environ["AIRFLOW_CONN_ARMADA_DEFAULT"] = json.dumps(
            {"conn_type": "armada", "host": host, "port": int(port)}
        )
        with ArmadaClient(server.address) as client:
            client.create_queue(submit_pb2.Queue(name="ml", priority_factor=1))

        sys.path.insert(0, str(HERE / "dags"))
        from armada_training_pipeline import dag

        run = dag.test(run_conf={"workdir": str(work / "data")})
        from airflow.utils.session import create_session

        with create_session() as session:
            states = {ti.task_id: ti.state for ti in run.get_task_instances(session=session)}
    shutil.rmtree(work, ignore_errors=True)
    print(f"DAG run {run.run_id}: {run.state}; tasks: {states}")
    ok = run.state == "success" and all(s == "success" for s in states.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
