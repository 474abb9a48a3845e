"""Start an embedded armada-server (local executor) and a temporary Prefect server, run the
example flow, and exit 0 only if it succeeded.

    .venv/bin/python examples/prefect/run.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="armada-prefect-example-") as tmp:
        root = Path(tmp)
        os.environ.setdefault("PREFECT_HOME", str(root / "prefect"))
        # No analytics: its session row is one more writer on the throwaway server's SQLite.
        os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        config = ServerConfig(
            port=0,
            http_port=None,
            executor="local",
            sandbox_dir=str(root / "pods"),
            database_url=f"sqlite:///{root / 'armada.db'}",
            nodes=(NodeGroup(1, "4", "8Gi"),),
            scheduling_period=0.2,
        )
        with EmbeddedServer(config) as server:
            with ArmadaClient(server.address) as client:
                client.create_queue(submit_pb2.Queue(name="prefect-example", priority_factor=1))
            # Imported late: PREFECT_HOME must be set first.
            from prefect.testing.utilities import prefect_test_harness

            sys.path.insert(0, str(Path(__file__).parent))
            from flow import pipeline

            # A throwaway Prefect server: its first start migrates a new database, which
            # takes longer than the harness's default 30 s on a busy machine.
            with prefect_test_harness(server_startup_timeout=120):
                state = pipeline(address=server.address, return_state=True)
                print(f"flow run ended {state.type.value}: {state.message}")
                if state.is_completed():
                    print(state.result())
                return 0 if state.is_completed() else 1


if __name__ == "__main__":
    sys.exit(main())
