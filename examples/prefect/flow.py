"""A Prefect flow whose work runs on Armada: a preprocessing job, then a 2-pod gang.

Infrastructure failures (preemption, eviction, a lost node) are retried with a new job; a
user error fails the flow with the exit code and termination message in the message.
"""

from __future__ import annotations

import sys
from typing import Any

from prefect import flow, task

from prefect_armada import ArmadaCredentials, ArmadaJob, execute_armada_job


def container(script: str) -> dict[str, Any]:
    # The local executor runs the command on this machine and ignores the image.
    return {
        "name": "main",
        "image": "python:3.11",
        "command": [sys.executable, "-c", script],
        "resources": {
            "requests": {"cpu": "500m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
    }


PREPROCESS = """
import os
print("preprocessing on", os.environ["HOSTNAME"])
open("/dev/termination-log" if os.path.exists("/dev/termination-log") else os.devnull,
     "w").write("42 records ready")
"""

TRAIN = """
import os
print("gang member", os.environ["HOSTNAME"], "training")
"""


@task
def summarise(preprocessed: dict[str, Any], trained: dict[str, Any]) -> str:
    states = [end["state"] for end in (*preprocessed["jobs"], *trained["jobs"])]
    return f"{len(states)} Armada jobs: {', '.join(states)}"


@flow(name="armada-example")
def pipeline(address: str = "localhost:50051", queue: str = "prefect-example") -> str:
    credentials = ArmadaCredentials(address=address)
    preprocess = ArmadaJob(
        credentials=credentials, queue=queue, pod_spec={"containers": [container(PREPROCESS)]}
    )
    train = ArmadaJob(
        credentials=credentials,
        queue=queue,
        replicas=2,
        pod_spec={"containers": [container(TRAIN)]},
    )
    retrying = execute_armada_job.with_options(retries=2, retry_delay_seconds=1)
    preprocessed = retrying.with_options(name="preprocess")(preprocess)
    trained = retrying.with_options(name="train-gang")(train)
    return summarise(preprocessed, trained)
