"""`armada reap --airflow URL`: the reconciler of ended tasks as a small process beside an
Airflow deployment (armada_core.client.lifecycle.reaping).

Every `--interval` seconds it lists the live jobs of Airflow tasks and cancels those whose task
instance Airflow ended. Each cancellation, and each round Airflow could not be asked, is a line
on standard error; `--status-file` keeps the reaper's counters there as JSON (rounds,
cancelled, unreachable), rewritten after every round, for a monitor to read.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, TextIO

from armada_core.client import ArmadaClient, ArmadaError
from armada_core.client.lifecycle.airflow_states import AirflowTaskStates
from armada_core.client.lifecycle.reaping import DEFAULT_INTERVAL, Reaper

from .output import UsageError


def add_reap_command(commands: Any) -> None:
    env = os.environ.get
    sp = commands.add_parser(
        "reap", help="cancel the jobs of orchestrator tasks that ended (Airflow)"
    )
    sp.add_argument(
        "--airflow",
        metavar="URL",
        default=env("AIRFLOW__API__BASE_URL", ""),
        help="the Airflow API server's URL (default: Airflow's own [api] base_url setting, "
        "env AIRFLOW__API__BASE_URL)",
    )
    sp.add_argument(
        "--airflow-username",
        default=env("AIRFLOW_API_USERNAME", ""),
        help="a user of the Airflow API; its token comes from /auth/token "
        "(env AIRFLOW_API_USERNAME, password in AIRFLOW_API_PASSWORD)",
    )
    sp.add_argument("--airflow-password", default=env("AIRFLOW_API_PASSWORD", ""))
    sp.add_argument(
        "--airflow-token",
        default=env("AIRFLOW_API_TOKEN", ""),
        help="a JWT for the Airflow API instead of a user (env AIRFLOW_API_TOKEN)",
    )
    sp.add_argument("--queue", default="", help="only this queue (default: every queue)")
    sp.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        help=f"seconds between rounds (default {DEFAULT_INTERVAL:g})",
    )
    sp.add_argument(
        "--rounds", type=int, default=0, help="stop after this many rounds (default: never)"
    )
    sp.add_argument("--status-file", type=Path, help="write the counters here as JSON")
    sp.set_defaults(handler=reap)


def reap(client: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    if not args.airflow:
        raise UsageError("reap: --airflow URL is required (or AIRFLOW__API__BASE_URL)")
    if args.rounds < 0:
        raise UsageError(f"reap: --rounds must not be negative, got {args.rounds}")
    if args.interval <= 0:
        raise UsageError(f"reap: --interval must be positive, got {args.interval:g}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    adapter = AirflowTaskStates(
        args.airflow,
        token=args.airflow_token or None,
        username=args.airflow_username or None,
        password=args.airflow_password or None,
    )
    reaper = Reaper(client, adapter, queue=args.queue)
    logging.getLogger("armada_core.reaper").info(
        "Reaping the jobs of ended Airflow tasks (%s) every %gs", args.airflow, args.interval
    )
    done = 0
    while True:
        try:
            reaper.reap_once()
        except ArmadaError as e:  # the server restarting: the next round tries again
            logging.getLogger("armada_core.reaper").warning("Armada server: %s", e)
        if args.status_file is not None:
            _write_status(args.status_file, reaper.counters.as_dict())
        done += 1
        if done == args.rounds:
            return 0
        time.sleep(args.interval)


def _write_status(path: Path, counters: dict[str, Any]) -> None:
    """Replaced whole, so a reader never sees half of it."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(counters) + "\n")
    partial.replace(path)
