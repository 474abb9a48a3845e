"""Retention benchmark: fill a database with finished jobs, prune them, report sizes and rates.

Run: ``python benchmarks/prune.py --json OUT.json`` (``--quick``: 20,000 jobs instead of
1,000,000; ``--no-postgres``: SQLite only). Half the jobs run and succeed (a run and six
events each), half are cancelled while queued (four events each), in job sets of 1,000,
through the server's own storage. The clock then moves past the retention and the server's
pruning deletes everything, `--batch` jobs per transaction as the server does (without its
pause between batches: the figure is the pruning's own rate).

Reported per database: its size filled, after pruning, and after VACUUM (SQLite's VACUUM
rewrites the file; PostgreSQL's plain VACUUM, as autovacuum runs it, makes the space reusable
without giving it back, so the size after it barely moves), the prune rate in jobs and rows a
second, and the longest batch: how long a scheduling cycle or a sync can wait for pruning.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from common import log, machine
from sqlalchemy import text

from armada_core.api import executor_pb2, submit_pb2
from armada_server.config import ServerConfig
from armada_server.scheduling.loop import _seen
from armada_server.storage import Storage
from armada_server.storage.base import utcnow
from armada_server.storage.database import open_database
from armada_server.storage.retention import Pruned
from tests.jobs.factories import item

SET_SIZE = 1000
NODE = executor_pb2.Node(name="n1", allocatable={"cpu": "100000", "memory": "100000Ti"})


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self):  # type: ignore[no-untyped-def]
        return self.now


def sync(store: Storage, updates: list[executor_pb2.RunUpdate]) -> executor_pb2.SyncResponse:
    return store.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=[NODE], updates=updates)
    )


def fill(store: Storage, jobs: int) -> None:
    """`jobs` finished jobs: even job sets run and succeed, odd ones are cancelled."""
    store.queues.create_queue(submit_pb2.Queue(name="bench", priority_factor=1))
    sync(store, [])
    items = [item() for _ in range(SET_SIZE)]
    for n in range(jobs // SET_SIZE):
        job_set = f"set-{n}"
        ids = store.submissions.submit("bench", job_set, items, owner="bench")
        if n % 2:
            store.submissions.cancel("bench", job_set, ids)
            continue
        state = store.scheduling_reads.scheduling_state(executor_timeout=3600)
        store.scheduling_writes.apply_schedule(
            scheduled={j: ("e1", "n1", "default") for j in ids},
            preempted=(),
            failed={},
            reasons={},
            seen=_seen(state, set(ids), ()),
        )
        leases = sync(store, []).leases
        for kind in ("running", "succeeded"):
            body = {kind: getattr(executor_pb2.RunUpdate, kind.capitalize())()}
            sync(
                store,
                [executor_pb2.RunUpdate(run_id=x.run_id, job_id=x.job.id, **body) for x in leases],
            )
        if n % 20 == 0:
            log(f"  {(n + 1) * SET_SIZE} jobs filled")


def size(store: Storage) -> int:
    """The database's size in bytes (SQLite: the file, its write-ahead log checkpointed)."""
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
            page = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
            return int(pages) * int(page)
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())


def analyze(store: Storage) -> None:
    """Statistics as autovacuum (PostgreSQL) or PRAGMA optimize keep them on a server that
    has run a while: without them PostgreSQL's planner takes the freshly filled tables for
    empty and sorts every ended job for each batch."""
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


def vacuum(store: Storage) -> None:
    if store.engine.dialect.name == "sqlite":  # outside the engine's own transactions
        with sqlite3.connect(str(store.engine.url.database), isolation_level=None) as db:
            db.execute("VACUUM")
        return
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM")


def measure(database_url: str, backend: str, jobs: int, batch: int) -> dict:
    log(f"prune[{backend}]: filling {jobs} finished jobs")
    clock = Clock()
    engine = open_database(database_url)
    store = Storage(engine, clock=clock)
    try:
        fill(store, jobs)
        analyze(store)
        filled = size(store)
        clock.now += timedelta(days=8)
        cutoff = clock.now - timedelta(days=7)
        total, batches, longest = Pruned(), 0, 0.0
        log(f"  pruning, {batch} jobs per batch")
        started = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            done = store.retention.prune_batch(cutoff, batch)
            longest = max(longest, time.perf_counter() - t0)
            assert done is not None
            total.add(done)
            batches += 1
            if done.jobs < batch:
                break
        seconds = time.perf_counter() - started
        pruned_size = size(store)
        vacuum(store)
        vacuumed = size(store)
    finally:
        engine.dispose()
    rows = total.jobs + total.runs + total.events + total.reasons + total.job_sets
    result = {
        "measurement": "prune",
        "backend": backend,
        "jobs": jobs,
        "batch_size": batch,
        "pruned": vars(total),
        "batches": batches,
        "prune_seconds": round(seconds, 3),
        "jobs_per_second": round(total.jobs / seconds, 1),
        "rows_per_second": round(rows / seconds, 1),
        "longest_batch_seconds": round(longest, 4),
        "database_bytes_filled": filled,
        "database_bytes_pruned": pruned_size,
        "database_bytes_after_vacuum": vacuumed,
    }
    log(f"  {result['jobs_per_second']} jobs/s; {filled} -> {pruned_size} -> {vacuumed} bytes")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="20,000 jobs")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument(
        "--batch", type=int, default=ServerConfig().prune_batch, help="jobs per transaction"
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    jobs = 20_000 if args.quick else args.jobs
    work = Path(tempfile.mkdtemp(prefix="armada-bench-"))
    results = [measure(f"sqlite:///{work / 'prune.db'}", "sqlite", jobs, args.batch)]
    if not args.no_postgres:
        from tests.postgres import PostgresServer

        postgres = PostgresServer()
        try:
            results.append(measure(postgres.new_database(), "postgresql", jobs, args.batch))
        finally:
            postgres.stop()
    for r in results:
        r["machine"] = machine()
        r["mode"] = "quick" if args.quick else "full"
    out = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(out + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
