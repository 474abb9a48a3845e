"""The `armada` worker running real flow runs as Armada jobs (the job's process runs
`python -m prefect.engine`, as Prefect's process worker does: with the work pool's default
command, which on the local executor is the worker's own interpreter)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.states import Cancelling, Crashed, Scheduled
from prefect.workers.base import BaseWorker

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from prefect_armada import ArmadaWorker
from prefect_armada import worker as worker_module
from prefect_armada.worker import (
    ArmadaWorkerJobConfiguration,
    flow_run_owner,
    parse_infrastructure_id,
    unfinished_flow_runs,
)

from . import worker_flows
from .conftest import HERE, jobs_in

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def job_variables(armada: ArmadaClient, queue: str, flow_name: str) -> dict[str, Any]:
    return {
        "credentials": {"address": armada.config.address},
        "queue": queue,
        "env": {"PREFECT__FLOW_ENTRYPOINT": f"{HERE / 'worker_flows.py'}:{flow_name}"},
        "cpu": "500m",
        "memory": "1Gi",
        "cancellation_check_seconds": 0.5,
    }


async def start_flow_run(
    armada: ArmadaClient, queue: str, flow: Any, pool: str, **parameters: Any
) -> FlowRun:
    async with get_client() as client:
        return await client.create_flow_run(
            flow,
            parameters=parameters,
            state=Scheduled(),
            work_pool_name=pool,
            job_variables=job_variables(armada, queue, flow.fn.__name__),
        )


async def final_state(flow_run_id: uuid.UUID, timeout: float = 120) -> FlowRun:
    async with get_client() as client:
        for _ in range(int(timeout * 10)):
            flow_run = await client.read_flow_run(flow_run_id)
            if flow_run.state is not None and flow_run.state.is_final():
                return flow_run
            await asyncio.sleep(0.1)
    raise AssertionError(f"flow run {flow_run_id} did not end: {flow_run.state}")


async def final_state_saying(flow_run_id: uuid.UUID, text: str, timeout: float = 60) -> FlowRun:
    """The final state, once its message says `text` (the flow run process may report its
    own crash first, on the termination signal, and the worker then says why)."""
    ended = await final_state(flow_run_id)
    deadline = asyncio.get_running_loop().time() + timeout
    while text not in (ended.state.message or "") and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        ended = await final_state(flow_run_id)
    return ended


async def until_running(armada: ArmadaClient, flow_run_id: uuid.UUID) -> str:
    """The flow run's job id, once the flow run itself reports Running."""
    async with get_client() as client:
        for _ in range(1200):
            flow_run = await client.read_flow_run(flow_run_id)
            if (
                flow_run.state is not None
                and flow_run.state.is_running()
                and flow_run.infrastructure_pid
            ):
                return parse_infrastructure_id(flow_run.infrastructure_pid)[2]
            await asyncio.sleep(0.1)
    raise AssertionError("the flow run never started")


def test_the_owner_of_a_flow_run() -> None:
    """The recorded worker keeps its flow runs while online; otherwise rendezvous hashing
    over the online workers, whatever their order, and a worker leaving moves only its own
    flow runs."""
    ids = [str(uuid.uuid4()) for _ in range(300)]
    assert flow_run_owner(ids[0], "w1", ["w1", "w2", "w3"]) == "w1"
    assert flow_run_owner(ids[0], "w9", []) is None
    three = {i: flow_run_owner(i, "gone", ["w1", "w2", "w3"]) for i in ids}
    assert three == {i: flow_run_owner(i, None, ["w3", "w1", "w2"]) for i in ids}
    assert set(three.values()) == {"w1", "w2", "w3"}
    two = {i: flow_run_owner(i, None, ["w1", "w3"]) for i in ids}
    assert {i for i in ids if two[i] != three[i]} == {i for i in ids if three[i] == "w2"}


def test_the_worker_type_is_registered() -> None:
    assert BaseWorker.get_worker_class_from_type("armada") is ArmadaWorker
    template = ArmadaWorker.get_default_base_job_template()
    assert template["job_configuration"]["queue"] == "{{ queue }}"
    assert "credentials" in template["variables"]["properties"]
    assert template["variables"]["properties"]["executor"]["default"] == "local"


def test_the_default_command_runs_the_flow_run_with_a_python_that_has_prefect() -> None:
    """The local executor ignores the image and runs the command on its machine, where
    `python` may have no Prefect: the worker's own interpreter runs the flow run. Kubernetes
    runs the image's `python`. A deployment's `command` wins."""

    def command(**variables: Any) -> list[str]:
        spec = ArmadaWorkerJobConfiguration(**variables).build_pod_spec()
        return list(spec["containers"][0]["command"])

    assert command() == [sys.executable, "-m", "prefect.engine"]
    assert command(executor="local") == [sys.executable, "-m", "prefect.engine"]
    assert command(executor="kubernetes") == ["python", "-m", "prefect.engine"]
    assert command(command="python3 -m prefect.engine") == ["python3", "-m", "prefect.engine"]


