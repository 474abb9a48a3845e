"""Start an embedded armada-server, materialize the example's assets on it, stop.

    .venv/bin/python examples/dagster/run.py

Exits 0 only if every asset materialized and every check passed.
"""

import os
import sys
import tempfile
from pathlib import Path

from dagster import DagsterInstance, materialize

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="armada-dagster-") as tmp:
        root = Path(tmp)
        os.environ["DAGSTER_HOME"] = str(root / "dagster")
        (root / "dagster").mkdir()
        (root / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        config = ServerConfig(
            port=0,
            http_port=None,
            executor="local",
            sandbox_dir=str(root / "pods"),
            database_url=f"sqlite:///{root / 'armada.db'}",
            nodes=(NodeGroup(2, "2", "4Gi"),),
            scheduling_period=0.2,
        )
        with EmbeddedServer(config) as server:
            with ArmadaClient(server.address) as client:
                client.create_queue(submit_pb2.Queue(name="dagster-example", priority_factor=1))
            os.environ["ARMADA_URL"] = server.address
            os.environ["ARMADA_QUEUE"] = "dagster-example"
            from definitions import ASSETS, RESOURCES  # reads the two variables above

            with DagsterInstance.get() as instance:
                result = materialize(
                    ASSETS, resources=RESOURCES, instance=instance, raise_on_error=False
                )
                checks = result.get_asset_check_evaluations()
                for event in result.get_asset_materialization_events():
                    metadata = event.materialization.metadata
                    job = metadata.get("armada/job_id")
                    print(
                        f"materialized {event.asset_key.to_user_string()}: Armada job "
                        f"{job.value if job else '-'}"
                    )
                for check in checks:
                    print(f"check {check.check_name}: {'passed' if check.passed else 'FAILED'}")
    ok = result.success and all(c.passed for c in checks)
    print("success" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
