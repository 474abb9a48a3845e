"""A fake cluster (API server + kubelet) and, for the end-to-end tests, a real armada-server
with the Kubernetes executor connected to it over loopback gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import PriorityClassConfig, ServerConfig
from armada_server.executors.agent import ExecutorAgent
from armada_server.executors.control import ControlServer
from armada_server.executors.kubernetes import KubernetesBackend, KubernetesSettings

from .fake_apiserver import FakeApiServer
from .fake_kubelet import FakeKubelet

EXECUTOR = "k8s-1"
CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)
FAST = KubernetesSettings(
    finished_pod_retention=0.0,
    node_refresh_interval=0.2,
    tick=0.05,
    watch_timeout=5,
    image_pull_timeout=0.5,
    unschedulable_timeout=0.5,
)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.5) as server:
        yield server


@pytest.fixture
def kubelet(fake: FakeApiServer) -> FakeKubelet:
    k = FakeKubelet(fake)
    k.add_node("node-a", cpu="4", memory="16Gi")
    k.add_node("node-b", cpu="4", memory="16Gi")
    return k


@dataclass
class Executor:
    backend: KubernetesBackend
    agent: ExecutorAgent
    task: asyncio.Task
    channel: grpc.aio.Channel
    control: ControlServer
    closed: bool = False

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.control.stop()
        await self.backend.close()
        await self.channel.close()


@dataclass
class Cluster:
    """The test's handle on everything: server, client, fake cluster, executor."""

    server: EmbeddedServer
    client: ArmadaClient
    fake: FakeApiServer
    kubelet: FakeKubelet
    settings: KubernetesSettings
    executors: list[Executor] = field(default_factory=list)

    async def start_executor(self, **changes: Any) -> Executor:
        backend = KubernetesBackend(
            self.fake.api_client(), EXECUTOR, replace(self.settings, **changes)
        )
        channel = grpc.aio.insecure_channel(self.server.address)
        control = ControlServer(backend)  # serves the pods' logs to the server
        await control.start()
        agent = ExecutorAgent(channel, EXECUTOR, "default", backend, interval=0.1, control=control)
        await backend.open(agent.report)
        executor = Executor(
            backend, agent, asyncio.get_running_loop().create_task(agent.run()), channel, control
        )
        self.executors.append(executor)
        return executor

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A blocking call off the event loop, which the executor needs."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def submit(
        self, *items: submit_pb2.JobSubmitRequestItem, job_set: str = "s"
    ) -> list[str]:
        return await self.call(self.client.submit_jobs, "q", job_set, list(items))

    async def pods(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        return await self.call(self.kubelet.wait_pods, count, timeout=timeout)

    async def pod_of(
        self, job_id: str, run_index: int = 0, timeout: float = 10.0
    ) -> dict[str, Any]:
        name = f"armada-{job_id}-0" + (f"-{run_index}" if run_index else "")

        def found() -> dict[str, Any] | None:
            pod = self.fake.cluster.get("pods", "default", name)
            return pod if pod is not None and pod["spec"].get("nodeName") else None

        return await self.call(self.fake.wait_for, found, timeout)

    async def state(self, job_id: str) -> str:
        states = await self.call(self.client.get_job_status, [job_id])
        return submit_pb2.JobState.Name(states[job_id])

    async def wait_state(self, job_id: str, *wanted: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            current = await self.state(job_id)
            if current in wanted or time.monotonic() > deadline:
                assert current in wanted, f"job {job_id} is {current}, not {wanted}"
                return current
            await asyncio.sleep(0.05)

    async def wait(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            assert time.monotonic() < deadline, "the condition did not hold in time"
            await asyncio.sleep(0.02)
        return value


@pytest.fixture
async def cluster(
    tmp_path: Path, fake: FakeApiServer, kubelet: FakeKubelet
) -> AsyncIterator[Cluster]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=f"sqlite:///{tmp_path / 'a.db'}",
        scheduling_period=0.1,
        executor_sync_interval=0.1,
        lease_timeout=10.0,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    server = await asyncio.to_thread(EmbeddedServer(config).start)
    client = ArmadaClient(server.address)
    await asyncio.to_thread(client.create_queue, submit_pb2.Queue(name="q", priority_factor=1))
    handle = Cluster(server, client, fake, kubelet, FAST)
    yield handle
    for executor in handle.executors:
        await executor.close()
    client.close()
    await asyncio.to_thread(server.stop)
