"""Where a submitted job's time goes: SubmitJobs' server-side steps, measured in CPU time.

Run: ``python benchmarks/submit_profile.py [--batches N] [--profile DIR] [--json OUT]``.

An embedded server (no scheduling cycles, executor "none") takes the same requests as
benchmarks/server.py's submit_throughput (batches of 1,000 items, each with its own
client_id), but each step of its SubmitJobs is called in turn on this thread and timed in
this thread's CPU seconds, so a loaded machine changes the figures little: decoding the
request's bytes, validation (with the executors' capabilities), storing (client-id lookup,
the task check, building rows, the INSERTs, the events, the commit) and the response. With
``--profile DIR`` each database's store step also goes through cProfile (DIR/<db>.prof and
a text summary DIR/<db>.txt). PostgreSQL's own work runs in its server process and is not
counted: the figures are the armada server's CPU per job.

``single_job_requests`` stores requests of one job each, as orchestrators submit a task's
job, with an executor's nodes known, and times each request's validation and store in CPU
microseconds: what a request costs whatever its size.

``many_job_sets`` appends 1,000 events in one transaction, to one job set and then to 1,000
(as a cycle leasing, or a sync reporting on, jobs of many sets does), in CPU and wall
milliseconds per transaction.

``one_queue_writers`` then stores requests of 100 jobs in one queue from 1 and from 4 threads
at once, in wall time: what concurrent submitters to one queue cost each other.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from armada_core.api import executor_pb2, submit_pb2  # noqa: E402
from armada_core.jobs.lifecycle import EventMessage, timestamp  # noqa: E402
from armada_server.app import EmbeddedServer  # noqa: E402
from armada_server.auth import Principal  # noqa: E402
from armada_server.services.queues import QueueService  # noqa: E402
from armada_server.services.submit import SubmitService, submit_response  # noqa: E402
from benchmarks.common import log, machine  # noqa: E402
from benchmarks.server import BATCH, batch_bytes  # noqa: E402

STEPS = ("decode", "validate", "store", "respond")


class Laps:
    """Adds this thread's CPU seconds since the last lap to a step's total."""

    def __init__(self, totals: dict[str, float], *, counted: bool) -> None:
        self.totals, self.counted, self.last = totals, counted, time.thread_time()

    def __call__(self, step: str) -> None:
        now = time.thread_time()
        if self.counted:
            self.totals[step] += now - self.last
        self.last = now


WHO = Principal(name="bench", groups=())


@contextmanager
def submit_service(database_url: str) -> Iterator[SubmitService]:
    """SubmitJobs' service of an embedded server (no cycles) with the queue "bench"."""
    with EmbeddedServer(database_url=database_url, cycles=False) as server:
        ctx = server.server.context
        assert ctx is not None
        ctx.queues.create_queue(submit_pb2.Queue(name="bench", priority_factor=1))
        yield SubmitService(ctx, QueueService(ctx))


def profile_submission(
    database_url: str, backend: str, batches: int, profile_dir: Path | None
) -> dict[str, Any]:
    """CPU seconds per 1,000-job request for each step of SubmitJobs, on one database."""
    log(f"submit_profile[{backend}]: {batches} batches of {BATCH}")
    with submit_service(database_url) as service:
        requests = [batch_bytes("bench", f"set-{b}", f"c{b}") for b in range(batches + 1)]
        totals = dict.fromkeys(STEPS, 0.0)
        profiler = cProfile.Profile() if profile_dir else None
        for number, data in enumerate(requests):
            warmup = number == 0  # first request: caches and compiled statements
            lap = Laps(totals, counted=not warmup)

            request = submit_pb2.JobSubmitRequest.FromString(data)
            lap("decode")
            items = service._validate(request)
            lap("validate")
            if profiler and not warmup:
                profiler.enable()
            ids, notes = service._store(request, items, WHO)
            if profiler and not warmup:
                profiler.disable()
            lap("store")
            submit_response(ids, notes)
            lap("respond")
    if profiler and profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(profile_dir / f"{backend}.prof"))
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        (profile_dir / f"{backend}.txt").write_text(text.getvalue())
    per_request = {k: round(v / batches * 1000, 1) for k, v in totals.items()}
    cpu = sum(totals.values())
    result = {
        "measurement": "submit_profile",
        "backend": backend,
        "jobs": batches * BATCH,
        "cpu_ms_per_1000_jobs": per_request,
        "cpu_ms_per_1000_jobs_total": round(cpu / batches * 1000, 1),
        "jobs_per_cpu_second": round(batches * BATCH / cpu, 1) if cpu else None,
    }
    log(f"  {per_request} -> {result['jobs_per_cpu_second']} jobs per CPU second")
    return result


SINGLE_JOB_REQUESTS = 2000


