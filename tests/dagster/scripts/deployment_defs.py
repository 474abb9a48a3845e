"""The code location of the deployment tests, served by `dagster api grpc`: one job whose step
runs an Armada job that waits until the test releases it.

The job writes its pod's hostname to `<markers>/<root run id>/started` when it starts and
ends once `<markers>/<root run id>/release` exists, so every run of one lineage (a run and
its retries) waits on the same release. Settings come from the environment the test starts
the code server with: ARMADA_ADDRESS, ARMADA_QUEUE, ARMADA_TEST_MARKERS, and
ARMADA_REAP_INTERVAL (seconds between the reaper sensor's ticks).
"""

import os
from typing import Any

from dagster import Definitions, OpExecutionContext, job

from dagster_armada import ArmadaResource, armada_op, armada_reaper_sensor, container_pod_spec

STEP = "wait_for_release"
STATUS_CHECK_INTERVAL = 5  # how often a waiting step asks whether the server knows its job


def release_spec(context: OpExecutionContext) -> dict[str, Any]:
    root = context.run.tags.get("dagster/root_run_id", context.run.run_id)
    marker = os.path.join(os.environ["ARMADA_TEST_MARKERS"], root)
    script = (
        f"mkdir -p {marker}; echo $HOSTNAME >> {marker}/started; "
        f"while [ ! -f {marker}/release ]; do sleep 0.1; done; echo released"
    )
    return container_pod_spec(["sh", "-c", script], cpu="100m", memory="64Mi")


wait_for_release = armada_op(name=STEP, pod_spec=release_spec)


@job
def release_job() -> None:
    wait_for_release()


defs = Definitions(
    jobs=[release_job],
    sensors=[
        armada_reaper_sensor(
            minimum_interval_seconds=int(os.environ.get("ARMADA_REAP_INTERVAL", "20"))
        )
    ],
    resources={
        "armada": ArmadaResource(
            address=os.environ.get("ARMADA_ADDRESS", "localhost:50051"),
            queue=os.environ.get("ARMADA_QUEUE", "dagster"),
            log_poll_interval=0.2,
            status_check_interval=STATUS_CHECK_INTERVAL,
            waiting_poll_interval=1,
        )
    },
)
