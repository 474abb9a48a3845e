"""Tasks and flows against a real Prefect server and a real armada-server (local executor)."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from prefect import flow, task
from prefect.client.orchestration import get_client

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, SpecError
from armada_core.scheduling.reasons import NO_MATCHING_NODE
from prefect_armada import (
    ArmadaCredentials,
    ArmadaJob,
    ArmadaRole,
    execute_armada_job,
    execute_armada_job_async,
    retry_infrastructure_failures,
    run_armada_job,
    submit_armada_job,
    wait_for_armada_job,
)

from .conftest import jobs_in, pod, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def make_job(armada: ArmadaClient, queue: str, spec: Any, **fields: Any) -> ArmadaJob:
    return ArmadaJob(
        credentials=ArmadaCredentials(address=armada.config.address),
        queue=queue,
        pod_spec=spec,
        log_interval_seconds=0.2,
        cancellation_check_seconds=0.5,
        poll_interval_seconds=0.5,
        **fields,
    )


def test_a_task_runs_a_job_to_success_and_streams_its_logs(
    armada: ArmadaClient, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    job = make_job(armada, queue, pod("echo preparing; echo done > /dev/termination-log"))

    @flow
    def pipeline() -> dict[str, Any]:
        handle = submit_armada_job(job)
        return wait_for_armada_job(job, handle)

    with caplog.at_level("INFO"):
        result = pipeline()
    [end] = result["jobs"]
    assert (result["outcome"], end["state"]) == ("succeeded", "SUCCEEDED")
    assert result["duration_seconds"] is not None
    assert "preparing" in caplog.messages


def test_a_gang_runs_together(armada: ArmadaClient, queue: str) -> None:
    job = make_job(armada, queue, pod("echo member $HOSTNAME"), replicas=2, job_set_id="gang")

    @flow
    def pipeline() -> dict[str, Any]:
        return execute_armada_job(job)

    result = pipeline()
    assert len(result["job_ids"]) == 2
    assert {end["state"] for end in result["jobs"]} == {"SUCCEEDED"}
    annotations = [
        armada.get_job_details([j], expand_job_spec=True)[j].job_spec.annotations
        for j in result["job_ids"]
    ]
    assert {a["armadaproject.io/gangId"] for a in annotations} == {
        annotations[0]["armadaproject.io/gangId"]
    }
    assert {a["armadaproject.io/gangCardinality"] for a in annotations} == {"2"}


def test_every_line_of_a_gang_that_ends_at_once_reaches_the_task_log(
    armada: ArmadaClient, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    job = make_job(
        armada, queue, pod("echo line of $ARMADA_JOB_ID"), replicas=3, job_set_id="gang-logs"
    )

    @flow
    def pipeline() -> dict[str, Any]:
        return execute_armada_job(job)

    with caplog.at_level("INFO"):
        result = pipeline()
    ids = result["job_ids"]
    assert len(ids) == 3
    assert sorted(m for m in caplog.messages if "line of" in m) == sorted(
        f"[{j}] line of {j}" for j in ids
    )


def test_an_elastic_pod_group_runs_every_role(
    armada: ArmadaClient, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    job = ArmadaJob(
        credentials=ArmadaCredentials(address=armada.config.address),
        queue=queue,
        job_set_id="pod-group",
        log_interval_seconds=0.2,
        cancellation_check_seconds=0.5,
        poll_interval_seconds=0.5,
        # The coordinator ends first, the workers after it.
        roles=[
            ArmadaRole(name="coordinator", pod_spec=pod("echo role coordinator")),
            ArmadaRole(
                name="worker", minimum=2, maximum=4, pod_spec=pod("echo role worker; sleep 2")
            ),
        ],
    )

    @flow
    def pipeline() -> dict[str, Any]:
        return execute_armada_job(job)

    with caplog.at_level("INFO"):
        result = pipeline()
    ids = jobs_in(armada, queue, "pod-group")
    assert len(ids) == 5  # every member up to each role's maximum
    details = armada.get_job_details(ids, expand_job_spec=True)
    roles = {j: details[j].job_spec.annotations["armadaproject.io/gangRole"] for j in ids}
    assert sorted(roles.values()) == ["coordinator"] + ["worker"] * 4
    assert {
        details[j].job_spec.annotations["armadaproject.io/gangRoleMinimum"]
        for j in ids
        if roles[j] == "worker"
    } == {"2"}
    # With room for everything, all five run, their logs in the task run's log.
    for job_id, role in roles.items():
        assert f"[{job_id}] role {role}" in caplog.messages
    # A member that succeeded keeps its role (SEMANTICS.md, "Elastic pod groups"): the
    # workers run on after the coordinator and the task succeeds.
    assert set(armada.get_job_status(ids).values()) == {submit_pb2.SUCCEEDED}
    assert sorted(result["job_ids"]) == sorted(ids)


def test_a_pod_group_takes_roles_instead_of_a_pod_spec() -> None:
    with pytest.raises(ValueError, match="exactly one of pod_spec and roles"):
        ArmadaJob(
            queue="q", pod_spec=pod("true"), roles=[ArmadaRole(name="w", pod_spec=pod("true"))]
        )
    with pytest.raises(ValueError, match="replicas and minimum_cardinality go with pod_spec"):
        ArmadaJob(queue="q", replicas=2, roles=[ArmadaRole(name="w", pod_spec=pod("true"))])
    job = ArmadaJob(
        queue="q", roles=[ArmadaRole(name="w", pod_spec=pod("true"), minimum=3, maximum=2)]
    )
    with pytest.raises(
        SpecError,
        match=r"roles\[0\]\.minimum: must be between 1 and the "
        r"role's maximum 2",
    ):
        job.items("cid")


def test_a_role_carries_its_own_maximum_hops() -> None:
    """ArmadaRole.max_hops is the role's gangRoleMaxHops; a role without one carries none."""
    job = ArmadaJob(
        queue="q",
        roles=[
            ArmadaRole(name="coordinator", pod_spec=pod("true")),
            ArmadaRole(name="worker", pod_spec=pod("true"), minimum=2, max_hops=2),
        ],
    )
    hops = [i.annotations.get("armadaproject.io/gangRoleMaxHops") for i in job.items("cid")]
    assert hops == [None, "2", "2"]
    with pytest.raises(ValueError, match="max_hops"):
        ArmadaRole(name="w", pod_spec=pod("true"), max_hops=-1)


