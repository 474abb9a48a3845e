"""Assembling the server: storage, services, health and reflection on one gRPC port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from armada_core.api import (
    binoculars_pb2,
    binoculars_pb2_grpc,
    event_pb2,
    event_pb2_grpc,
    executor_pb2,
    executor_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    nodes_pb2,
    nodes_pb2_grpc,
    scheduler_reporting_pb2,
    scheduler_reporting_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
    tasks_pb2,
    tasks_pb2_grpc,
)
from armada_core.client.connection import MAX_MESSAGE_BYTES
from armada_server.auth import (
    AuthConfig,
    Authenticator,
    AuthInterceptor,
    Authorizer,
    StaticToken,
)
from armada_server.config import (
    ConfigError,
    NodeGroup,
    ServerConfig,
    load_file,
    reload_scheduling,
)
from armada_server.data_dir import ServerLocks, plan_locks, private_paths
from armada_server.decoding import DecodingInterceptor
from armada_server.eventhub import EventHub
from armada_server.executors.agent import CHANNEL_OPTIONS, MAX_RESPONSE_BYTES, ExecutorAgent
from armada_server.executors.backend import Backend
from armada_server.executors.control import ControlServer, join_address
from armada_server.executors.kinds import ExecutorSetup, server_kind
from armada_server.executors.local.runner import node_allocatable
from armada_server.metrics import Metrics
from armada_server.pruning import Pruner
from armada_server.scheduling.loop import SchedulingLoop
from armada_server.services.binoculars import BinocularsService, ExecutorChannels
from armada_server.services.common import Context
from armada_server.services.events import EventService
from armada_server.services.executor_api import ExecutorApiService
from armada_server.services.jobs import JobsService
from armada_server.services.nodes import NodesService
from armada_server.services.queues import QueueService
from armada_server.services.reporting import ReportingService
from armada_server.services.retry_policies import RetryPolicyService
from armada_server.services.submit import SubmitService
from armada_server.services.task_jobs import TaskJobsService
from armada_server.storage import Storage
from armada_server.storage.base import utcnow
from armada_server.storage.database import (
    default_data_dir,
    default_database_url,
    open_database,
    sqlite_file,
)
from armada_server.storage.notify import Listener
from armada_server.storage.wal_checkpoints import WalCheckpointer
from armada_server.web import WebServer

log = logging.getLogger("armada_server")

SERVICES = {
    "api.Submit": submit_pb2,
    "api.QueueService": submit_pb2,
    "api.RetryPolicyService": submit_pb2,
    "api.Event": event_pb2,
    "api.Jobs": job_pb2,
    "api.Nodes": nodes_pb2,
    "api.TaskJobs": tasks_pb2,
    "schedulerobjects.SchedulerReporting": scheduler_reporting_pb2,
    "executor.ExecutorApi": executor_pb2,
    "binoculars.Binoculars": binoculars_pb2,
}

INTERNAL_EXECUTOR_USER = "armada-executor"

# Hosts that mean "every interface": the web UI is then reached on localhost.
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


def default_node_group() -> NodeGroup:
    """One virtual node the size of this machine."""
    allocatable = node_allocatable()
    return NodeGroup(1, allocatable["cpu"], allocatable["memory"])


GRPC_OPTIONS = [
    # Ping idle connections so that watchers behind proxies stay connected.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


class ArmadaServer:
    """One server process: call `start()` inside a running event loop, `stop()` to finish."""

    def __init__(
        self,
        config: ServerConfig,
        config_file: Path | None = None,
        *,
        clock: Callable[[], datetime] = utcnow,
        cycles: bool = True,
    ) -> None:
        self.config = config
        # What time it is, for storage and the scheduler (the what-if simulator's comparison
        # hands in a virtual clock); with `cycles` False no cycle runs by itself: the caller
        # runs `scheduler.cycle()` at the instants it chooses.
        self.clock = clock
        self.cycles = cycles
        # The file `config` was read from: its `scheduling:` block is reloaded when it
        # changes (checked every config_reload_interval seconds) or on `reload_config()`.
        self.config_file = config_file
        self._config_text: bytes | None = None
        self.config_error: str | None = None  # why the file's last version was refused
        self._file_values: dict[str, Any] = {}  # the file as started with
        if config_file is not None:
            with contextlib.suppress(ConfigError):
                self._file_values = load_file(config_file)
        self.data_dir = Path(config.data_dir) if config.data_dir else default_data_dir()
        self.database_url = config.database_url or default_database_url(self.data_dir)
        kind = server_kind(config.executor)
        # Where the in-process executor keeps its pods' files; None when it keeps none.
        self.sandbox_dir = (
            (Path(config.sandbox_dir) if config.sandbox_dir else self.data_dir / "pods")
            if kind is not None and kind.sandbox
            else None
        )
        # What this server alone may use, locked from start() to stop().
        self.locks = ServerLocks(
            plan_locks(self.data_dir, private_paths(self.database_url, self.sandbox_dir))
        )
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="armada-db")
        self.storage: Storage | None = None
        self._checkpointer: WalCheckpointer | None = None
        self.metrics: Metrics | None = None
        self._listener: Listener | None = None
        self.hub: EventHub | None = None
        self.scheduler: SchedulingLoop | None = None
        self.pruner: Pruner | None = None  # ended jobs pruned after the retention
        self._tasks: list[asyncio.Task[None]] = []
        self.executors: dict[str, Backend] = {}
        self.agent: ExecutorAgent | None = None
        self._channel: grpc.aio.Channel | None = None
        self._executor_token: str | None = None
        # The in-process executor serves its logs as a remote one does (ExecutorControl).
        self.control: ControlServer | None = None
        # Channels to executors' ExecutorControl, for Binoculars.Logs.
        self.executor_channels = ExecutorChannels()
        self.context: Context | None = None
        # The web UI, REST gateway and /metrics on http_port (None when http_port is null).
        self.http: WebServer | None = None
        self.http_port: int | None = None

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def web_url(self) -> str | None:
        """The web UI's address (also the REST gateway's and /metrics'); None without HTTP."""
        if self.http_port is None:
            return None
        host = self.config.host
        host = "localhost" if host in WILDCARD_HOSTS else f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.http_port}/"

    @property
    def uses_data_dir(self) -> bool:
        """Whether this server keeps anything in its data directory (and so locks it)."""
        return any(lock.data_dir is not None for lock in self.locks.locks)

    def _auth(self) -> AuthConfig:
        """The configured auth, plus an internal admin token for the in-process executor."""
        auth = self.config.auth
        if auth.enabled and server_kind(self.config.executor) is not None:
            self._executor_token = secrets.token_urlsafe(32)
            auth = replace(
                auth,
                tokens=(*auth.tokens, StaticToken(self._executor_token, INTERNAL_EXECUTOR_USER)),
                admins=(*auth.admins, INTERNAL_EXECUTOR_USER),
            )
        return auth

    def reload_config(self) -> bool:
        """Apply the config file's `scheduling:` block to the next cycle.

        An invalid file is logged with the error naming the key and the running
        configuration stays. Other settings take effect only after a restart."""
        if self.config_file is None:
            log.warning("no config file was given (--config): nothing to reload")
            return False
        try:
            self._config_text = self.config_file.read_bytes()
            settings, changed = reload_scheduling(self.config_file, self.config, self._file_values)
        except (OSError, ConfigError) as e:
            self.config_error = str(e)
            log.error("configuration not reloaded, keeping the running one: %s", e)
            return False
        self.config_error = None
        if changed:
            log.warning(
                "%s: %s changed; only the scheduling block is reloaded, the rest "
                "takes effect after a restart",
                self.config_file,
                ", ".join(changed),
            )
        if settings == self.config.scheduling:
            return True
        self.config = replace(self.config, scheduling=settings)
        if self.scheduler is not None:
            self.scheduler.config = replace(self.scheduler.config, scheduling=settings)
            self.scheduler.poke()
        log.info("scheduling configuration reloaded from %s: %s", self.config_file, settings)
        return True

    async def _watch_config(self, interval: float) -> None:
        """Reload the file whenever its content changes."""
        assert self.config_file is not None
        with contextlib.suppress(OSError):
            self._config_text = self.config_file.read_bytes()
        while True:
            await asyncio.sleep(interval)
            try:
                text = self.config_file.read_bytes()
            except OSError as e:
                text = None
                if self.config_error is None:
                    self.config_error = str(e)
                    log.error(
                        "cannot read %s, keeping the running configuration: %s", self.config_file, e
                    )
            if text is not None and text != self._config_text:
                self.reload_config()

    async def _start_executor(self, scheduler: SchedulingLoop) -> None:
        kind = server_kind(self.config.executor)
        if kind is None:
            return
        backend = kind.build(
            ExecutorSetup(
                self.config.executor_id,
                node_groups=self.config.nodes or (default_node_group(),),
                sandbox_dir=self.sandbox_dir or self.data_dir / "pods",
            )
        )
        self._channel = (
            grpc.aio.insecure_channel(f"127.0.0.1:{self.port}", options=CHANNEL_OPTIONS)
            if not (self.config.tls_cert)
            else grpc.aio.secure_channel(
                f"localhost:{self.port}",
                grpc.ssl_channel_credentials(Path(self.config.tls_cert).read_bytes()),
                options=CHANNEL_OPTIONS,
            )
        )
        metadata = (
            [("authorization", f"Bearer {self._executor_token}")] if self._executor_token else []
        )
        self.control = ControlServer(backend, listen=join_address(self.config.host, 0))
        await self.control.start()
        self.agent = ExecutorAgent(
            self._channel,
            self.config.executor_id,
            self.config.pool,
            backend,
            interval=self.config.executor_sync_interval,
            metadata=metadata,
            control=self.control,
            max_response_bytes=MAX_RESPONSE_BYTES,
        )
        self.executors[self.config.executor_id] = backend
        loop = asyncio.get_running_loop()
        agent = self.agent

        def wake_agent() -> None:  # the scheduling loop leased it work: sync now
            loop.call_soon_threadsafe(agent.wake)

        scheduler.on_leased = wake_agent
        await backend.open(self.agent.report)  # adopt its pods before the first sync
        self._tasks.append(asyncio.create_task(self.agent.run()))

    async def start(self) -> None:
        """Lock what this server alone may use (InUse when another server holds it), then
        open the database, the gRPC port, the executor and the HTTP port."""
        self.locks.acquire()
        try:
            await self._start()
        except BaseException:
            if self._checkpointer is not None:
                self._checkpointer.stop()
            self.locks.release()
            raise

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        engine = await loop.run_in_executor(self._pool, open_database, self.database_url)
        wal = sqlite_file(self.database_url)
        if wal is not None:
            self._checkpointer = WalCheckpointer(wal)
            self._checkpointer.start()
        hub = EventHub(loop)
        storage = Storage(
            engine, clock=self.clock, on_commit=hub.notify, retry_settings=self.config.retry
        )
        self.storage = storage
        hub.open(storage.events)
        self.hub = hub
        self.metrics = Metrics(storage.job_reads, storage.isolated_failures, nodes=storage.nodes)
        if engine.dialect.name == "postgresql":
            self._listener = Listener(engine, hub.notify)
            await loop.run_in_executor(self._pool, self._listener.start)
        self.scheduler = SchedulingLoop.over(
            storage,
            self.config,
            self.metrics,
            clock=self.clock,
            reports=bool(self.config.report_cycles),
        )
        auth = self._auth()
        ctx = Context(
            config=self.config,
            hub=hub,
            pool=self._pool,
            authorizer=Authorizer(auth),
            metrics=self.metrics,
            queues=storage.queues,
            retry_policies=storage.retry_policies,
            submissions=storage.submissions,
            events=storage.events,
            job_reads=storage.job_reads,
            places=storage.places,
            nodes=storage.nodes,
            executors=storage.executors,
            scheduling_reads=storage.scheduling_reads,
            transactions=storage.transactions,
            wake_scheduler=self.scheduler.poke,
            cycle_reports=storage.cycle_reports,
        )
        self.context = ctx
        server = await self._grpc_server(ctx, auth, self.scheduler)
        self._add_port(server)
        await server.start()
        self._server = server
        if self.cycles:
            self._tasks.append(asyncio.create_task(self.scheduler.run(self._pool)))
            self.pruner = Pruner(storage.retention, lambda: self.config, self.clock)
            self._tasks.append(asyncio.create_task(self.pruner.run(self._pool)))
        if self.config_file is not None and self.config.config_reload_interval:
            self._tasks.append(
                asyncio.create_task(self._watch_config(self.config.config_reload_interval))
            )
        await self._start_executor(self.scheduler)
        if self.config.http_port is not None:
            self.http = WebServer(ctx, self.executor_channels, auth)
            self.http_port = await self.http.start(self.config.host, self.config.http_port)
            self.metrics.port = self.http_port

    async def _grpc_server(
        self, ctx: Context, auth: AuthConfig, scheduler: SchedulingLoop
    ) -> grpc.aio.Server:
        """A gRPC server with every service, health and reflection; not listening yet."""
        interceptors: list[grpc.aio.ServerInterceptor] = [DecodingInterceptor()]
        if auth.enabled:
            interceptors.append(AuthInterceptor(Authenticator(auth)))
        server = grpc.aio.server(options=GRPC_OPTIONS, interceptors=interceptors)
        queues = QueueService(ctx)
        submit_pb2_grpc.add_SubmitServicer_to_server(SubmitService(ctx, queues), server)
        submit_pb2_grpc.add_QueueServiceServicer_to_server(queues, server)
        submit_pb2_grpc.add_RetryPolicyServiceServicer_to_server(RetryPolicyService(ctx), server)
        event_pb2_grpc.add_EventServicer_to_server(EventService(ctx), server)
        job_pb2_grpc.add_JobsServicer_to_server(JobsService(ctx), server)
        nodes_pb2_grpc.add_NodesServicer_to_server(NodesService(ctx), server)
        tasks_pb2_grpc.add_TaskJobsServicer_to_server(TaskJobsService(ctx), server)
        scheduler_reporting_pb2_grpc.add_SchedulerReportingServicer_to_server(
            ReportingService(ctx), server
        )
        binoculars_pb2_grpc.add_BinocularsServicer_to_server(
            BinocularsService(ctx, self.executor_channels), server
        )
        executor_pb2_grpc.add_ExecutorApiServicer_to_server(
            ExecutorApiService(ctx, on_sync=scheduler.poke), server
        )
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        for name in [*SERVICES, ""]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        reflection.enable_server_reflection(
            [*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        return server

    def _add_port(self, server: grpc.aio.Server) -> None:
        """Listen on the configured address (TLS with a certificate and key): sets `port`."""
        address = f"{self.config.host}:{self.config.port}"
        if self.config.tls_cert and self.config.tls_key:
            credentials = grpc.ssl_server_credentials(
                [(Path(self.config.tls_key).read_bytes(), Path(self.config.tls_cert).read_bytes())]
            )
            self.port = server.add_secure_port(address, credentials)
        else:
            self.port = server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")

    async def wait(self) -> None:
        assert self._server is not None
        await self._server.wait_for_termination()

    async def stop(self, grace: float = 5.0) -> None:
        if self.http is not None:
            await self.http.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.control is not None:
            await self.control.stop()
        for backend in self.executors.values():
            await backend.close()
        await self.executor_channels.close()
        if self._channel is not None:
            await self._channel.close()
        if self._server is not None:
            await self._server.stop(grace)
        if self.scheduler is not None:
            self.scheduler.close()
        if self._listener is not None:
            self._listener.stop()
        if self.hub is not None:
            self.hub.close()
        self._pool.shutdown(wait=True)
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if self.storage is not None:
            self.storage.engine.dispose()
        self.locks.release()


class EmbeddedServer:
    """A server on its own thread and event loop, for tests, examples and notebooks.

    with EmbeddedServer(database_url="sqlite:///tmp/a.db", port=0) as server:
        client = ArmadaClient(server.address)
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        config_file: Path | None = None,
        clock: Callable[[], datetime] = utcnow,
        cycles: bool = True,
        **overrides: Any,
    ) -> None:
        base = config or ServerConfig(port=0, http_port=0, executor="none")
        self.config = replace(base, **overrides).validate()
        self.server = ArmadaServer(self.config, config_file, clock=clock, cycles=cycles)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="armada-server", daemon=True
        )

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
