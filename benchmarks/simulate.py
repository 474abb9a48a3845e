"""What-if simulator benchmark: a day of a 1,000-node cluster with 100,000 jobs.

Run: ``python benchmarks/simulate.py --json OUT.json`` (``--quick``: 100 nodes, 10,000 jobs).
``--stop-after HOURS`` simulates only the first hours of the day's workload (the figure then
says so, and gives the rate at which simulated time passed).

The workload is the `steady` generator (seed 1): Poisson arrivals from 10 queues of mixed
priority factors over 24 hours, shapes of 1 to 16 CPU, 1% gangs of 4, runtimes drawn so that
the cluster is about 85% busy; nodes of 32 CPU and 256 GiB. It runs through the server's own
storage (SQLite in a temporary directory), scheduling loop and simulated executor on the
virtual clock, exactly as `armada-server simulate` does, with the server's default options
but for the scheduling period (``--period``, default 10 s).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import log, machine

from armada_server.config import ServerConfig
from armada_server.simulation.generators import generate
from armada_server.simulation.report import figures
from armada_server.simulation.run import simulate


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", type=Path)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--period", type=float, default=10.0)
    p.add_argument("--stop-after", type=float, metavar="HOURS")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    nodes, jobs = (100, 10_000) if args.quick else (args.nodes, args.jobs)
    workload = generate(f"steady,nodes={nodes},jobs={jobs},hours=24", args.seed)
    if args.stop_after is not None:
        workload = replace(workload, duration=args.stop_after * 3600)
    log(f"{len(workload.arrivals)} arrivals on {nodes} nodes; simulating")
    wall, cpu = time.perf_counter(), time.process_time()
    recording = simulate(
        workload,
        ServerConfig(scheduling_period=args.period),
        progress=lambda at: log(
            f"{at.simulated / 3600:.0f} h: {at.submitted} submitted, {at.running} running, "
            f"{at.waiting} waiting"
        ),
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    fig = figures(recording)
    simulated = recording.end + args.period
    result = {
        "benchmark": "simulate_day",
        "machine": machine(),
        "workload": workload.source,
        "nodes": nodes,
        "jobs_in_workload": len(workload.arrivals),
        "jobs_submitted": len(recording.jobs),
        "scheduling_period": args.period,
        "simulated_seconds": simulated,
        "steps": len(recording.times),
        "leases": fig["decisions"]["leased"],
        "preemptions": fig["decisions"]["preempted"],
        "mean_cpu_utilisation": fig["utilisation"]["cpu"]["mean"],
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "simulated_seconds_per_wall_second": round(simulated / wall, 1),
        "wall_seconds_for_a_day_at_this_rate": round(86400 / (simulated / wall), 1),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
