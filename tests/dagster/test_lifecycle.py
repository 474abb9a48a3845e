"""Retries, termination and reattachment: the parts of a step's life that involve Dagster
and Armada disagreeing about what happened."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from dagster import (
    DagsterEventType,
    DagsterInstance,
    OpExecutionContext,
    RetryPolicy,
    job,
    materialize,
    op,
)

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_core.retry import load_policy
from armada_core.scheduling.reasons import NO_MATCHING_NODE
from dagster_armada import ArmadaResource, armada_asset, armada_op, execute_armada_job
from tests.dagster.conftest import event_log
from tests.dagster.scripts.crash_run import build_job, resource
from tests.dagster.test_assets import materialization_metadata, submitted

pytestmark = pytest.mark.e2e

CRASH_SCRIPT = Path(__file__).parent / "scripts" / "crash_run.py"


def wait_for_file(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)
    return path.read_text().strip()


def job_id_of(hostname: str) -> str:
    """armada-<jobId>-0[-<run>] -> jobId (the local executor names pods that way)."""
    return hostname.split("-")[1]


def in_background(fn: Callable[[], None]) -> threading.Thread:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # surfaced by the test through .errors
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def step_events(result, kind: DagsterEventType) -> list:  # type: ignore[no-untyped-def]
    return [e for e in result.all_events if e.event_type == kind]


def test_infrastructure_failure_is_retried_by_the_retry_policy(
    armada: ArmadaResource, admin: ArmadaClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    script = (
        f"if [ -f {tmp_path}/done ]; then echo second attempt; exit 0; fi; "
        f"echo $HOSTNAME > {tmp_path}/started; sleep 60"
    )
    flaky = armada_asset(
        name="flaky",
        command=["sh", "-c", script],
        cpu="100m",
        memory="64Mi",
        retry_policy=RetryPolicy(max_retries=1),
    )

    def preempt_first_attempt() -> None:
        job_id = job_id_of(wait_for_file(tmp_path / "started"))
        (tmp_path / "done").touch()
        job_set = admin.get_job_details([job_id])[job_id].jobset
        assert admin.preempt_jobs(armada.queue, job_set, [job_id]) == {job_id: ""}

    helper = in_background(preempt_first_attempt)
    result = materialize([flaky], resources={"armada": armada}, instance=instance)
    helper.join(10)
    assert not helper.errors  # type: ignore[attr-defined]
    assert result.success
    assert len(step_events(result, DagsterEventType.STEP_UP_FOR_RETRY)) == 1
    jobs = submitted(admin, armada.queue, f"dagster-{result.run_id}")
    assert len(jobs) == 2  # one per attempt: client ids carry the retry number
    first, second = jobs
    assert admin.get_job_status([first])[first] == submit_pb2.PREEMPTED
    assert materialization_metadata(result, "flaky")["armada/job_id"] == second


def test_server_side_retries_are_waited_through(
    armada: ArmadaResource, admin: ArmadaClient, tmp_path: Path
) -> None:
    admin.create_retry_policy(
        load_policy(f"""
kind: RetryPolicy
metadata: {{name: exit-3-{armada.queue}}}
spec:
  retryLimit: 1
  rules:
    - action: Retry
      onExitCodes: {{operator: In, values: [3]}}
