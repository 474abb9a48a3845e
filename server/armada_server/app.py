"""Assembling the server: storage, services, health and reflection on one gRPC port."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from armada_core.api import (
    event_pb2,
    event_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_server.auth import Authenticator, AuthInterceptor, Authorizer
from armada_server.config import ServerConfig
from armada_server.eventhub import EventHub
from armada_server.metrics import Metrics
from armada_server.services.common import Context
from armada_server.services.events import EventService
from armada_server.services.jobs import JobsService
from armada_server.services.queues import QueueService
from armada_server.services.retry_policies import RetryPolicyService
from armada_server.services.submit import SubmitService
from armada_server.storage.database import default_database_url, open_database
from armada_server.storage.notify import Listener
from armada_server.storage.store import Store

log = logging.getLogger("armada_server")

SERVICES = {
    "api.Submit": submit_pb2,
    "api.QueueService": submit_pb2,
    "api.RetryPolicyService": submit_pb2,
    "api.Event": event_pb2,
    "api.Jobs": job_pb2,
}

GRPC_OPTIONS = [
    # Ping idle connections so that watchers behind proxies stay connected.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
]


class ArmadaServer:
    """One server process: call `start()` inside a running event loop, `stop()` to finish."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.database_url = config.database_url or default_database_url()
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="armada-db")
        self.store: Store | None = None
        self.metrics: Metrics | None = None
        self._listener: Listener | None = None

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        engine = await loop.run_in_executor(self._pool, open_database, self.database_url)
        hub = EventHub(loop)
        self.store = Store(engine, on_commit=hub.notify)
        self.metrics = Metrics(self.store)
        if engine.dialect.name == "postgresql":
            self._listener = Listener(engine, hub.notify)
            await loop.run_in_executor(self._pool, self._listener.start)
        ctx = Context(self.config, self.store, hub, self._pool, Authorizer(self.config.auth),
                      self.metrics)
        interceptors = []
        if self.config.auth.enabled:
            interceptors.append(AuthInterceptor(Authenticator(self.config.auth)))
        server = grpc.aio.server(options=GRPC_OPTIONS, interceptors=interceptors)
        queues = QueueService(ctx)
        submit_pb2_grpc.add_SubmitServicer_to_server(SubmitService(ctx, queues), server)
        submit_pb2_grpc.add_QueueServiceServicer_to_server(queues, server)
        submit_pb2_grpc.add_RetryPolicyServiceServicer_to_server(RetryPolicyService(ctx), server)
        event_pb2_grpc.add_EventServicer_to_server(EventService(ctx), server)
        job_pb2_grpc.add_JobsServicer_to_server(JobsService(ctx), server)
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        for name in [*SERVICES, ""]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        reflection.enable_server_reflection(
            [*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
        address = f"{self.config.host}:{self.config.port}"
        if self.config.tls_cert and self.config.tls_key:
            credentials = grpc.ssl_server_credentials([(
                Path(self.config.tls_key).read_bytes(), Path(self.config.tls_cert).read_bytes())])
            self.port = server.add_secure_port(address, credentials)
        else:
            self.port = server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self._server = server
        if self.config.http_port is not None:
            self.metrics.serve(self.config.host, self.config.http_port)

    async def wait(self) -> None:
        assert self._server is not None
        await self._server.wait_for_termination()

    async def stop(self, grace: float = 5.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
        if self.metrics is not None:
            self.metrics.stop()
        if self._listener is not None:
            self._listener.stop()
        self._pool.shutdown(wait=True)
        if self.store is not None:
            self.store.engine.dispose()


class EmbeddedServer:
    """A server on its own thread and event loop, for tests, examples and notebooks.

        with EmbeddedServer(database_url="sqlite:///tmp/a.db", port=0) as server:
            client = ArmadaClient(server.address)
    """

    def __init__(self, config: ServerConfig | None = None, **overrides: Any) -> None:
        from dataclasses import replace

        base = config or ServerConfig(port=0, http_port=0, executor="none")
        self.config = replace(base, **overrides).validate()
        self.server = ArmadaServer(self.config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="armada-server",
                                        daemon=True)

    @property
    def address(self) -> str:
        return self.server.address

    def start(self) -> EmbeddedServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(60)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(1.0), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