def single_job_requests(database_url: str, backend: str) -> dict[str, Any]:
    """CPU microseconds of validation and store per request of one job (each with its own
    client id, a few job sets, one executor of 100 nodes connected), after 200 to warm up."""
    log(f"submit_profile[{backend}]: {SINGLE_JOB_REQUESTS} requests of one job")
    with submit_service(database_url) as service:
        nodes = [
            executor_pb2.Node(name=f"node-{n}", allocatable={"cpu": "32", "memory": "256Gi"})
            for n in range(100)
        ]
        service.ctx.executors.executor_sync(
            executor_pb2.SyncRequest(executor_id="bench", pool="default", nodes=nodes)
        )
        [first] = submit_pb2.JobSubmitRequest.FromString(
            batch_bytes("bench", "s", "c")
        ).job_request_items[:1]
        totals = dict.fromkeys(("validate", "store"), 0.0)
        for number in range(200 + SINGLE_JOB_REQUESTS):
            request = submit_pb2.JobSubmitRequest(queue="bench", job_set_id=f"set-{number % 20}")
            item = request.job_request_items.add()
            item.CopyFrom(first)
            item.client_id = f"single-{number}"
            lap = Laps(totals, counted=number >= 200)
            items = service._validate(request)
            lap("validate")
            service._store(request, items, WHO)
            lap("store")
    per_request = {k: round(v / SINGLE_JOB_REQUESTS * 1e6) for k, v in totals.items()}
    log(f"  CPU us per request: {per_request}")
    return {
        "measurement": "single_job_requests",
        "backend": backend,
        "requests": SINGLE_JOB_REQUESTS,
        "cpu_us_per_request": per_request,
        "requests_per_cpu_second": round(1e6 / sum(per_request.values())),
    }


MANY_SETS_EVENTS = 1000


def many_job_sets(database_url: str, backend: str) -> dict[str, Any]:
    """CPU and wall ms of a transaction appending 1,000 `queued` events to one job set, and
    to 1,000 (one event each); the median of five each."""
    log(f"submit_profile[{backend}]: 1,000 events to 1 and to 1,000 job sets")
    created = timestamp(datetime.now(UTC))
    per_shape: dict[str, dict[str, float]] = {}
    with submit_service(database_url) as service:
        tx = service.ctx.transactions
        for sets in (1, MANY_SETS_EVENTS):
            runs = []
            for attempt in range(6):  # the first warms up
                events = [
                    EventMessage(
                        queued={  # type: ignore[arg-type]  # a dict for a message field
                            "job_id": f"{sets}-{attempt}-{n}",
                            "job_set_id": f"set-{n % sets}",
                            "queue": "bench",
                            "created": created,
                        }
                    )
                    for n in range(MANY_SETS_EVENTS)
                ]
                cpu, wall = time.thread_time(), time.perf_counter()
                with tx.write() as (conn, touched):
                    tx.append(conn, touched, events)
                runs.append((time.thread_time() - cpu, time.perf_counter() - wall))
            cpu_ms, wall_ms = (round(sorted(r[i] for r in runs[1:])[2] * 1000, 1) for i in (0, 1))
            per_shape[f"{sets}_job_sets"] = {"cpu_ms": cpu_ms, "wall_ms": wall_ms}
    log(f"  per transaction: {per_shape}")
    return {
        "measurement": "many_job_sets",
        "backend": backend,
        "events": MANY_SETS_EVENTS,
        **per_shape,
    }


ONE_QUEUE_REQUESTS = 100  # per writer
ONE_QUEUE_ITEMS = 100


def one_queue_writers(database_url: str, backend: str) -> dict[str, Any]:
    """Jobs stored per wall second when 1 and then 4 threads store requests of 100 jobs in
    one queue at once, under the shipped per-queue limit (whose count locks the queue's
    row on PostgreSQL): what concurrent submitters to one queue wait for each other."""
    log(f"submit_profile[{backend}]: one queue, 1 and 4 writers")
    rates: dict[str, float] = {}
    with submit_service(database_url) as service:
        full = submit_pb2.JobSubmitRequest.FromString(batch_bytes("bench", "set", None))
        request = submit_pb2.JobSubmitRequest(queue="bench", job_set_id="set")
        request.job_request_items.extend(full.job_request_items[:ONE_QUEUE_ITEMS])
        items = service._validate(request)
        service._store(request, items, WHO)  # warm up
        for writers in (1, 4):

            def write() -> None:
                for _ in range(ONE_QUEUE_REQUESTS):
                    service._store(request, items, WHO)

            threads = [threading.Thread(target=write) for _ in range(writers)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            jobs = writers * ONE_QUEUE_REQUESTS * ONE_QUEUE_ITEMS
            rates[f"{writers}_writers"] = round(jobs / (time.perf_counter() - started))
    log(f"  jobs per second: {rates}")
    return {"measurement": "one_queue_writers", "backend": backend, "jobs_per_second": rates}


def _measure(work: Path, batches: int, profile: Path | None, *, postgres: bool) -> list[dict]:
    """Every measurement, on SQLite files in `work` (removed afterwards by the caller) and,
    with `postgres`, on databases of a PostgreSQL server started for them."""
    sqlite = f"sqlite:///{work / 'profile.db'}"
    results = [
        profile_submission(sqlite, "sqlite", batches, profile),
        single_job_requests(f"sqlite:///{work / 'single.db'}", "sqlite"),
        many_job_sets(f"sqlite:///{work / 'sets.db'}", "sqlite"),
        one_queue_writers(f"sqlite:///{work / 'writers.db'}", "sqlite"),
    ]
    if postgres:
        from tests.postgres import PostgresServer

        server = PostgresServer()
        try:
            url = server.new_database()
            results.append(profile_submission(url, "postgresql", batches, profile))
            url = server.new_database()
            results.append(single_job_requests(url, "postgresql"))
            url = server.new_database()
            results.append(many_job_sets(url, "postgresql"))
            url = server.new_database()
            results.append(one_queue_writers(url, "postgresql"))
        finally:
            server.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=10, help="requests of 1,000 jobs")
    parser.add_argument("--profile", type=Path, help="write cProfile output of the store here")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="armada-submit-profile-") as tmp:
        results = _measure(Path(tmp), args.batches, args.profile, postgres=not args.no_postgres)
    about = machine()
    for r in results:
        r["machine"] = about
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
