"""The `armada-server` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

from armada_server import __version__
from armada_server.app import ArmadaServer
from armada_server.config import (
    EXECUTORS,
    ConfigError,
    ServerConfig,
    build,
    parse_nodes,
    parse_priority_class,
)
from armada_server.executors.kinds import EXECUTOR_KINDS, NO_EXECUTOR, server_kinds


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="armada-server",
        description="Standalone server speaking Armada's public gRPC API. With no arguments: "
        "gRPC on localhost:50051, SQLite in the user's data directory. "
        "'armada-server simulate --help': the what-if simulator; "
        "'armada-server prune --help': delete ended jobs now.",
    )
    p.add_argument("--version", action="version", version=f"armada-server {__version__}")
    p.add_argument("--config", type=Path, help="YAML file with any of the settings below")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="gRPC port (default 50051; 0 picks a free one)")
    p.add_argument(
        "--http-port",
        type=int,
        help="HTTP port of the web UI, the REST API (/api/v1) and Prometheus metrics "
        "(/metrics) (default 8080; 0 picks a free one)",
    )
    p.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql+psycopg://... (default: SQLite in the data directory)",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the default database and the local executor's pods are kept between runs, "
        "locked by one server at a time (default $XDG_DATA_HOME/armada-server, "
        "else ~/.local/share/armada-server)",
    )
    p.add_argument("--executor", choices=EXECUTORS, help="where jobs run (default local)")
    p.add_argument(
        "--nodes",
        action="append",
        metavar="COUNTxCPUxMEMORY[xGPUS]|{MAPPING}",
        help="virtual nodes for the local/simulated executor (repeatable), e.g. "
        "2x4x8Gi, or with labels and taints as the config file's mapping: "
        '\'{count: 2, cpu: "4", memory: 8Gi, labels: {rack: r1}, '
        "taints: [{key: gpu, effect: NoSchedule}]}'",
    )
    p.add_argument(
        "--priority-class",
        action="append",
        metavar="NAME=PRIORITY[:preemptible]",
        help="replaces the default priority classes (repeatable); the first is the default class",
    )
    p.add_argument("--scheduling-period", type=float, metavar="SECONDS")
    p.add_argument(
        "--sandbox-dir",
        help="local executor: where pods' files and logs live (default: pods/ in the data "
        "directory)",
    )
    p.add_argument(
        "--ready-file",
        type=Path,
        metavar="PATH",
        help="once serving, write the bound addresses here as JSON (grpc, http, database, "
        "data_dir, sandbox_dir, pid); removed at a graceful stop",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    classes = (
        tuple(parse_priority_class(c) for c in args.priority_class) if args.priority_class else None
    )
    return build(
        args.config,
        host=args.host,
        port=args.port,
        http_port=args.http_port,
        database_url=args.database_url,
        data_dir=args.data_dir,
        executor=args.executor,
        nodes=tuple(parse_nodes(n) for n in args.nodes) if args.nodes else None,
        priority_classes=classes,
        default_priority_class=classes[0].name if classes else None,
        scheduling_period=args.scheduling_period,
        sandbox_dir=args.sandbox_dir,
    )


def started(server: ArmadaServer) -> str:
    """What the server says once it accepts calls: where to reach it, where its state is."""
    lines = [
        f"armada-server {__version__} listening on {server.address} "
        f"(database {server.database_url})",
        f"  web UI, REST API and metrics: {server.web_url or 'off (http_port is null)'}",
    ]
    if server.sandbox_dir is not None:
        lines.append(f"  pods of the local executor: {server.sandbox_dir}")
    if server.uses_data_dir:
        lines.append(
            f"  data directory: {server.data_dir} (kept between runs, used by one server at "
            "a time; choose another with --data-dir DIR)"
        )
    return "\n".join(lines)


def ready(server: ArmadaServer) -> dict[str, object]:
    """The ready file's content: the bound addresses, for scripts that started the server."""
    return {
        "pid": os.getpid(),
        "grpc": server.address,
        "http": server.web_url,
        "database": server.database_url,
        "data_dir": str(server.data_dir) if server.uses_data_dir else None,
        "sandbox_dir": str(server.sandbox_dir) if server.sandbox_dir is not None else None,
    }


def write_ready_file(path: Path, server: ArmadaServer) -> None:
    """Whole or not at all: readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(ready(server), indent=2) + "\n")
    partial.replace(path)


async def _serve(
    config: ServerConfig, config_file: Path | None = None, ready_file: Path | None = None
) -> None:
    server = ArmadaServer(config, config_file)
    await server.start()
    print(started(server), flush=True)
    if ready_file is not None:
        write_ready_file(ready_file, server)
    if config.executor == NO_EXECUTOR:
        print(
            "note: no executor: jobs are accepted, stored and streamed, and run only when "
            "an armada-executor connects",
            file=sys.stderr,
            flush=True,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # SIGHUP reloads the config file's scheduling block (and never stops the server).
    loop.add_signal_handler(signal.SIGHUP, server.reload_config)
    await stop.wait()
    print("armada-server shutting down", file=sys.stderr, flush=True)
    if ready_file is not None:
        ready_file.unlink(missing_ok=True)
    await server.stop(grace=5.0)


#: How long a thread keeps the interpreter while another waits for it (Python's default: 5 ms).
#: A request's thread gives the interpreter up around each database call and must then wait
#: for it again behind whichever thread is busy in Python, such as one building a 1,000-job
#: request: at 5 ms a wait, a one-job submission's few statements took 30 ms under load.
#: benchmarks/README.md has the figures.
SWITCH_INTERVAL = 0.0005


def refuse_remote_only_executor(name: str) -> None:
    """A ConfigError for a kind the server cannot run itself (it runs as armada-executor)."""
    kind = EXECUTOR_KINDS.get(name)
    if kind is not None and not kind.in_server:
        usable = ", ".join(k.name for k in server_kinds())
        raise ConfigError(
            f"executor: the {kind.name} executor is not available in this "
            f"version; use {usable} or {NO_EXECUTOR}"
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simulate"]:  # the what-if simulator: armada-server simulate --help
        from armada_server.simulation.command import main as simulate

        return simulate(argv[1:])
    if argv[:1] == ["prune"]:  # ended jobs deleted now: armada-server prune --help
        from armada_server.prune_command import main as prune

        return prune(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        config = config_from_args(args)
        refuse_remote_only_executor(config.executor)
    except ConfigError as e:
        print(f"armada-server: {e}", file=sys.stderr)
        return 2
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        asyncio.run(_serve(config, args.config, args.ready_file))
    except OSError as e:
        print(f"armada-server: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