async def test_the_worker_runs_a_flow_run_as_a_job(armada: ArmadaClient, queue: str) -> None:
    pool = f"armada-{uuid.uuid4().hex[:6]}"
    async with ArmadaWorker(work_pool_name=pool) as worker:
        flow_run = await start_flow_run(armada, queue, worker_flows.hello, pool, name="worker")
        assert worker.work_pool.type == "armada"
        [submitted] = await worker.get_and_submit_flow_runs()
        assert submitted.id == flow_run.id
    ended = await final_state(flow_run.id)
    assert ended.state is not None and ended.state.is_completed(), ended.state
    queue_name, job_set_id, job_id = parse_infrastructure_id(ended.infrastructure_pid or "")
    assert (queue_name, job_set_id) == (queue, f"prefect-{flow_run.id}")
    assert armada.get_job_status([job_id])[job_id] == submit_pb2.SUCCEEDED
    assert [line.line for line in armada.logs(job_id) if "hello worker from" in line.line]


async def test_an_infrastructure_failure_crashes_the_flow_run(
    armada: ArmadaClient, queue: str
) -> None:
    pool = f"armada-{uuid.uuid4().hex[:6]}"
    async with ArmadaWorker(work_pool_name=pool) as worker:
        flow_run = await start_flow_run(armada, queue, worker_flows.sleepy, pool)
        await worker.get_and_submit_flow_runs()
        job_id = await until_running(armada, flow_run.id)
        await asyncio.to_thread(
            armada.preempt_jobs, queue, f"prefect-{flow_run.id}", [job_id], reason="node drained"
        )
        ended = await final_state_saying(flow_run.id, "preempted")
    assert ended.state is not None and ended.state.is_crashed(), ended.state
    assert "infrastructure" in (ended.state.message or "")
    assert "preempted" in (ended.state.message or "")


async def test_a_flow_run_that_crashed_on_the_preemption_signal_learns_why(
    armada: ArmadaClient, queue: str
) -> None:
    """The flow run process may report Crashed on the SIGTERM of a preemption before the
    job's end is known; the worker then replaces that message with the infrastructure one."""
    pool = f"armada-{uuid.uuid4().hex[:6]}"
    async with ArmadaWorker(work_pool_name=pool) as worker:
        flow_run = await start_flow_run(armada, queue, worker_flows.sleepy, pool)
        await worker.get_and_submit_flow_runs()
        job_id = await until_running(armada, flow_run.id)
        async with get_client() as client:  # as the engine does on a termination signal
            await client.set_flow_run_state(
                flow_run.id,
                Crashed(message="Execution was aborted by a termination signal."),
                force=True,
            )
        await asyncio.to_thread(
            armada.preempt_jobs, queue, f"prefect-{flow_run.id}", [job_id], reason="node drained"
        )
        ended = await final_state_saying(flow_run.id, "preempted")
    assert ended.state is not None and ended.state.is_crashed(), ended.state
    assert "infrastructure" in (ended.state.message or "")
    assert "preempted" in (ended.state.message or "")


async def test_a_takeover_round_does_not_watch_again_a_flow_run_whose_watch_ended_meanwhile(
    armada: ArmadaClient, queue: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A takeover round reads the pool's unfinished flow runs, and while it reads, the watch
    of one of them ends (its end reported): the round's list is stale for it and must not
    start a second watch (a second takeover of a flow run that has ended)."""
    pool = f"armada-{uuid.uuid4().hex[:6]}"
    marker = tmp_path / "go"
    async with ArmadaWorker(work_pool_name=pool, takeover_interval_seconds=600) as worker:
        flow_run = await start_flow_run(armada, queue, worker_flows.waits, pool, marker=str(marker))
        await worker.get_and_submit_flow_runs()
        await until_running(armada, flow_run.id)

        async def listed_before_the_watch_ended(*args: Any) -> list[FlowRun]:
            unfinished = await unfinished_flow_runs(*args)
            assert flow_run.id in {f.id for f in unfinished}
            marker.touch()
            while flow_run.id in worker._watches:
                await asyncio.sleep(0.05)
            return unfinished

        monkeypatch.setattr(worker_module, "unfinished_flow_runs", listed_before_the_watch_ended)
        assert await worker.take_over_flow_runs() == []
        ended = await final_state(flow_run.id)
    assert ended.state is not None and ended.state.is_completed(), ended.state


async def test_cancelling_a_started_flow_run_cancels_its_job(
    armada: ArmadaClient, queue: str
) -> None:
    pool = f"armada-{uuid.uuid4().hex[:6]}"
    async with ArmadaWorker(work_pool_name=pool) as worker:
        flow_run = await start_flow_run(armada, queue, worker_flows.sleepy, pool)
        await worker.get_and_submit_flow_runs()
        job_id = await until_running(armada, flow_run.id)
        async with get_client() as client:
            await client.set_flow_run_state(flow_run.id, Cancelling(), force=True)
    ended = await final_state(flow_run.id)
    assert ended.state is not None and ended.state.is_cancelled(), ended.state
    assert armada.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED
    assert jobs_in(armada, queue, f"prefect-{flow_run.id}") == [job_id]
