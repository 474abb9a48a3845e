"""A real server over loopback gRPC (SQLite in tmp_path) and clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from armada_core.client import ArmadaClient, AsyncArmadaClient, queue
from armada_server.app import EmbeddedServer

HEARTBEAT = 0.2


def pod(cpu: str = "100m", memory: str = "64Mi", **extra: Any) -> dict[str, Any]:
    """A small pod spec in Kubernetes JSON shape."""
    return {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sleep", "1"],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ],
        **extra,
    }


class Servers:
    """Start, stop and restart a server on one database file and (after the first) port."""

    def __init__(self, tmp_path: Path) -> None:
        self.url = f"sqlite:///{tmp_path / 'armada.db'}"
        self.port = 0
        self.current: EmbeddedServer | None = None

    def start(self, port: int | None = None) -> EmbeddedServer:
        server = EmbeddedServer(
            database_url=self.url,
            port=self.port if port is None else port,
            heartbeat_seconds=HEARTBEAT,
            http_port=None,
        ).start()
        if port is None:
            self.port = server.server.port or 0
            self.current = server
        return server

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None

    def restart(self) -> EmbeddedServer:
        self.stop()
        return self.start()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def client(servers: Servers) -> Iterator[ArmadaClient]:
    with ArmadaClient(servers.address, timeout=10) as c:
        yield c


@pytest.fixture
async def aclient(servers: Servers) -> AsyncIterator[AsyncArmadaClient]:
    async with AsyncArmadaClient(servers.address, timeout=10) as c:
        yield c


@pytest.fixture
def q(client: ArmadaClient) -> str:
    client.create_queue(queue("q"))
    return "q"


@pytest.fixture(params=["sync", "async"])
def any_client(request: pytest.FixtureRequest, servers: Servers) -> Iterator[Any]:
    """Each scenario once with ArmadaClient and once with AsyncArmadaClient."""
    from .flavours import AsyncOnThread

    c: Any = (
        ArmadaClient(servers.address, timeout=10)
        if request.param == "sync"
        else AsyncOnThread(servers.address, timeout=10)
    )
    yield c
    c.close()
