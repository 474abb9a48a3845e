"""`armada-server prune`: delete the jobs that ended before a time now, as the server does.

For an operator who wants the space back before the server's own rounds get to it (or runs
servers with `retention: forever` and prunes from a cron job). It opens the database as the
server does (its schema brought up to date), prunes batch after batch, and prints what it
deleted as JSON. Running beside a live server is safe: each batch is its own transaction, and
on PostgreSQL a batch another pruner is deleting is skipped and tried again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

from armada_server.config import ConfigError, ServerConfig, build
from armada_server.retention_period import retention_seconds
from armada_server.storage import open_storage
from armada_server.storage.base import utcnow
from armada_server.storage.database import default_database_url
from armada_server.storage.retention import Pruned


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="armada-server prune",
        description="Delete jobs that ended before a time, with their runs and events.",
    )
    p.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        help="jobs that ended this long ago go: seconds, or a number with s, m, h, d or w "
        "(e.g. 2d, 12h)",
    )
    p.add_argument("--config", type=Path, help="the server's YAML file (for its database)")
    p.add_argument("--database-url", help="the server's database (default: as the server's)")
    p.add_argument("--data-dir", metavar="DIR", help="the server's data directory")
    p.add_argument("--batch", type=int, help="jobs per transaction (default: prune_batch)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        seconds = retention_seconds(args.older_than, "--older-than")
        config = build(
            args.config,
            database_url=args.database_url,
            data_dir=args.data_dir,
            prune_batch=args.batch,
        )
    except (ConfigError, ValueError) as e:
        print(f"armada-server prune: {e}", file=sys.stderr)
        return 2
    if seconds is None:
        print("armada-server prune: --older-than: must be more than 0", file=sys.stderr)
        return 2
    print(json.dumps(prune(config, seconds), indent=2))
    return 0


def prune(config: ServerConfig, seconds: float) -> dict[str, object]:
    """Prune the server's database of jobs that ended `seconds` ago; what was deleted."""
    url = config.database_url or default_database_url(
        Path(config.data_dir) if config.data_dir else None
    )
    storage = open_storage(url)
    cutoff = utcnow() - timedelta(seconds=seconds)
    total = Pruned()
    started = time.perf_counter()
    try:
        while True:
            done = storage.retention.prune_batch(cutoff, config.prune_batch)
            if done is None:  # another replica's batch: let it finish
                time.sleep(config.prune_pause)
                continue
            total.add(done)
            if done.jobs < config.prune_batch:
                break
    finally:
        storage.engine.dispose()
    return {
        "ended_before": cutoff.isoformat(),
        "pruned": asdict(total),
        "seconds": round(time.perf_counter() - started, 3),
    }
