"""Run an elastic pod group end to end: an embedded armada-server with the local executor, a
coordinator (role minimum 1, maximum 1) and elastic workers (minimum 2, maximum 4).

    .venv/bin/python examples/elastic_pod_group/run.py

Each pod prints its role; the coordinator ends first, the workers after it (a member that
succeeded keeps its role, so the others run on). The run then shows which members ran, where,
and how they ended. Exits 0 only if every member ran and succeeded (the node has room for all
five, so all five must).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from armada_core.api import event_pb2, submit_pb2
from armada_core.client import (
    ArmadaClient,
    JobResult,
    Role,
    pod_group_items,
    state_name,
)
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

QUEUE = "elastic-example"
JOB_SET = "elastic-pod-group"


def member(role: str, seconds: int) -> dict:
    """A pod of `role` that says which role it plays and works for `seconds`."""
    return {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "env": [{"name": "ROLE", "value": role}],
                "command": ["sh", "-c", f'echo "role $ROLE on $HOSTNAME"; sleep {seconds}'],
                "resources": {
                    "requests": {"cpu": "500m", "memory": "256Mi"},
                    "limits": {"cpu": "500m", "memory": "256Mi"},
                },
            }
        ]
    }


# The coordinator ends before the workers: members need not end together.
ROLES = [
    Role("coordinator", member("coordinator", 1), minimum=1, maximum=1),
    Role("worker", member("worker", 3), minimum=2, maximum=4),
]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="armada-elastic-example-") as tmp:
        root = Path(tmp)
        config = ServerConfig(
            port=0,
            http_port=None,
            executor="local",
            sandbox_dir=str(root / "pods"),
            database_url=f"sqlite:///{root / 'armada.db'}",
            nodes=(NodeGroup(1, "4", "8Gi"),),
            scheduling_period=0.2,
        )
        with EmbeddedServer(config) as server, ArmadaClient(server.address) as client:
            client.create_queue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
            items = pod_group_items(ROLES, client_id="train")
            ids = client.submit_jobs(QUEUE, JOB_SET, items)
            roles = {j: item.annotations[ann.GANG_ROLE] for j, item in zip(ids, items, strict=True)}
            print(
                f"submitted pod group 'train': {len(ids)} members "
                f"({', '.join(f'{r.name} {r.minimum}..{r.size}' for r in ROLES)})"
            )
            ran: set[str] = set()

            def show(message: event_pb2.EventStreamMessage, result: JobResult) -> None:
                kind = message.message.WhichOneof("events")
                if kind == "running":
                    ran.add(result.job_id)
                print(f"  {roles[result.job_id]:<11} {result.job_id} {kind}", flush=True)

            results = client.wait_for_jobs(QUEUE, JOB_SET, ids, timeout=120, on_event=show)
            print("members:")
            for job_id in ids:
                said = [line.line for line in client.logs(job_id)][:1]
                print(
                    f"  {roles[job_id]:<11} {job_id} {'ran' if job_id in ran else 'never ran'}"
                    f" on {results[job_id].node or '-'}, "
                    f"{state_name(results[job_id].state)}: {said[0] if said else '-'}"
                )
    counts = {r.name: sum(1 for j in ran if roles[j] == r.name) for r in ROLES}
    succeeded = sum(1 for j in ids if results[j].state == submit_pb2.SUCCEEDED)
    print(
        f"{len(ran)} of {len(ids)} members ran: "
        + ", ".join(f"{n} {name}" for name, n in counts.items())
    )
    print(f"{succeeded} of {len(ids)} members succeeded")
    return 0 if len(ran) == len(ids) == succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
