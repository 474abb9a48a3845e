"""The reaper sensor on a real instance and Armada server: which runs' jobs it cancels, that it
confirms on a second tick through its cursor, and that a run storage it cannot read has nothing
cancelled; its adapter's reading of retried runs and of jobs of other instances (the
deployment's marked-canceled, deleted and retried runs are in test_deployment.py)."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, build_sensor_context
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.storage.tags import AUTO_RETRY_RUN_ID_TAG, MAX_RETRIES_TAG, WILL_RETRY_TAG

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_core.client.lifecycle.reaping import Status, TaskJob
from armada_core.client.reattach import LIVE_STATES
from dagster_armada import ArmadaResource, armada_reaper_sensor, task_identity
from dagster_armada.instance_id import INSTANCE_ANNOTATION, instance_digest
from dagster_armada.reaping import DagsterRunStates

from ..jobs.factories import container, item


def step_job(admin: ArmadaClient, queue: str, run_id: str, instance: str = "") -> str:
    """A step's job of `run_id`, stamped as submitted by the instance of digest `instance`."""
    identity = task_identity(root_run_id=run_id, step_key="s", run_id=run_id, retry_number=0)
    sleeps = item(
        {"containers": [{**container(cpu="100m", memory="64Mi"), "command": ["sleep", "300"]}]}
    )
    if instance:
        sleeps.annotations[INSTANCE_ANNOTATION] = instance
    [job_id] = admin.submit_jobs(queue, f"dagster-{run_id}", identity.stamp([sleeps], 0))
    return job_id


def run(
    instance: DagsterInstance, status: DagsterRunStatus, tags: Mapping[str, str] | None = None
) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name="j", run_id=run_id, status=status, tags=dict(tags or {})))
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
    mine = instance_digest(instance)
    # Another instance's run, missing here, and one of an unknown instance: left alone.
    elsewhere, unknown = str(uuid.uuid4()), str(uuid.uuid4())
    jobs = {
        "failed": step_job(admin, queue, failed, mine),
        "started": step_job(admin, queue, started, mine),
        "deleted": step_job(admin, queue, str(uuid.uuid4()), mine),  # a run the instance lacks
        "other instance": step_job(admin, queue, elsewhere, "another-instance"),
        "unstamped": step_job(admin, queue, unknown),
    }
    said, cursor = tick(instance, armada, None)
    assert "cancelled 0, 2 to confirm next tick" in said
    assert set(admin.get_job_status(list(jobs.values())).values()) <= LIVE_STATES

    said, cursor = tick(instance, armada, cursor)

    assert "cancelled 2" in said
    states = admin.get_job_status(list(jobs.values()))
    assert states[jobs["failed"]] == states[jobs["deleted"]] == submit_pb2.CANCELLED
    for left in ("started", "other instance", "unstamped"):
        assert states[jobs[left]] in LIVE_STATES
    for run_id, left in (
        (started, "started"),
        (elsewhere, "other instance"),
        (unknown, "unstamped"),
    ):
        admin.cancel_jobs(queue, f"dagster-{run_id}", [jobs[left]])
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


def test_an_unreachable_armada_skips_the_tick_and_keeps_the_cursor(
    instance: DagsterInstance,
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    away = ArmadaResource(address=address, queue="q", request_timeout=5.0)
    cursor = json.dumps({"pending": {"job-1": "dagster run r is FAILURE"}, "counters": {}})
    said, left = tick(instance, away, cursor)
    assert said.startswith("Armada unreachable")
    assert left in ("", cursor)  # nothing decided: the next tick starts where this one did


def task_job(run_id: str, instance: str | None) -> TaskJob:
    annotations = {INSTANCE_ANNOTATION: instance} if instance is not None else {}
    return TaskJob(
        job_id=f"job-{run_id}",
        queue="q",
        job_set_id=f"dagster-{run_id}",
        state=submit_pb2.RUNNING,
        orchestrator="dagster",
        task=f"{run_id}/s",
        attempt=f"{run_id}/0",
        annotations=annotations,
    )


def failed_then_retried(instance: DagsterInstance, retry: DagsterRunStatus) -> str:
    """A failed run whose automatic retry (Dagster's run retries) is in `retry`."""
    retry_id = run(instance, retry)
    return run(instance, DagsterRunStatus.FAILURE, {AUTO_RETRY_RUN_ID_TAG: retry_id})


def failed_to_be_retried(instance: DagsterInstance, tags: Mapping[str, str]) -> str:
    """A run that failed just now, with `tags`, whose retry is not launched yet."""
    run_id = run(instance, DagsterRunStatus.STARTED, tags)
    dagster_run = instance.get_run_by_id(run_id)
    assert dagster_run is not None
    instance.report_run_failed(dagster_run)
    return run_id


@pytest.mark.parametrize(
    ("case", "stamp", "status", "said"),
    [
        ("failed", "mine", Status.ENDED, "FAILURE"),
        ("started", "mine", Status.RUNNING, "STARTED"),
        ("deleted", "mine", Status.ENDED, "deleted"),
        ("failed", None, Status.ENDED, "FAILURE"),
        ("deleted", None, None, ""),
        ("deleted", "other", None, ""),
        ("failed", "other", None, ""),
        ("retry running", "mine", Status.RUNNING, "FAILURE, its retry"),
        ("retry ended", "mine", Status.ENDED, "FAILURE, its retry"),
        ("retry deleted", "mine", Status.ENDED, "FAILURE, its retry"),
        ("will retry", "mine", Status.RUNNING, "FAILURE, to be retried"),
        ("max retries", "mine", Status.RUNNING, "FAILURE, to be retried"),
        ("will not retry", "mine", Status.RUNNING, "FAILURE, its run worker exiting"),
    ],
)
def test_the_adapter_reads_a_jobs_run_its_retries_and_its_instance(
    instance: DagsterInstance, case: str, stamp: str | None, status: Status | None, said: str
) -> None:
    """A failed run retried by Dagster is continued by its retry (whose step reattaches to or
    replaces the job) until the last retry ended; a job of another instance, or an unstamped
    job whose run is not found, is no business of this instance's reaper."""
    cases = {
        "failed": lambda: run(instance, DagsterRunStatus.FAILURE),
        "started": lambda: run(instance, DagsterRunStatus.STARTED),
        "deleted": lambda: str(uuid.uuid4()),
        "retry running": lambda: failed_then_retried(instance, DagsterRunStatus.STARTED),
        "retry ended": lambda: failed_then_retried(instance, DagsterRunStatus.SUCCESS),
        "retry deleted": lambda: run(
            instance, DagsterRunStatus.FAILURE, {AUTO_RETRY_RUN_ID_TAG: str(uuid.uuid4())}
        ),
        "will retry": lambda: failed_to_be_retried(instance, {WILL_RETRY_TAG: "true"}),
        "max retries": lambda: failed_to_be_retried(instance, {MAX_RETRIES_TAG: "1"}),
        "will not retry": lambda: failed_to_be_retried(instance, {WILL_RETRY_TAG: "false"}),
    }
    run_id = cases[case]()
    digest = {"mine": instance_digest(instance), "other": "another-instance", None: None}[stamp]
    job = task_job(run_id, digest)
    state = DagsterRunStates(instance).states([job]).get(job.key)
    if status is None:
        assert state is None  # unknown: never cancelled
        return
    assert state is not None and state.status is status
    assert state.subject == f"dagster run {run_id}"
    assert state.state.startswith(said), state.state
    if case.startswith("retry "):
        assert state.state.endswith(("STARTED", "SUCCESS", "deleted")), state.state
