"""The trigger inside Airflow's real triggerer runtime (TriggerRunner.run_trigger): a user
killing a deferred task cancels the job; a triggerer restart does not, and a new trigger built
from the serialized kwargs finishes the wait."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from airflow.jobs.triggerer_job_runner import TriggerRunner
from airflow.sdk.exceptions import AirflowFailException

from airflow_armada.operators.armada import ArmadaOperator
from airflow_armada.triggers.armada import ArmadaJobTrigger
from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item

from .conftest import QUEUE

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("airflow_db", "armada")]


def pod(script: str) -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "command": ["sh", "-c", script],
                "resources": {
                    "requests": {"cpu": "200m", "memory": "64Mi"},
                    "limits": {"cpu": "200m", "memory": "64Mi"},
                },
            }
        ]
    }


def start(runner: TriggerRunner, trigger_id: int, trigger: ArmadaJobTrigger) -> asyncio.Task:
    """What TriggerRunner.create_triggers does once it has built the trigger."""
    task = asyncio.create_task(runner.run_trigger(trigger_id, trigger))
    runner.triggers[trigger_id] = {
        "task": task,
        "name": f"armada-{trigger_id}",
        "events": 0,
        "is_watcher": False,
    }
    return task


async def until_running(client: ArmadaClient, job_id: str) -> None:
    for _ in range(600):
        if client.get_job_status([job_id])[job_id] == submit_pb2.RUNNING:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(job_id)


async def until_followed(capfd: pytest.CaptureFixture[str], job_ids: list[str]) -> None:
    """Until the trigger has seen every job running. A cancellation then lands anywhere in its
    wait: a read of the event stream, a log or status call (each keeps the message Airflow
    reads, `test_a_cancelled_call_raises_the_cancellation_it_was_given`)."""
    out = ""
    for _ in range(600):
        out += capfd.readouterr().out
        if all(f"Armada job {j} is RUNNING" in out for j in job_ids):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(job_ids)


async def test_user_kill_of_a_deferred_task_cancels_the_job(client: ArmadaClient, capfd) -> None:
    job_set = f"trigger-kill-{uuid.uuid4()}"
    ids = client.submit_jobs(QUEUE, job_set, [job_item(pod("sleep 120")) for _ in range(2)])
    runner = TriggerRunner()
    task = start(
        runner,
        1,
        ArmadaJobTrigger(
            queue=QUEUE, job_set_id=job_set, job_ids=ids, log_interval=0.3, try_number=3
        ),
    )
    await until_followed(capfd, ids)
    runner.to_cancel.append(1)  # what the triggerer does when the user marks the task failed
    await runner.cancel_triggers()
    with pytest.raises(asyncio.CancelledError):
        await task
    results = client.wait_for_jobs(QUEUE, job_set, ids, timeout=30)
    assert {r.state for r in results.values()} == {submit_pb2.CANCELLED}
    assert results[ids[0]].cancel_reason == "Airflow task killed (try 3)"


async def test_cancel_on_kill_false_leaves_the_job_running(client: ArmadaClient, capfd) -> None:
    """cancel_on_kill=False survives serialization (the triggerer builds the trigger from its
    kwargs), and a user kill then leaves the job running."""
    job_set = f"trigger-keep-{uuid.uuid4()}"
    [job_id] = client.submit_jobs(QUEUE, job_set, [job_item(pod("sleep 120"))])
    _, kwargs = ArmadaJobTrigger(
        queue=QUEUE, job_set_id=job_set, job_ids=[job_id], log_interval=0.3, cancel_on_kill=False
    ).serialize()
    assert kwargs["cancel_on_kill"] is False
    runner = TriggerRunner()
    task = start(runner, 1, ArmadaJobTrigger(**kwargs))
    await until_followed(capfd, [job_id])
    runner.to_cancel.append(1)
    await runner.cancel_triggers()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.get_job_status([job_id])[job_id] == submit_pb2.RUNNING
    client.cancel_jobs(QUEUE, job_set, [job_id], reason="test cleanup")


async def test_a_triggerer_restart_leaves_the_job_running_and_resumes(client: ArmadaClient) -> None:
    job_set = f"trigger-restart-{uuid.uuid4()}"
    [job_id] = client.submit_jobs(QUEUE, job_set, [job_item(pod("sleep 3; echo done"))])
    trigger = ArmadaJobTrigger(
        queue=QUEUE, job_set_id=job_set, job_ids=[job_id], log_interval=0.3, poll_interval=0.5
    )
    runner = TriggerRunner()
    task = start(runner, 1, trigger)
    await until_running(client, job_id)
    task.cancel()  # a triggerer shutting down cancels its triggers without the user message
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.get_job_status([job_id])[job_id] == submit_pb2.RUNNING

    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_armada.triggers.armada.ArmadaJobTrigger"
    revived = ArmadaJobTrigger(**kwargs)
    event = await anext(revived.run())
    assert event.payload["outcome"] == "succeeded"
    assert event.payload["job_ids"] == [job_id]


async def test_a_triggerer_without_the_connection_fails_the_task_saying_how_to_create_it(
    client: ArmadaClient,
) -> None:
    """The worker had the connection and submitted; the triggerer has no such connection:
    the task fails, not retried, with the line that says how to create it (the default
    connection falls back instead: test_operator.py)."""
    job_set = f"trigger-no-connection-{uuid.uuid4()}"
    [job_id] = client.submit_jobs(QUEUE, job_set, [job_item(pod("sleep 30"))])
    trigger = ArmadaJobTrigger(
        queue=QUEUE, job_set_id=job_set, job_ids=[job_id], armada_conn_id="armada_elsewhere"
    )
    event = await anext(trigger.run())
    assert (event.payload["outcome"], event.payload["retryable"]) == ("error", False)
    line = (
        "Airflow connection 'armada_elsewhere' is not defined; create it with: "
        "airflow connections add armada_elsewhere --conn-type armada"
    )
    assert line in event.payload["summary"]
    operator = ArmadaOperator(
        task_id="t", armada_queue=QUEUE, armada_conn_id="armada_elsewhere", pod_spec=pod("true")
    )
    with pytest.raises(AirflowFailException, match=line):
        operator.execute_complete({}, event.payload)
    client.cancel_jobs(QUEUE, job_set, [job_id], reason="test cleanup")
