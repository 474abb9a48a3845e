"""The reaper's Prefect adapter against the Prefect test server and a real Armada server: which
jobs belong to a flow run, a running or unknown flow run keeps its jobs, an unreachable API
cancels nothing (the forced end with a dead worker is in test_deployment.py)."""

from __future__ import annotations

import socket
import uuid

import pytest
from prefect import flow
from prefect.client.orchestration import PrefectClient, get_client
from prefect.states import Running

from armada_core.client import ArmadaClient, AsyncArmadaClient
from armada_core.client.lifecycle import TaskIdentity
from armada_core.client.lifecycle.reaping import AsyncReaper
from armada_core.client.reattach import LIVE_STATES
from armada_server.app import EmbeddedServer
from prefect_armada.reaping import PrefectFlowRunStates, flow_run_of

from ..jobs.factories import container, item


@flow
def reaped() -> None:
    """A flow whose runs the tests create in a state of their choosing (never executed)."""


RUN = uuid.UUID("0b8e4a1c-5a0d-4c0e-9f3e-2d8c1f6b7a90")


@pytest.mark.parametrize(
    ("task", "flow_run"),
    [
        (str(RUN), RUN),  # the worker's job of a flow run
        (f"flow-run/{RUN}/my_task-abc/0123456789abcdef/1/1", RUN),  # a task's job
        (f"flow-run/{RUN}/1", RUN),  # a job the flow itself started
        (f"task-run/{RUN}/1", None),  # a task run outside any flow run
        ("client-id/mine", None),
        ("adhoc/x", None),
    ],
)
def test_flow_run_of(task: str, flow_run: uuid.UUID | None) -> None:
    assert flow_run_of(task) == flow_run


def submit(armada: ArmadaClient, queue: str, task: str) -> str:
    identity = TaskIdentity("prefect", task, "1")
    sleeps = item(
        {"containers": [{**container(cpu="100m", memory="64Mi"), "command": ["sleep", "300"]}]}
    )
    [job_id] = armada.submit_jobs(queue, "reaper", identity.stamp([sleeps], 0))
    return job_id


async def two_rounds(address: str, client: PrefectClient, queue: str) -> list[str]:
    async with AsyncArmadaClient(address, timeout=10) as aclient:
        reaper = AsyncReaper(aclient, PrefectFlowRunStates(client), queue=queue)
        rounds = [await reaper.reap_once(), await reaper.reap_once()]
    assert all(not r.unreachable for r in rounds) or all(r.unreachable for r in rounds)
    return [r.unreachable for r in rounds]


async def test_running_and_unknown_flow_runs_keep_their_jobs(
    armada: ArmadaClient, armada_server: EmbeddedServer, queue: str
) -> None:
    async with get_client() as client:
        flow_run = await client.create_flow_run(reaped, state=Running())
        runs = submit(armada, queue, f"flow-run/{flow_run.id}/t/1/1")
        unknown = submit(armada, queue, f"flow-run/{uuid.uuid4()}/t/1/1")
        assert await two_rounds(armada_server.address, client, queue) == ["", ""]
    assert set(armada.get_job_status([runs, unknown]).values()) <= LIVE_STATES
    armada.cancel_jobs(queue, "reaper", [runs, unknown])


async def test_an_unreachable_prefect_api_cancels_nothing(
    armada: ArmadaClient, armada_server: EmbeddedServer, queue: str
) -> None:
    job_id = submit(armada, queue, f"flow-run/{uuid.uuid4()}/t/1/1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{s.getsockname()[1]}/api"
        async with PrefectClient(url) as client:
            unreachable = await two_rounds(armada_server.address, client, queue)
    assert all("Prefect API" in u for u in unreachable), unreachable
    assert armada.get_job_status([job_id])[job_id] in LIVE_STATES
    armada.cancel_jobs(queue, "reaper", [job_id])
