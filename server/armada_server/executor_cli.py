"""The `armada-executor` command: an executor in its own process, against a remote server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

import grpc

from armada_server import __version__
from armada_server.config import ConfigError, parse_nodes
from armada_server.executors.agent import CHANNEL_OPTIONS, MAX_RESPONSE_BYTES, ExecutorAgent
from armada_server.executors.backend import Backend
from armada_server.executors.control import (
    ControlServer,
    join_address,
    local_address_towards,
    split_address,
)
from armada_server.executors.kinds import EXECUTOR_KINDS, ExecutorSetup


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="armada-executor",
        description="Run an executor that takes work from an "
        "armada-server over the executor protocol.",
    )
    p.add_argument("--version", action="version", version=f"armada-executor {__version__}")
    p.add_argument(
        "--server",
        action="append",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="server address; several (repeated or comma-separated) for failover "
        "between replicas (default localhost:50051)",
    )
    p.add_argument("--id", required=True, help="executor (cluster) id, unique per server")
    p.add_argument("--pool", default="default")
    p.add_argument("--kind", choices=tuple(EXECUTOR_KINDS), default="local")
    virtual = " and ".join(k.name for k in EXECUTOR_KINDS.values() if k.virtual_nodes)
    p.add_argument(
        "--nodes",
        action="append",
        metavar="COUNTxCPUxMEMORY[xGPUS]|{MAPPING}",
        help="virtual nodes (repeatable), e.g. 2x4x8Gi, or with labels and taints "
        "as the server config file's mapping: '{count: 2, cpu: \"4\", "
        "memory: 8Gi, labels: {rack: r1}, taints: [{key: gpu, "
        f"effect: NoSchedule}}]}}'; {virtual} only",
    )
    p.add_argument("--sandbox-dir", type=Path, help="local executor: where pods' files live")
    p.add_argument("--token", help="bearer token, when the server requires authentication")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between syncs")
    p.add_argument("--tls-ca", type=Path, help="CA certificate of a TLS server")
    p.add_argument(
        "--sync-timeout",
        type=float,
        default=60.0,
        help="seconds a sync may take before the next server address is tried",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="where to serve logs to the servers (default: this machine's address "
        "on the route to the first server, any free port)",
    )
    p.add_argument(
        "--advertise-address",
        metavar="HOST:PORT",
        help="the address servers dial for logs, when not the --listen one "
        "(a wildcard bind, NAT, a Kubernetes Service)",
    )
    for kind in EXECUTOR_KINDS.values():
        kind.add_options(p)
    return p


def build_backend(args: argparse.Namespace) -> Backend:
    """The backend of the chosen kind, from the command's options."""
    kind = EXECUTOR_KINDS[args.kind]
    if kind.virtual_nodes and not args.nodes:
        raise ConfigError(f"--nodes is required for a {kind.name} executor")
    return kind.build(
        ExecutorSetup(
            args.id,
            node_groups=[parse_nodes(n) for n in args.nodes] if kind.virtual_nodes else (),
            sandbox_dir=args.sandbox_dir or Path.cwd() / "armada-pods",
            options=args,
        )
    )


def server_addresses(values: list[str] | None) -> list[str]:
    """Every --server address, in order: repeatable, each possibly comma-separated."""
    found = [a.strip() for value in values or ["localhost:50051"] for a in value.split(",")]
    found = [a for a in found if a]
    if not found:
        raise ConfigError("--server: no address given")
    return found


async def _run(args: argparse.Namespace) -> None:
    servers = server_addresses(args.server)
    backend = build_backend(args)
    channels = [
        grpc.aio.secure_channel(
            a, grpc.ssl_channel_credentials(args.tls_ca.read_bytes()), options=CHANNEL_OPTIONS
        )
        if args.tls_ca
        else grpc.aio.insecure_channel(a, options=CHANNEL_OPTIONS)
        for a in servers
    ]
    metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
    listen = args.listen or join_address(local_address_towards(servers[0]), 0)
    try:
        split_address(listen)
        if args.advertise_address:
            split_address(args.advertise_address)
    except ValueError as e:
        raise ConfigError(f"--listen/--advertise-address: {e}") from None
    control = ControlServer(backend, listen=listen, advertise=args.advertise_address)
    try:
        await control.start()
    except (OSError, RuntimeError) as e:
        raise ConfigError(f"cannot serve logs on {listen}: {e}") from None
    agent = ExecutorAgent(
        channels,
        args.id,
        args.pool,
        backend,
        interval=args.interval,
        metadata=metadata,
        control=control,
        sync_timeout=args.sync_timeout,
        max_response_bytes=MAX_RESPONSE_BYTES,
    )
    await backend.open(agent.report)  # adopt its pods before the first sync
    print(
        f"armada-executor {args.id} ({args.kind}, {len(backend.nodes())} nodes) serving "
        f"logs on {control.address}, syncing with {', '.join(servers)}",
        flush=True,
    )
    task = asyncio.create_task(agent.run())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await control.stop()
    await backend.close()
    for channel in channels:
        await channel.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(_run(args))
    except ConfigError as e:
        print(f"armada-executor: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
