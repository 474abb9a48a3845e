"""A Dagster job whose op waits on an Armada job until released; run as a script it executes
the job in this process with a given run id (the test kills it to simulate a crash).

    python crash_run.py ADDRESS QUEUE RUN_ID MARKER_DIR
"""

import sys

from dagster import JobDefinition, job

from dagster_armada import ArmadaResource, armada_op


def build_job(marker_dir: str) -> JobDefinition:
    script = (
        f"echo $HOSTNAME > {marker_dir}/started; "
        f"while [ ! -f {marker_dir}/release ]; do sleep 0.1; done; echo released"
    )
    wait_op = armada_op(
        name="wait_for_release", command=["sh", "-c", script], cpu="100m", memory="64Mi"
    )

    @job
    def crash_job() -> None:
        wait_op()

    return crash_job


def resource(address: str, queue: str) -> ArmadaResource:
    return ArmadaResource(
        address=address, queue=queue, log_poll_interval=0.2, status_check_interval=5
    )


if __name__ == "__main__":
    address, queue, run_id, marker_dir = sys.argv[1:5]
    build_job(marker_dir).execute_in_process(
        run_id=run_id, resources={"armada": resource(address, queue)}
    )
