"""What keeping the scheduling reports costs a cycle: the same cycles with reports on
(`report_cycles: 100`) and off (`0`), in turns, in one process.

Run: ``python benchmarks/reports.py --json OUT.json`` (``--quick`` for a short version).

Each round stores the same queued jobs (two queues) in a fresh SQLite database with simulated
nodes that hold 80% of them, then times, through the server's own `SchedulingLoop.cycle()`:
the first cycle (it leases 80% and gives the rest their first reason) and the next cycle
(nothing changes: the steady state, where the reports add one cycle row). Rounds alternate off
and on so that other work on the machine weighs on both alike; the JSON has every round's
seconds, wall and CPU, and the medians. With reports on, `*_reports_cpu` is the CPU of the
reports' own work within the cycle (its number, its record, the replaced reasons kept).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from armada_core.api import executor_pb2, submit_pb2  # noqa: E402
from armada_core.client import job_item  # noqa: E402
from armada_core.jobs import annotations as ann  # noqa: E402
from benchmarks.common import log, machine  # noqa: E402


def one_round(
    workdir: Path, jobs: int, keep: int, node_count: int | None = None
) -> dict[str, float]:
    """Seconds of the first and the next cycle with `report_cycles` = `keep`, on the clock
    and of this process's CPU (`*_cpu`: what other work on the machine barely moves)."""
    from armada_server.config import NodeGroup, ServerConfig
    from armada_server.executors.nodes import virtual_nodes
    from armada_server.scheduling.loop import SchedulingLoop
    from armada_server.storage import open_storage

    url = f"sqlite:///{workdir / f'reports-{keep}-{time.monotonic_ns()}.db'}"
    config = ServerConfig(port=0, http_port=None, executor="none", database_url=url)
    config = replace(config, report_cycles=keep)
    storage = open_storage(url, retry_settings=config.retry)
    pod = {"containers": [{"name": "c", "image": "x", "command": ["true"]}]}
    pod["containers"][0]["resources"] = {  # type: ignore[index]
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    item = job_item(
        pod,
        priority_class=config.default_priority_class,
        annotations={ann.PREFIX + "simulatedDuration": "36000"},
    )
    for queue in ("a", "b"):
        storage.queues.create_queue(submit_pb2.Queue(name=queue, priority_factor=1))
        for i in range(0, jobs // 2, 5_000):
            storage.submissions.submit(
                queue, f"s{i}", [item] * min(5_000, jobs // 2 - i), owner="b"
            )
    count = node_count if node_count is not None else jobs * 8 // 10 // 8
    nodes = virtual_nodes([NodeGroup(count, "8", "64Gi")], "sim")
    storage.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="sim", pool="default", nodes=nodes)
    )
    loop = SchedulingLoop.over(storage, config, reports=bool(keep))
    own = _ReportsOwn(loop, storage) if keep else None
    held: list[str] = []

    def sync() -> None:
        """The executor syncs as between cycles: it takes its leases and holds every run, so
        it stays live and the next cycle sees them running."""
        while True:
            response = storage.executors.executor_sync(
                executor_pb2.SyncRequest(
                    executor_id="sim", pool="default", nodes=nodes, run_ids=held
                )
            )
            if not response.leases:
                return
            held.extend(lease.run_id for lease in response.leases)

    seconds = {}
    for name in ("first", "next"):
        started, cpu = time.perf_counter(), time.process_time()
        before = own.cpu if own else 0.0
        loop.cycle()
        seconds[name] = round(time.perf_counter() - started, 3)
        seconds[f"{name}_cpu"] = round(time.process_time() - cpu, 3)
        if own:
            seconds[f"{name}_reports_cpu"] = round(own.cpu - before, 3)
        sync()
    assert loop.cycles == 2, f"{loop.cycles} full cycles ran"
    loop.close()
    storage.engine.dispose()
    return seconds


class _ReportsOwn:
    """CPU seconds of the reports' own work in a cycle: numbering it, building and keeping
    its record, keeping the reasons that changes replace. A figure the load of other work
    on the machine barely moves, unlike the difference of two cycles' totals."""

    def __init__(self, loop: Any, storage: Any) -> None:
        from armada_server.storage import scheduling_writes

        self.cpu = 0.0
        loop._report = self._timed(loop._report)
        storage.cycle_reports.next_cycle = self._timed(storage.cycle_reports.next_cycle)
        scheduling_writes.archive_reasons = self._timed(scheduling_writes.archive_reasons)

    def _timed(self, f: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - started

        return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, required=True, help="write the results here")
    p.add_argument("--quick", action="store_true", help="10,000 jobs, 3 rounds each")
    p.add_argument("--jobs", type=int, help="queued jobs (default 50,000; quick 10,000)")
    p.add_argument("--nodes", type=int, help="nodes of 8 CPUs (default: room for 80%% of the jobs)")
    p.add_argument("--rounds", type=int, help="rounds of each setting (default 5; quick 3)")
    args = p.parse_args()
    jobs = args.jobs or (10_000 if args.quick else 50_000)
    rounds = args.rounds or (3 if args.quick else 5)
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="armada-bench-reports-") as tmp:
        for i in range(rounds):
            for mode, keep in (("off", 0), ("on", 100)):
                runs[mode].append(one_round(Path(tmp), jobs, keep, args.nodes))
                log(f"round {i + 1}, reports {mode}: {runs[mode][-1]}")
    medians = {
        mode: {c: statistics.median(r[c] for r in found) for c in found[0]}
        for mode, found in runs.items()
    }
    out: dict[str, Any] = {
        "name": "report_cost",
        "queued_jobs": jobs,
        "nodes": args.nodes,
        "rounds": rounds,
        "cycle_seconds": runs,
        "median_cycle_seconds": medians,
        "machine": machine(),
    }
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
