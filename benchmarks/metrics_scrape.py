"""How long a /metrics scrape takes with many jobs in the database.

Fills a database with `--jobs` jobs (a tenth live, the rest ended one a second before the
fill, in 20 queues) and runs of the running ones on `--nodes` nodes (100) of 4 executors, then times
`Metrics.exposition`: the first scrape (counting every ended job), later scrapes (ended jobs
and node loads cached for 15 and 10 s), and scrapes that read everything afresh. SQLite,
and PostgreSQL (started with tests/postgres.py) unless `--no-postgres`. Writes JSON.

    .venv/bin/python benchmarks/metrics_scrape.py --json metrics_scrape.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert  # noqa: E402

from armada_core.api import executor_pb2, submit_pb2  # noqa: E402
from armada_core.client import job_item  # noqa: E402
from armada_core.jobs import JobState, RunState  # noqa: E402
from armada_server.metrics import Metrics  # noqa: E402
from armada_server.storage import Storage  # noqa: E402
from armada_server.storage import schema as t  # noqa: E402
from armada_server.storage.database import open_database  # noqa: E402
from armada_server.storage.nodes import encode_nodes  # noqa: E402
from benchmarks.common import log, machine  # noqa: E402

QUEUES = 20
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED)
LIVE = (JobState.QUEUED, JobState.RUNNING)


def _with_id(spec: submit_pb2.Job, job_id: str) -> bytes:
    spec.id = job_id
    return spec.SerializeToString()


def fill(storage: Storage, jobs: int, nodes: int) -> None:
    """`jobs` jobs straight into the tables (the scrape reads them, how they came is moot)."""
    now = datetime.now(UTC)
    per_executor = max(1, nodes // 4)
    pod = job_item(
        {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    ).pod_spec
    spec = submit_pb2.Job(queue="q", job_set_id="s", pod_spec=pod)
    node = executor_pb2.Node(name="n", allocatable={"cpu": "32", "memory": "256Gi"})
    with storage.transactions.write() as (conn, _):
        for q in range(QUEUES):
            queue = submit_pb2.Queue(name=f"q{q}", priority_factor=1)
            conn.execute(insert(t.queues).values(name=f"q{q}", spec=queue.SerializeToString()))
        for e in range(4):
            reported = [
                executor_pb2.Node(name=f"n{e}-{i}", allocatable=node.allocatable)
                for i in range(per_executor)
            ]
            conn.execute(
                insert(t.executors).values(
                    id=f"e{e}", pool="default", nodes=encode_nodes(reported), last_seen=now
                )
            )
    batch: list[dict] = []
    runs: list[dict] = []
    for i in range(jobs):
        state = LIVE[i % 2] if (i // QUEUES) % 10 == 0 else ENDED[i % 4]
        job_id = f"{i:026d}"
        batch.append(
            {
                "id": job_id,
                "queue": f"q{i % QUEUES}",
                "job_set": "s",
                "state": int(state),
                "priority": 0.0,
                "priority_class": "default",
                "submitted_at": now,
                # Ended jobs ended over the last day or so, one a second.
                "last_transition_at": now if state in LIVE else now - timedelta(seconds=jobs - i),
                # Stored as the server stores a spec: with its job's id.
                "spec": _with_id(spec, job_id),
            }
        )
        if state == JobState.RUNNING:
            runs.append(
                {
                    "id": f"run-{i}",
                    "job_id": job_id,
                    "run_index": 0,
                    "cluster_id": f"e{i % 4}",
                    "node": f"n{i % 4}-{i % per_executor}",
                    "pool": "default",
                    "state": int(RunState.RUNNING),
                }
            )
        if len(batch) == 10_000 or i == jobs - 1:
            with storage.transactions.write() as (conn, _):
                conn.execute(insert(t.jobs), batch)
                if runs:
                    conn.execute(insert(t.runs), runs)
            batch, runs = [], []


def measure(url: str, backend: str, jobs: int, rounds: int, nodes: int) -> dict:
    engine = open_database(url)
    storage = Storage(engine)
    log(f"{backend}: filling {jobs} jobs")
    fill(storage, jobs, nodes)
    with engine.connect() as conn:  # what autovacuum (PostgreSQL) would have done by now
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("VACUUM ANALYZE" if backend == "postgresql" else "ANALYZE")
    metrics = Metrics(storage.job_reads, storage.isolated_failures, nodes=storage.nodes)

    def scrape() -> float:
        started = time.perf_counter()
        body, _ = metrics.exposition(None)
        assert b"armada_jobs_ended_total" in body
        return time.perf_counter() - started

    first = scrape()
    cached = [scrape() for _ in range(rounds)]
    metrics.database.ended.every = metrics.database.loads.every = 0
    fresh = [scrape() for _ in range(rounds)]
    engine.dispose()
    result = {
        "benchmark": "metrics_scrape",
        "backend": backend,
        "jobs": jobs,
        "live_jobs": jobs // 10,
        "queues": QUEUES,
        "nodes": nodes,
        "first_scrape_seconds": round(first, 4),
        "cached_scrape_seconds_median": round(statistics.median(cached), 4),
        "fresh_scrape_seconds_median": round(statistics.median(fresh), 4),
    }
    log(json.dumps(result))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=100, help="nodes, of 4 executors")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="armada-metrics-") as work:
        results.append(
            measure(f"sqlite:///{work}/metrics.db", "sqlite", args.jobs, args.rounds, args.nodes)
        )
        if not args.no_postgres:
            from tests.postgres import PostgresServer

            postgres = PostgresServer()
            try:
                results.append(
                    measure(
                        postgres.new_database(), "postgresql", args.jobs, args.rounds, args.nodes
                    )
                )
            finally:
                postgres.stop()
    for r in results:
        r["machine"] = machine()
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
