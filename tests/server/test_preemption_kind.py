"""A preempted run keeps why it was preempted (runs.preemption_kind) beside the job it made
room for, and the web UI's job page says both.

A real server with its in-process simulated executor and its HTTP app, on each database
backend, driven through the client.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.storage import schema as t

from .test_preemption_events import in_state, job, one_node_config, wait_until


@pytest.fixture
def running(database_url: str) -> Iterator[tuple[EmbeddedServer, ArmadaClient]]:
    """One simulated node of 2 CPUs, and the web UI."""
    config = one_node_config(database_url, http_port=0)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="batch", priority_factor=1))
        armada.create_queue(submit_pb2.Queue(name="urgent", priority_factor=1))
        yield server, armada


def stored(server: EmbeddedServer, job_id: str) -> tuple[str | None, str | None]:
    """The (preemption_kind, preempting_job_id) of the job's first run."""
    with server.server.storage.engine.connect() as conn:
        row = conn.execute(
            select(t.runs.c.preemption_kind, t.runs.c.preempting_job_id).where(
                t.runs.c.job_id == job_id, t.runs.c.run_index == 0
            )
        ).one()
    return row.preemption_kind, row.preempting_job_id


def job_page(server: EmbeddedServer, job_id: str) -> str:
    url = f"http://127.0.0.1:{server.server.http_port}/jobs/{job_id}"
    with urllib.request.urlopen(url, timeout=30) as response:
        body: bytes = response.read()
    return body.decode()


def test_an_urgency_preemption_is_kept_and_shown_with_its_job(
    running: tuple[EmbeddedServer, ArmadaClient],
) -> None:
    server, client = running
    [victim] = client.submit_jobs("batch", "fill", [job("low")])
    wait_until(in_state(client, victim, submit_pb2.RUNNING), "the low job to run")
    [urgent] = client.submit_jobs("urgent", "now", [job("high")])
    wait_until(in_state(client, victim, submit_pb2.PREEMPTED), "the low job's preemption")
    assert stored(server, victim) == ("urgency", urgent)
    page = job_page(server, victim)
    assert (
        f'Run 0: preempted (urgency) to make room for <a class="mono" href="/jobs/{urgent}">'
        f"{urgent}</a>"
    ) in page
    assert "preempted (" not in job_page(server, urgent)


def test_a_manual_preemption_is_kept_and_shown_with_who_asked(
    running: tuple[EmbeddedServer, ArmadaClient],
) -> None:
    server, client = running
    [urgent] = client.submit_jobs("urgent", "now", [job("high")])
    wait_until(in_state(client, urgent, submit_pb2.RUNNING), "the urgent job to run")
    assert client.preempt_jobs("urgent", "now", [urgent], reason="maintenance") == {urgent: ""}
    wait_until(in_state(client, urgent, submit_pb2.PREEMPTED), "the manual preemption")
    assert stored(server, urgent) == ("manual", None)
    assert "Run 0: preempted (manual) by anonymous</p>" in job_page(server, urgent)
