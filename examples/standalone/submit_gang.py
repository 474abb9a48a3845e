"""Submit a gang with armada_core.client and follow its events to the end.

    .venv/bin/python examples/standalone/submit_gang.py [--url localhost:50051]

Exits 0 only if every member of the gang succeeded.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import uuid

from armada_core.api import submit_pb2
from armada_core.client import AlreadyExists, ArmadaClient, gang_items, state_name

POD = {
    "terminationGracePeriodSeconds": 5,
    "containers": [
        {
            "name": "trainer",
            "image": "python:3.11",
            "command": ["sh", "-c", 'echo "rank on $HOSTNAME"; sleep 1'],
            "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"cpu": "100m", "memory": "64Mi"},
            },
        }
    ],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:50051")
    parser.add_argument("--queue", default="demo")
    args = parser.parse_args()
    job_set = f"python-gang-{uuid.uuid4().hex[:8]}"
    with ArmadaClient(args.url) as client:
        with contextlib.suppress(AlreadyExists):
            client.create_queue(submit_pb2.Queue(name=args.queue))
        ids = client.submit_jobs(
            args.queue, job_set, gang_items(POD, replicas=2, client_id=job_set)
        )
        print(f"submitted gang {job_set}: {', '.join(ids)}")

        def show(message, result) -> None:  # type: ignore[no-untyped-def]
            kind = message.message.WhichOneof("events")
            print(f"  event {message.id:>4} {result.job_id} {kind}", flush=True)

        results = client.wait_for_jobs(args.queue, job_set, ids, timeout=300, on_event=show)
    for job_id, result in results.items():
        print(f"{job_id}: {state_name(result.state)} on {result.node or '-'}")
    return 0 if all(r.state == submit_pb2.SUCCEEDED for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