def test_a_user_error_is_not_retried(armada: ArmadaClient, queue: str) -> None:
    job = make_job(
        armada,
        queue,
        pod("echo 'bad input file' > /dev/termination-log; exit 3"),
        job_set_id="user-error",
    )

    @flow
    def pipeline() -> tuple[bool, str]:
        state = execute_armada_job.with_options(retries=2, retry_delay_seconds=0)(
            job, return_state=True
        )
        return state.is_failed(), state.message or ""

    failed, message = pipeline()
    assert failed
    assert "ArmadaUserError" in message
    assert "exit code 3" in message
    assert "bad input file" in message
    assert len(jobs_in(armada, queue, "user-error")) == 1  # one attempt, no retry


def test_an_infrastructure_failure_is_retried_with_a_new_job(
    armada: ArmadaClient, queue: str, tmp_path
) -> None:
    marker = tmp_path / "first-attempt"
    # The first attempt runs until it is preempted; the second finds the marker and succeeds.
    job = make_job(
        armada,
        queue,
        pod(f"if [ -e {marker} ]; then echo second; exit 0; fi; touch {marker}; sleep 120"),
        job_set_id="infra",
    )

    def preempt_first_job() -> None:
        [first] = wait_until(lambda: jobs_in(armada, queue, "infra"), message="first job")
        wait_until(lambda: marker.exists(), message="first attempt running")
        armada.preempt_jobs(queue, "infra", [first], reason="test preemption")

    @task(retries=1, retry_delay_seconds=0, retry_condition_fn=retry_infrastructure_failures)
    def run_with_retry() -> dict[str, Any]:
        return job.run_sync()

    @flow
    def pipeline() -> dict[str, Any]:
        return run_with_retry()

    preempter = threading.Thread(target=preempt_first_job)
    preempter.start()
    result = pipeline()
    preempter.join()
    submitted = jobs_in(armada, queue, "infra")
    assert len(submitted) == 2
    states = armada.get_job_status(submitted)
    assert states[submitted[0]] == submit_pb2.PREEMPTED
    assert result["job_ids"] == [submitted[1]]
    assert result["jobs"][0]["state"] == "SUCCEEDED"


async def test_async_flow_variant(armada: ArmadaClient, queue: str) -> None:
    job = make_job(armada, queue, pod("true"), job_set_id="async")

    @flow
    async def pipeline() -> dict[str, Any]:
        return await execute_armada_job_async(job)

    result = await pipeline()
    assert [end["state"] for end in result["jobs"]] == ["SUCCEEDED"]


