"""Servers that run jobs, for the CLI tests that need jobs to run, fail, retry or be preempted:
the local executor (real processes) or the simulated one (preemptions without processes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, PriorityClassConfig, ServerConfig

CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)


def server_config(tmp_path: Path, executor: str, **overrides: Any) -> ServerConfig:
    """One node of 2 CPUs and 2Gi, fast cycles, a preemptible "low" default class."""
    settings: dict[str, Any] = dict(
        port=0,
        http_port=None,
        executor=executor,
        sandbox_dir=str(tmp_path / "pods"),
        database_url=f"sqlite:///{tmp_path / 'armada.db'}",
        nodes=(NodeGroup(1, "2", "2Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
        heartbeat_seconds=0.2,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    settings.update(overrides)
    return ServerConfig(**settings)


def job_file(
    queue: str,
    job_set: str,
    *commands: str,
    cpu: str = "1",
    priority_class: str = "",
    simulated_seconds: float | None = None,
) -> str:
    """A job file with one job per shell command (the server's default priority class
    unless one is given). The simulated executor ignores the command: a run there lasts
    `simulated_seconds` (its default: one second)."""
    jobs = []
    annotations = (
        f"    annotations: {{armadaproject.io/simulatedDuration: '{simulated_seconds}'}}\n"
        if simulated_seconds is not None
        else ""
    )
    for command in commands:
        jobs.append(
            "  - podSpec:\n"
            + (f"      priorityClassName: {priority_class}\n" if priority_class else "")
            + f"      containers:\n"
            f"        - name: main\n"
            f"          image: busybox\n"
            f"          command: [sh, -c, {command!r}]\n"
            f"          resources:\n"
            f"            requests: {{cpu: '{cpu}', memory: 256Mi}}\n"
            f"            limits: {{cpu: '{cpu}', memory: 256Mi}}\n" + annotations
        )
    return f"queue: {queue}\njobSetId: {job_set}\njobs:\n" + "".join(jobs)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def in_state(client: ArmadaClient, job_id: str, *states: int) -> Callable[[], bool]:
    return lambda: client.get_job_status([job_id])[job_id] in states


def ended(client: ArmadaClient, job_id: str) -> Callable[[], bool]:
    return in_state(
        client,
        job_id,
        submit_pb2.SUCCEEDED,
        submit_pb2.FAILED,
        submit_pb2.CANCELLED,
        submit_pb2.PREEMPTED,
    )


def start(config: ServerConfig) -> EmbeddedServer:
    return EmbeddedServer(config).start()
