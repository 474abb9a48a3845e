"""The reaper sensor on a real instance and Armada server: which runs' jobs it cancels, that it
confirms on a second tick through its cursor, and that a run storage it cannot read has nothing
cancelled (the deployment's marked-canceled and deleted runs are in test_deployment.py)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, build_sensor_context
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.dagster_run import DagsterRun

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_core.client.reattach import LIVE_STATES
from dagster_armada import ArmadaResource, armada_reaper_sensor, task_identity

from ..jobs.factories import container, item


def step_job(admin: ArmadaClient, queue: str, run_id: str) -> str:
    identity = task_identity(root_run_id=run_id, step_key="s", run_id=run_id, retry_number=0)
    sleeps = item(
        {"containers": [{**container(cpu="100m", memory="64Mi"), "command": ["sleep", "300"]}]}
    )
    [job_id] = admin.submit_jobs(queue, f"dagster-{run_id}", identity.stamp([sleeps], 0))
    return job_id


def run(instance: DagsterInstance, status: DagsterRunStatus) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name="j", run_id=run_id, status=status))
    return run_id


def tick(instance: DagsterInstance, armada: ArmadaResource, cursor: str | None) -> tuple[str, str]:
    """One evaluation of the sensor: its skip message and the cursor it leaves."""
    with build_sensor_context(
        instance=instance, resources={"armada": armada}, cursor=cursor
    ) as context:
        data = armada_reaper_sensor().evaluate_tick(context)
        return data.skip_message or "", data.cursor or ""


def test_the_sensor_cancels_ended_and_deleted_runs_jobs_on_the_second_tick(
    instance: DagsterInstance, armada: ArmadaResource, admin: ArmadaClient, queue: str
) -> None:
    failed = run(instance, DagsterRunStatus.FAILURE)
    started = run(instance, DagsterRunStatus.STARTED)
    jobs = {
        "failed": step_job(admin, queue, failed),
        "started": step_job(admin, queue, started),
        "deleted": step_job(admin, queue, str(uuid.uuid4())),  # a run the instance lacks
    }
    said, cursor = tick(instance, armada, None)
    assert "cancelled 0, 2 to confirm next tick" in said
    assert set(admin.get_job_status(list(jobs.values())).values()) <= LIVE_STATES

    said, cursor = tick(instance, armada, cursor)

    assert "cancelled 2" in said
    states = admin.get_job_status(list(jobs.values()))
    assert states[jobs["failed"]] == states[jobs["deleted"]] == submit_pb2.CANCELLED
    assert states[jobs["started"]] in LIVE_STATES
    admin.cancel_jobs(queue, f"dagster-{started}", [jobs["started"]])
    details = admin.get_job_details([jobs["failed"]])[jobs["failed"]]
    assert details.cancel_reason == f"dagster run {failed} is FAILURE"
    assert json.loads(cursor)["counters"]["cancelled"] == 2


def test_an_unreadable_run_storage_cancels_nothing(
    tmp_path: Path, armada: ArmadaResource, admin: ArmadaClient, queue: str
) -> None:
    home = tmp_path / "broken"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        run_id = run(instance, DagsterRunStatus.FAILURE)
        job_id = step_job(admin, queue, run_id)
        [db] = (home / "history").glob("runs.db")
        db.write_bytes(b"this is not a database" * 100)  # the storage broken
        cursor = None
        for _ in range(3):
            said, cursor = tick(instance, armada, cursor)
            assert "Run storage unreachable, no job cancelled" in said
    assert admin.get_job_status([job_id])[job_id] in LIVE_STATES
    assert json.loads(cursor or "{}")["counters"]["unreachable"] == 3
    admin.cancel_jobs(queue, f"dagster-{run_id}", [job_id])
