"""`armada-server simulate`: a workload under one configuration, or two side by side."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from armada_server.config import ConfigError, ServerConfig, build
from armada_server.simulation.driver import Progress
from armada_server.simulation.generators import GENERATORS, generate
from armada_server.simulation.history import HistoryError, fetch_history
from armada_server.simulation.page import page
from armada_server.simulation.report import figures
from armada_server.simulation.run import simulate
from armada_server.simulation.workload import Workload, WorkloadError, load_workload, seconds

GENERATED = "gen:"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="armada-server simulate",
        description="Run a workload through the server's own scheduling loop and simulated "
        "executor on a virtual clock, under one configuration or two (--compare), and write "
        "the figures as JSON and as a self-contained HTML page.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--workload",
        metavar="FILE|gen:NAME[,KEY=VALUE...]",
        help="a workload YAML file, or a generator: "
        + ", ".join(f"gen:{name}" for name in GENERATORS),
    )
    source.add_argument(
        "--from",
        dest="history",
        metavar="URL",
        help="a server's web address: replay its jobs as they were submitted (see --since)",
    )
    p.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    p.add_argument("--since", default="7d", help="with --from: how far back (default 7d)")
    p.add_argument("--token", help="with --from: a bearer token (or user:password for basic auth)")
    p.add_argument("--config", type=Path, help="the server's YAML configuration to simulate")
    p.add_argument("--compare", type=Path, help="a second configuration, shown beside the first")
    p.add_argument("--json", type=Path, help="write the figures here as JSON")
    p.add_argument("--html", type=Path, help="write the figures here as an HTML page")
    p.add_argument(
        "--every-cycle",
        action="store_true",
        help="run every scheduling period's cycle, also when nothing is queued (slower, "
        "same decisions)",
    )
    return p


def load_source(args: argparse.Namespace) -> Workload:
    if args.history:
        return fetch_history(args.history, seconds(args.since, "--since"), token=args.token)
    spec: str = args.workload
    if spec.startswith(GENERATED):
        return generate(spec[len(GENERATED) :], args.seed)
    return load_workload(Path(spec))


def run_one(workload: Workload, config: ServerConfig, label: str, every: bool) -> dict[str, Any]:
    started = time.monotonic()

    def report(at: Progress) -> None:
        of = f" of {at.duration / 3600:.0f}" if at.duration is not None else ""
        print(
            f"{label}: {at.simulated / 3600:.0f}{of} simulated hours, "
            f"{at.submitted}/{at.arrivals} jobs submitted, {at.running} running, "
            f"{at.waiting} waiting ({time.monotonic() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    recording = simulate(workload, config, every_cycle=every, progress=report)
    took = time.monotonic() - started
    print(
        f"{label}: {recording.end / 3600:.1f} simulated hours, "
        f"{len(recording.jobs)} jobs, {len(recording.times)} steps in {took:.1f} s",
        file=sys.stderr,
    )
    return {"label": label, "figures": figures(recording)}


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def run_all(
    workload: Workload, configs: list[tuple[ServerConfig, str]], every: bool
) -> list[dict[str, Any]]:
    """Each configuration's run, in order. A run is one interpreter's work from start to end,
    so with two configurations and the cores for them each runs in a process of its own and
    the comparison takes the time of its longer run, not of both."""
    if len(configs) < 2 or cores() < 2:
        return [run_one(workload, config, label, every) for config, label in configs]
    # Spawned, not forked: the caller may have threads (a test runner, a web server).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(configs), mp_context=context) as pool:
        runs = [pool.submit(run_one, workload, config, label, every) for config, label in configs]
        return [run.result() for run in runs]


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if not (args.json or args.html):
        print("armada-server simulate: give --json FILE, --html FILE or both", file=sys.stderr)
        return 2
    try:
        workload = load_source(args)
        paths = [args.config] + ([args.compare] if args.compare is not None else [])
        configs = [(build(path), path.name if path else "defaults") for path in paths]
        runs = run_all(workload, configs, args.every_cycle)
    except (WorkloadError, ConfigError, HistoryError) as e:
        print(f"armada-server simulate: {e}", file=sys.stderr)
        return 2
    result = {"workload": workload.source, "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.html:
        title = "What-if: " + " vs ".join(r["label"] for r in runs)
        html = page(title, workload.source, [(r["label"], r["figures"]) for r in runs])
        args.html.write_text(html)
    return 0