""")
    )
    script = f"if [ -f {tmp_path}/once ]; then exit 0; fi; touch {tmp_path}/once; exit 3"
    shaky = armada_asset(
        name="shaky",
        command=["sh", "-c", script],
        cpu="100m",
        memory="64Mi",
        job={"retry_policy": f"exit-3-{armada.queue}"},
    )
    result = materialize([shaky], resources={"armada": armada})
    assert result.success
    metadata = materialization_metadata(result, "shaky")
    assert metadata["armada/server_retries"] == 1
    assert len(submitted(admin, armada.queue, f"dagster-{result.run_id}")) == 1


def test_run_termination_cancels_the_job(
    armada: ArmadaResource, admin: ArmadaClient, tmp_path: Path
) -> None:
    long = armada_asset(
        name="long",
        command=["sh", "-c", f"echo $HOSTNAME > {tmp_path}/started; sleep 120"],
        cpu="100m",
        memory="64Mi",
    )
    seen: list[str] = []

    def terminate_the_run() -> None:
        seen.append(job_id_of(wait_for_file(tmp_path / "started")))
        os.kill(os.getpid(), signal.SIGINT)  # what terminating a run sends its worker

    helper = in_background(terminate_the_run)
    started = time.monotonic()
    result = materialize([long], resources={"armada": armada}, raise_on_error=False)
    helper.join(10)
    assert not result.success
    assert time.monotonic() - started < 60
    [job_id] = seen
    deadline = time.monotonic() + 30
    while admin.get_job_status([job_id])[job_id] != submit_pb2.CANCELLED:
        assert time.monotonic() < deadline, admin.get_job_status([job_id])
        time.sleep(0.1)


def test_a_resumed_run_reattaches_to_its_job(
    armada: ArmadaResource, admin: ArmadaClient, tmp_path: Path, server
) -> None:  # type: ignore[no-untyped-def]
    run_id = str(uuid.uuid4())
    crashed = subprocess.Popen(
        [sys.executable, str(CRASH_SCRIPT), server.address, armada.queue, run_id, str(tmp_path)],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        job_id = job_id_of(wait_for_file(tmp_path / "started"))
    finally:
        crashed.kill()  # SIGKILL: no cleanup, no cancellation, the job keeps running
        crashed.wait()
    assert admin.get_job_status([job_id])[job_id] in (submit_pb2.RUNNING, submit_pb2.PENDING)

    timer = threading.Timer(1.0, (tmp_path / "release").touch)
    timer.start()
    result = build_job(str(tmp_path)).execute_in_process(
        run_id=run_id, resources={"armada": resource(server.address, armada.queue)}
    )
    timer.join()
    assert result.success
    output = result.output_for_node("wait_for_release")  # the shared result payload
    assert output["job_ids"] == [job_id]
    assert output["outcome"] == "succeeded"
    assert output["jobs"][0]["state"] == "SUCCEEDED"
    assert output["duration_seconds"] is not None
    assert submitted(admin, armada.queue, f"dagster-{run_id}") == [job_id]


def test_the_step_log_says_why_its_job_still_waits(
    armada: ArmadaResource, admin: ArmadaClient, instance: DagsterInstance
) -> None:
    """Cordoned nodes hold the job (a cordoned queue would refuse it): the step's log gives
    the scheduler's reason."""
    waiting = armada.model_copy(update={"waiting_poll_interval": 0.2})
    quick = armada_op(name="quick", command=["true"], cpu="100m", memory="64Mi")

    @job
    def held() -> None:
        quick()

    run_id = str(uuid.uuid4())
    reason = f"QUEUED [0-9]+s: {re.escape(NO_MATCHING_NODE)}"
    nodes = [f"{n.executor}/{n.name}" for n in admin.get_nodes()]

    def uncordon() -> None:
        for node in nodes:
            admin.uncordon_node(node)

    def uncordon_once_told() -> None:
        deadline = time.monotonic() + 60
        while not any(re.search(reason, m or "") for m in event_log(instance, run_id)):
            assert time.monotonic() < deadline, event_log(instance, run_id)
            time.sleep(0.05)
        uncordon()

    for node in nodes:
        admin.cordon_node(node)
    helper = in_background(uncordon_once_told)
    try:
        result = held.execute_in_process(
            run_id=run_id, instance=instance, resources={"armada": waiting}
        )
    finally:
        uncordon()  # whatever happened: the session's other tests need the nodes
    helper.join(10)
    assert not helper.errors  # type: ignore[attr-defined]
    assert result.success
    [line] = [m for m in event_log(instance, run_id) if re.search(reason, m or "")]
    assert line.startswith("Armada job ")


def test_a_step_submitting_several_jobs_names_them_with_client_ids(
    armada: ArmadaResource, admin: ArmadaClient
) -> None:
    """Each client_id is a task of its own: the second job is not taken for the first."""

    @op
    def two_jobs(context: OpExecutionContext) -> list[str]:
        return [
            execute_armada_job(
                context, armada, command=["true"], cpu="100m", memory="64Mi", client_id=key
            ).job_ids[0]
            for key in ("prepare", "publish")
        ]

    @job
    def both() -> None:
        two_jobs()

    result = both.execute_in_process()
    first, second = result.output_for_node("two_jobs")
    assert first != second
    assert sorted(submitted(admin, armada.queue, f"dagster-{result.run_id}")) == sorted(
        [first, second]
    )
