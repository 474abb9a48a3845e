"""Idempotent submission: a submitter that crashes and is executed again never submits a
second job; it finds the first one again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.states import Scheduled

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from prefect_armada import ArmadaCredentials, ArmadaJob

from . import worker_flows
from .conftest import HERE, jobs_in, pod, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def run_engine(flow_run_id: str, api_url: str) -> subprocess.Popen[bytes]:
    """Execute the flow run the way a worker does, in its own process."""
    env = {
        **os.environ,
        "PREFECT_API_URL": api_url,
        "PREFECT__FLOW_RUN_ID": flow_run_id,
        "PREFECT__FLOW_ENTRYPOINT": f"{HERE / 'worker_flows.py'}:submits_a_job",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "prefect.engine"],
        env=env,
        cwd=HERE.parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def test_no_duplicate_submission_after_a_crash(
    armada: ArmadaClient, queue: str, prefect_server: str, tmp_path: Path
) -> None:
    marker = tmp_path / "job-started"
    async with get_client() as client:
        flow_run = await client.create_flow_run(
            worker_flows.submits_a_job,
            state=Scheduled(),
            parameters={"address": armada.config.address, "queue": queue, "marker": str(marker)},
        )
    first = run_engine(str(flow_run.id), prefect_server)
    try:
        await asyncio.to_thread(wait_until, marker.exists, 90, "the job to start")
    finally:
        first.send_signal(signal.SIGKILL)  # the crash: no chance to clean anything up
        first.wait()
    [job_id] = jobs_in(armada, queue, "crash")

    async with get_client() as client:  # executed again, as a retry or rescheduling would
        await client.set_flow_run_state(flow_run.id, Scheduled(), force=True)
    second = run_engine(str(flow_run.id), prefect_server)
    _, stderr = await asyncio.to_thread(second.communicate, timeout=120)
    assert second.returncode == 0, stderr.decode()[-3000:]
    async with get_client() as client:
        ended = await client.read_flow_run(flow_run.id)
    assert ended.state is not None and ended.state.is_completed(), ended.state
    assert jobs_in(armada, queue, "crash") == [job_id]
    assert b"Reattaching to Armada job(s) " + job_id.encode() in stderr


def test_a_failed_generation_is_replaced_and_a_running_one_reattached(
    armada: ArmadaClient, queue: str
) -> None:
    """The same identity triggered again reattaches while its job lives, and submits a new
    generation once the earlier one ended badly (an earlier execution saw it fail)."""
    job = ArmadaJob(
        credentials=ArmadaCredentials(address=armada.config.address),
        queue=queue,
        job_set_id="gen",
        pod_spec=pod("sleep 60"),
        client_id=f"nightly-{queue}",
    )
    first = job.trigger_sync()
    assert not first.reattached
    again = job.trigger_sync()
    assert again.job_ids == first.job_ids and again.reattached
    armada.cancel_jobs(queue, "gen", first.job_ids)
    [job_id] = first.job_ids
    wait_until(
        lambda: armada.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED,
        message="the cancellation",
    )
    fresh = job.trigger_sync()
    assert fresh.job_ids != first.job_ids and not fresh.reattached
    assert len(jobs_in(armada, queue, "gen")) == 2
    armada.cancel_jobs(queue, "gen", fresh.job_ids)
