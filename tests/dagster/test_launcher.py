"""Whole Dagster runs on Armada: a real instance launches real runs through
ArmadaRunLauncher; the local executor runs `dagster api execute_run` on this machine."""

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.instance.ref import InstanceRef
from dagster._core.launcher.base import ResumeRunContext, WorkerStatus
from dagster._core.test_utils import in_process_test_workspace
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from dagster_armada import ArmadaRunLauncher
from dagster_armada.launcher import JOB_ID_TAG, KILL_MARGIN_SECONDS
from tests.dagster.scripts import launched_defs
from tests.dagster.test_assets import submitted
from tests.dagster.test_lifecycle import wait_for_file

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


@pytest.fixture
def launcher_instance(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    server,  # type: ignore[no-untyped-def]
    queue: str,
) -> Iterator[DagsterInstance]:
    """An instance launching through ArmadaRunLauncher; the parameter, if any, is the run
    workers' termination grace period (by default 30 s: a run worker interrupted on a busy
    machine needs seconds to record its cancellation)."""
    grace = getattr(request, "param", 30)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {
                "telemetry": {"enabled": False},
                "run_launcher": {
                    "module": "dagster_armada",
                    "class": "ArmadaRunLauncher",
                    "config": {
                        "address": server.address,
                        "queue": queue,
                        "cpu": "500m",
                        "memory": "2Gi",
                        "entry_point": [sys.executable, "-m", "dagster"],
                        "env_vars": [f"DAGSTER_HOME={home}", f"MARKER_DIR={tmp_path}"],
                        "termination_grace_period_seconds": grace,
                    },
                },
            }
        )
    )
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        yield instance


def finished_run(instance: DagsterInstance, run_id: str, timeout: float) -> DagsterRun:
    """The run once it has finished; on a timeout the failure shows the run's event log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.is_finished:
            return run
        time.sleep(0.2)
    events = [
        f"{e.timestamp:.3f} {e.dagster_event_type or ''} {e.user_message[:200]}"
        for e in instance.all_logs(run_id)
    ]
    run = instance.get_run_by_id(run_id)
    raise AssertionError(
        f"run {run_id} not finished after {timeout} s "
        f"({run.status if run else 'gone'}); its events:\n" + "\n".join(events)
    )


def launch(instance: DagsterInstance, job_name: str) -> str:
    origin = LoadableTargetOrigin(
        executable_path=sys.executable,
        python_file=launched_defs.__file__,
        working_directory=str(ROOT),
    )
    with in_process_test_workspace(instance, origin) as workspace:
        [location_name] = workspace.code_location_names
        [repository] = workspace.get_code_location(location_name).get_repositories().values()
        remote_job = repository.get_full_job(job_name)
        run = instance.create_run_for_job(
            job_def=getattr(launched_defs, job_name),
            remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(),
        )
        instance.launch_run(run.run_id, workspace)
    return run.run_id


def test_a_launched_run_executes_as_an_armada_job(
    launcher_instance: DagsterInstance, admin: ArmadaClient, queue: str
) -> None:
    assert isinstance(launcher_instance.run_launcher, ArmadaRunLauncher)
    run_id = launch(launcher_instance, "hello_job")
    run = finished_run(launcher_instance, run_id, timeout=120)
    assert run.status == DagsterRunStatus.SUCCESS
    job_id = run.tags[JOB_ID_TAG]
    messages = [r.user_message for r in launcher_instance.all_logs(run_id)]
    assert f"hello from the run worker in armada-{job_id}-0" in messages
    job_set = run.tags["armada/job_set_id"]
    [end] = admin.wait_for_jobs(queue, job_set, [job_id], timeout=60).values()
    assert end.state == submit_pb2.SUCCEEDED  # the worker exits once the run is recorded
    health = launcher_instance.run_launcher.check_run_worker_health(run)
    assert health.status == WorkerStatus.SUCCESS


def test_terminating_a_launched_run_cancels_its_job(
    launcher_instance: DagsterInstance, admin: ArmadaClient, queue: str, tmp_path: Path
) -> None:
    run_id = launch(launcher_instance, "slow_job")
    wait_for_file(tmp_path / "worker-started", timeout=120)
    run = launcher_instance.get_run_by_id(run_id)
    assert (
        launcher_instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    )
    job_id = run.tags[JOB_ID_TAG]
    # Resuming a run whose worker still runs reattaches to it: never a second worker.
    launcher_instance.run_launcher.resume_run(ResumeRunContext(run, None, 1))
    assert launcher_instance.get_run_by_id(run_id).tags[JOB_ID_TAG] == job_id
    assert submitted(admin, queue, run.tags["armada/job_set_id"]) == [job_id]
    assert launcher_instance.run_launcher.terminate(run_id)
    run = finished_run(launcher_instance, run_id, timeout=90)
    assert run.status == DagsterRunStatus.CANCELED
    assert admin.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED


@pytest.mark.parametrize("launcher_instance", [1], indirect=True)
def test_a_run_whose_worker_ignores_termination_still_ends_canceled(
    launcher_instance: DagsterInstance, admin: ArmadaClient, tmp_path: Path
) -> None:
    """The worker ignores SIGTERM, so the executor SIGKILLs it after the grace period and it
    never records the cancellation: the launcher records it once the grace period is over."""
    run_id = launch(launcher_instance, "stubborn_job")
    wait_for_file(tmp_path / "worker-started", timeout=120)
    job_id = launcher_instance.get_run_by_id(run_id).tags[JOB_ID_TAG]
    assert launcher_instance.run_launcher.terminate(run_id)
    assert launcher_instance.get_run_by_id(run_id).status == DagsterRunStatus.CANCELING
    run = finished_run(launcher_instance, run_id, timeout=KILL_MARGIN_SECONDS + 60)
    assert run.status == DagsterRunStatus.CANCELED
    [canceled] = [
        e.dagster_event
        for e in launcher_instance.all_logs(run_id)
        if e.dagster_event_type == DagsterEventType.RUN_CANCELED
    ]
    assert (
        canceled.message == f"Armada job {job_id} was cancelled and its run worker "
        "stopped without recording the cancellation"
    )
    assert admin.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED
