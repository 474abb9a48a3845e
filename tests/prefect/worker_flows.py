"""Flows the tests run in separate processes (`python -m prefect.engine`), loaded through
PREFECT__FLOW_ENTRYPOINT."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow

from prefect_armada import ArmadaCredentials, ArmadaJob, execute_armada_job


@flow
def hello(name: str = "armada") -> str:
    print(f"hello {name} from the flow run's job")
    return f"hello {name}"


@flow
def sleepy(seconds: float = 120) -> None:
    time.sleep(seconds)


@flow
def waits(marker: str, seconds: float = 180) -> str:
    """Runs until `marker` exists (the deployment tests decide when it ends)."""
    deadline = time.monotonic() + seconds
    while not Path(marker).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{marker} never appeared")
        time.sleep(0.2)
    return "released"


@flow
def submits_a_job(address: str, queue: str, marker: str) -> dict:
    """Runs a job that takes a few seconds; the crash test kills this process meanwhile."""
    job = ArmadaJob(
        credentials=ArmadaCredentials(address=address),
        queue=queue,
        job_set_id="crash",
        log_interval_seconds=0.2,
        pod_spec={
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", f"touch {marker}; sleep 4; echo finished"],
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "256Mi"},
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                    },
                }
            ]
        },
    )
    return execute_armada_job(job)


@flow
def runs_a_task_job(
    address: str, queue: str, job_set_id: str, marker: str, check_seconds: float
) -> dict:
    """Runs a task job that writes `marker` and sleeps (the cancellation tests cancel the
    flow run meanwhile); the task checks every `check_seconds` whether the flow run is
    cancelling."""
    job = ArmadaJob(
        credentials=ArmadaCredentials(address=address),
        queue=queue,
        job_set_id=job_set_id,
        log_interval_seconds=0.2,
        cancellation_check_seconds=check_seconds,
        pod_spec={
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", f"touch {marker}; sleep 120"],
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "256Mi"},
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                    },
                }
            ]
        },
    )
    return execute_armada_job(job)
