"""An executor's own small gRPC service, `executor.ExecutorControl`: the container logs of
the runs it ran, read by whichever server replica a client asked.

Every executor (in the server process or an `armada-executor` process) serves it on an address
of its own and reports that address, with a random token made at start, in each sync; the
server stores both and presents the token when it calls. Logs then work from every replica for
jobs of every executor, the same way, and no log passes through the database.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
import socket
from collections.abc import Sequence

import grpc

from armada_core.api import binoculars_pb2, executor_pb2, executor_pb2_grpc
from armada_server.executors.backend import Backend
from armada_server.executors.logs import LogLine, LogQuery, LogUnavailable, parse_time_ns

log = logging.getLogger("armada_server.executor")


async def read_log(backend: Backend, query: LogQuery) -> Sequence[LogLine]:
    """The backend's lines for the query; none from a backend that keeps no logs (the
    simulated executor writes none)."""
    if not backend.capabilities.container_logs:
        return []
    return await backend.container_log(query)


class ExecutorControlService(executor_pb2_grpc.ExecutorControlServicer):
    def __init__(self, backend: Backend, token: str) -> None:
        self.backend = backend
        self.token = token

    async def Logs(
        self,
        request: executor_pb2.ExecutorLogsRequest,
        context: grpc.aio.ServicerContext[
            executor_pb2.ExecutorLogsRequest, executor_pb2.ExecutorLogsResponse
        ],
    ) -> executor_pb2.ExecutorLogsResponse:
        presented = dict(context.invocation_metadata() or ()).get("authorization", "")
        if not isinstance(presented, str) or not hmac.compare_digest(
            presented.encode(), f"Bearer {self.token}".encode()
        ):
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "this executor's control token is required"
            )
        try:
            since = parse_time_ns(request.since_time) if request.since_time else None
        except ValueError:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"since_time: {request.since_time!r} is not an RFC 3339 time",
            )
        query = LogQuery(
            request.run_id,
            request.job_id,
            request.pod_name,
            request.namespace,
            request.container,
            since,
            request.tail_lines if request.HasField("tail_lines") else None,
        )
        try:
            lines = await read_log(self.backend, query)
        except LogUnavailable as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except Exception as e:
            log.exception("could not read the log of run %s", request.run_id)
            await context.abort(grpc.StatusCode.INTERNAL, f"could not read the log: {e}")
        return executor_pb2.ExecutorLogsResponse(
            log=[binoculars_pb2.LogLine(timestamp=line.timestamp, line=line.text) for line in lines]
        )


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def local_address_towards(server: str) -> str:
    """This machine's address on the route to `server` (HOST:PORT): where the server can most
    likely reach us back. No packet is sent (a UDP socket's connect only picks the route)."""
    try:
        host, port = split_address(server)
        found = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        # IPv4 first: "localhost" may resolve to ::1 on hosts without IPv6 loopback.
        found.sort(key=lambda a: a[0] != socket.AF_INET)
        family, _, _, _, target = found[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(target)
            return str(s.getsockname()[0])
    except (OSError, ValueError):
        return "127.0.0.1"


def _wildcard(host: str) -> bool:
    try:
        return host == "" or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


class ControlServer:
    """Serves ExecutorControl for one backend; `address` and `token` go into every sync.

    `listen` is where to bind (port 0: any free port); `advertise` is what the servers dial
    when that differs (a wildcard bind, NAT, a Kubernetes Service)."""

    def __init__(
        self, backend: Backend, *, listen: str = "127.0.0.1:0", advertise: str | None = None
    ) -> None:
        self.backend = backend
        self.listen = listen
        self.advertise = advertise
        self.token = secrets.token_urlsafe(32)
        self.address = ""
        self._server: grpc.aio.Server | None = None

    async def start(self) -> str:
        """Bind and serve; returns the advertised address."""
        host, _ = split_address(self.listen)
        server = grpc.aio.server(options=[("grpc.max_send_message_length", 64 * 1024 * 1024)])
        executor_pb2_grpc.add_ExecutorControlServicer_to_server(
            ExecutorControlService(self.backend, self.token), server
        )
        port = server.add_insecure_port(self.listen)
        if port == 0:
            raise OSError(f"cannot listen on {self.listen}")
        await server.start()
        self._server = server
        self.address = self.advertise or join_address(
            socket.gethostname() if _wildcard(host) else host, port
        )
        return self.address

    async def stop(self, grace: float | None = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
