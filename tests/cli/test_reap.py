"""`armada reap`: its options, and a round against an Airflow that cannot be reached (the
rounds against a real Airflow are in tests/airflow/test_deployment.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, queue
from armada_core.client.lifecycle import TaskIdentity
from armada_server.app import EmbeddedServer

from ..jobs.factories import item
from .conftest import Armada


def test_reap_needs_the_airflow_url(armada: Armada, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    result = armada("reap", "--rounds", "1")
    assert result.code == 2
    assert "--airflow URL is required" in result.err


def test_reap_refuses_a_bad_interval(armada: Armada) -> None:
    result = armada("reap", "--airflow", "http://127.0.0.1:1", "--interval", "0")
    assert result.code == 2
    assert "--interval must be positive" in result.err


def test_an_unreachable_airflow_cancels_nothing_and_is_counted(
    armada: Armada, server: EmbeddedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ArmadaClient(server.address) as client:
        client.create_queue(queue("q"))
        identity = TaskIdentity("airflow", "dag/run/task/-1", "0")
        [job_id] = client.submit_jobs("q", "s", identity.stamp([item()], 0))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
            status = tmp_path / "reaper.json"
            result = armada(
                "reap",
                "--airflow",
                url,
                "--rounds",
                "2",
                "--interval",
                "0.01",
                "--status-file",
                str(status),
            )
        assert result.code == 0, result.err
        assert client.get_job_status([job_id])[job_id] == submit_pb2.QUEUED
    counters = json.loads(status.read_text())
    assert (counters["rounds"], counters["cancelled"], counters["unreachable"]) == (2, 0, 2)
    assert url in counters["last_unreachable"]
    assert "airflow cannot be reached" in caplog.text