def test_a_job_cancelled_elsewhere_ends_the_task_cancelled(
    armada: ArmadaClient, queue: str
) -> None:
    job = make_job(armada, queue, pod("sleep 120"), job_set_id="cancelled-elsewhere")

    def cancel_it() -> None:
        [job_id] = wait_until(lambda: jobs_in(armada, queue, "cancelled-elsewhere"))
        armada.cancel_jobs(queue, "cancelled-elsewhere", [job_id], reason="operator")

    canceller = threading.Thread(target=cancel_it)
    canceller.start()
    state = run_armada_job(job, return_state=True)
    canceller.join()
    assert state.is_cancelled(), state
    assert "cancelled" in state.message


def test_cancelling_a_started_flow_run_cancels_its_job(armada: ArmadaClient, queue: str) -> None:
    job = make_job(armada, queue, pod("sleep 120"), job_set_id="cancel-flow")
    states: list[Any] = []

    @flow
    def pipeline() -> Any:
        return execute_armada_job(job)

    runner = threading.Thread(target=lambda: states.append(pipeline(return_state=True)))
    runner.start()
    [job_id] = wait_until(lambda: jobs_in(armada, queue, "cancel-flow"), message="the job")
    wait_until(
        lambda: armada.get_job_status([job_id])[job_id] == submit_pb2.RUNNING,
        message="the job running",
    )
    flow_run_id = (
        armada.get_job_details([job_id], expand_job_spec=True)[job_id]
        .job_spec.annotations["armadaproject.io/externalJobUri"]
        .split("/")[3]
    )

    async def cancel() -> None:
        from prefect.states import Cancelling

        async with get_client() as client:
            await client.set_flow_run_state(flow_run_id, Cancelling(), force=True)

    from prefect.utilities.asyncutils import run_coro_as_sync

    run_coro_as_sync(cancel())
    runner.join(60)
    assert armada.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED
    assert states and states[0].is_cancelled(), states


def test_a_waiting_job_logs_why(
    armada: ArmadaClient, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The task's log says why the job is not running yet (the scheduler's reason): its
    nodes are cordoned (a cordoned queue would refuse the job)."""
    nodes = [f"{n.executor}/{n.name}" for n in armada.get_nodes()]
    for node in nodes:
        armada.cordon_node(node)
    job = make_job(armada, queue, pod("true"), job_set_id="waiting")
    states: list[Any] = []
    runner = threading.Thread(
        target=lambda: states.append(
            run_armada_job(job, infrastructure_retries=0, return_state=True)
        )
    )
    with caplog.at_level("INFO"):
        runner.start()
        try:
            wait_until(
                lambda: [m for m in caplog.messages if NO_MATCHING_NODE in m],
                30,
                "the waiting reason in the task's log",
            )
        finally:
            for node in nodes:
                armada.uncordon_node(node)
            runner.join(60)
    assert states and states[0].is_completed(), states
    [line] = [m for m in caplog.messages if NO_MATCHING_NODE in m]
    assert re.fullmatch(
        rf"Armada job \w+ QUEUED \d+s: {re.escape(NO_MATCHING_NODE)}"
        r"; queue \S+ at \d+\.\dx its fair share",
        line,
    ), line


def test_a_retry_cancels_the_previous_tries_live_job(armada: ArmadaClient, queue: str) -> None:
    """The try is part of a task's identity: a retry never runs beside the job of the try
    before it (a re-execution of the same try would reattach instead)."""
    job = make_job(armada, queue, pod("sleep 120"), job_set_id="retried")
    tries: list[list[str]] = []

    @task(retries=1, retry_delay_seconds=0)
    def submits_then_fails_once() -> list[str]:
        tries.append(job.trigger_sync().job_ids)
        if len(tries) == 1:
            raise RuntimeError("failed after submitting")
        return tries[-1]

    @flow
    def pipeline() -> list[str]:
        return submits_then_fails_once()

    [second] = pipeline()
    [[first], _] = tries
    assert first != second
    assert jobs_in(armada, queue, "retried") == [first, second]
    details = armada.get_job_details([first, second])
    assert details[first].state == submit_pb2.CANCELLED
    assert details[first].cancel_reason == "replaced by attempt 2 of submits_then_fails_once"
    assert details[second].state not in (submit_pb2.CANCELLED, submit_pb2.FAILED)
    armada.cancel_jobs(queue, "retried", [second])
