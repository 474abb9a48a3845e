"""Server benchmark: submission throughput, event delivery latency, and a large submission.

Run: ``python benchmarks/server.py --json OUT.json`` (``--quick`` for a short version).
Progress goes to stderr; the JSON file (and stdout) gets one object per measurement, each with
the machine description.

Every measurement runs `armada-server` as its own process (executor "none", default settings
otherwise), so the client's work does not share the server's interpreter:

- ``submit_throughput``: SubmitJobs in batches of 1,000 items (each with its own client_id, the
  requests serialised before the clock starts), one client, on SQLite and on PostgreSQL (the
  benchmark starts its own PostgreSQL with tests/postgres.py unless ``--postgres-url`` is given;
  ``--no-postgres`` skips it).
- ``submit_throughput_tasks``: the same with every item a task of the lifecycle's (the
  ``armadaproject.io/task`` annotations, a task of its own per item), the worst case of the
  server's one-live-generation-per-task check: a thousand tasks locked and looked up per request.
- ``event_latency``: GetJobSetEvents watchers (watch=true) in three shapes: 100 and 1,000
  watchers, each on its own job set of 1,000, and 1,000 watchers all on one set, while a
  submitter sends batches of 1,000 jobs to another job set at 10,000 jobs/s (or as fast as the
  server takes them: the achieved rate is reported). Probe jobs go to the watched sets one at a
  time (every 10 ms in the spread shapes, every 100 ms on the one set: each probe is then 1,000
  deliveries); ``--quick`` sends a fifth of the probes. Latency is the time a watcher receives
  a probe's ``submitted`` event minus the event's ``created`` timestamp (set by the server as
  it begins to store the request), over every watcher that receives it: p50, p99 and max.
- ``submit_single``: SubmitJobs of one job each, one after another (1,000; 5,000 in the full
  run), on SQLite and PostgreSQL, to a server with a simulated executor (``--executor
  simulated``, 100 nodes that never fill), so that every job is also scheduled, leased and
  reported running meanwhile: what an orchestrator's tasks send. Requests per second, the
  request's p50 and p99, and the server process's CPU per request (Linux).
- ``submit_many``: the time to submit 1,000,000 jobs (50,000 with ``--quick``) in batches of
  1,000 without client ids, from two client threads, on SQLite; per-batch times at the start and
  at the end show whether the server slows down as its database grows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from armada_core.api import event_pb2, event_pb2_grpc, submit_pb2, submit_pb2_grpc  # noqa: E402
from armada_core.api.k8s import core_v1_pb2 as core  # noqa: E402
from armada_core.api.k8s import resource_pb2  # noqa: E402
from benchmarks.common import LISTENING, log, machine, percentile  # noqa: E402

BATCH = 1000
LOAD_RATE = 10_000.0  # jobs/s the latency is measured under
# submit_single's server: a simulated executor whose nodes never fill (runs end after 1 s),
# so each request's job is scheduled, leased and reported running as it arrives.
SINGLE_NODES = ("--nodes", "100x32x256Gi")
SINGLE_WARMUP = 100


# --- the server process ---------------------------------------------------------------------


class Server:
    def __init__(
        self, database_url: str, log_path: Path, *, executor: tuple[str, ...] = ("none",)
    ) -> None:
        script = Path(sys.executable).parent / "armada-server"
        command = [str(script)] if script.exists() else [sys.executable, "-m", "armada_server.cli"]
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                *command,
                "--port",
                "0",
                "--http-port",
                "0",
                "--database-url",
                database_url,
                "--executor",
                *executor,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        match = LISTENING.search(line)
        if not match:
            self.stop()
            raise RuntimeError(f"armada-server did not start ({line!r}); see {log_path}")
        self.address = f"{match.group(1)}:{match.group(2)}"

    def cpu_seconds(self) -> float | None:
        """The server process's CPU seconds so far (user and system; None off Linux)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()


def create_queue(address: str, name: str) -> None:
    with grpc.insecure_channel(address) as channel:
        submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(
            submit_pb2.Queue(name=name, priority_factor=1), timeout=60
        )


def job_item(client_id: str = "") -> submit_pb2.JobSubmitRequestItem:
    q = resource_pb2.Quantity
    resources = {"cpu": q(string="1"), "memory": q(string="1Gi")}
    container = core.Container(
        name="main",
        image="busybox:1.36",
        command=["sh", "-c", "sleep 10"],
        resources=core.ResourceRequirements(requests=resources, limits=resources),
    )
    return submit_pb2.JobSubmitRequestItem(
        priority=1,
        namespace="default",
        client_id=client_id,
        pod_specs=[core.PodSpec(containers=[container], restartPolicy="Never")],
    )


def batch_bytes(
    queue: str, job_set: str, client_prefix: str | None, *, tasks: bool = False
) -> bytes:
    template = job_item()
    items = []
    for k in range(BATCH):
        one = submit_pb2.JobSubmitRequestItem()
        one.CopyFrom(template)
        if client_prefix is not None:
            one.client_id = f"{client_prefix}-{k}"
            if tasks:
                one.annotations.update(
                    {
                        "armadaproject.io/task": f"dag/run/{client_prefix}-{k}/-1",
                        "armadaproject.io/task-attempt": "1",
                        "armadaproject.io/task-generation": "0",
                    }
                )
        items.append(one)
    return submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id=job_set, job_request_items=items
    ).SerializeToString()


def raw_submit(channel: grpc.Channel):  # type: ignore[no-untyped-def]
    return channel.unary_unary(
        "/api.Submit/SubmitJobs", request_serializer=None, response_deserializer=None
    )


# --- measurements ---------------------------------------------------------------------------


def submit_throughput(
    database_url: str, backend: str, batches: int, work: Path, *, tasks: bool = False
) -> dict:
    name = "submit_throughput_tasks" if tasks else "submit_throughput"
    log(f"{name}[{backend}]: {batches} batches of {BATCH}")
    requests = [batch_bytes("bench", f"set-{b % 10}", f"b{b}", tasks=tasks) for b in range(batches)]
    server = Server(database_url, work / f"{name}-{backend}.log")
    try:
        create_queue(server.address, "bench")
        with grpc.insecure_channel(
            server.address, options=[("grpc.max_send_message_length", 256 * 2**20)]
        ) as channel:
            send = raw_submit(channel)
            send(batch_bytes("bench", "warmup", None), timeout=300)  # warm up, not counted
            times = []
            started = time.perf_counter()
            for data in requests:
                t0 = time.perf_counter()
                answer = submit_pb2.JobSubmitResponse.FromString(send(data, timeout=300))
                times.append(time.perf_counter() - t0)
                assert len(answer.job_response_items) == BATCH
            elapsed = time.perf_counter() - started
    finally:
        server.stop()
    jobs = batches * BATCH
    result = {
        "measurement": name,
        "backend": backend,
        "jobs": jobs,
        "batch_size": BATCH,
        "seconds": round(elapsed, 3),
        "jobs_per_second": round(jobs / elapsed, 1),
        "batch_seconds_p50": round(statistics.median(times), 4),
        "batch_seconds_p99": round(percentile(times, 99), 4),
        "target_jobs_per_second": 30_000 if backend == "sqlite" else 15_000,
    }
    log(f"  {result['jobs_per_second']} jobs/s")
    return result


def submit_single(database_url: str, backend: str, requests: int, work: Path) -> dict:
    """One-job SubmitJobs, one after another: what an orchestrator's tasks send."""
    log(f"submit_single[{backend}]: {requests} requests of one job")
    server = Server(
        database_url, work / f"single-{backend}.log", executor=("simulated", *SINGLE_NODES)
    )
    try:
        create_queue(server.address, "single")
        item = job_item()
        with grpc.insecure_channel(server.address) as channel:
            submit = submit_pb2_grpc.SubmitStub(channel)

            def send(number: int) -> None:
                copy = submit_pb2.JobSubmitRequestItem()
                copy.CopyFrom(item)
                copy.client_id = f"single-{number}"
                answer = submit.SubmitJobs(
                    submit_pb2.JobSubmitRequest(
                        queue="single", job_set_id=f"set-{number % 20}", job_request_items=[copy]
                    ),
                    timeout=60,
                )
                assert len(answer.job_response_items) == 1

            for number in range(-SINGLE_WARMUP, 0):  # warm up, not counted
                send(number)
            times = []
            cpu = server.cpu_seconds()
            started = time.perf_counter()
            for number in range(requests):
                t0 = time.perf_counter()
                send(number)
                times.append(time.perf_counter() - t0)
            elapsed = time.perf_counter() - started
            cpu_after = server.cpu_seconds()
    finally:
        server.stop()
    server_cpu = (
        round((cpu_after - cpu) / requests * 1e6)
        if cpu is not None and cpu_after is not None
        else None
    )
    result = {
        "measurement": "submit_single",
        "backend": backend,
        "requests": requests,
        "executor": "simulated, " + " ".join(SINGLE_NODES[1:]) + " nodes (runs of 1 s)",
        "requests_per_second": round(requests / elapsed, 1),
        "request_ms_p50": round(statistics.median(times) * 1000, 2),
        "request_ms_p99": round(percentile(times, 99) * 1000, 2),
        "server_cpu_us_per_request": server_cpu,
    }
    log(
        f"  {result['requests_per_second']} requests/s, p50 {result['request_ms_p50']} ms, "
        f"server CPU {server_cpu} us a request"
    )
    return result


LATENCY_SETS = 1000  # the job sets probes go to in the spread shapes


@dataclass(frozen=True)
class LatencyShape:
    """Watchers, and the job sets they watch: each of `watchers` on its own set of 1,000, or
    all on one set; a probe job is submitted every `interval` seconds to a watched set."""

    name: str
    watchers: int
    one_set: bool
    probes: int
    interval: float

    def job_set(self, watcher: int) -> str:
        return "hot" if self.one_set else f"set-{watcher * (LATENCY_SETS // self.watchers)}"


def latency_shapes(quick: bool) -> list[LatencyShape]:
    scale = 1 if quick else 5
    return [
        LatencyShape("100_over_1000_sets", 100, False, 300 * scale, 0.01),
        LatencyShape("1000_over_1000_sets", 1000, False, 300 * scale, 0.01),
        # 60 probes: with 20 the p99 of one tree moved from 116 to 202 ms between runs.
        LatencyShape("1000_on_one_set", 1000, True, 60 * scale, 0.1),
    ]


class LoadSubmitter(threading.Thread):
    """Submits batches of 1,000 jobs to a job set nobody watches, at `rate` jobs/s or as fast
    as the server takes them, until stopped: the submissions the latency is measured under."""

    def __init__(self, address: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.address, self.rate = address, rate
        self.data = batch_bytes("latency", "load", None)
        self.stopping = threading.Event()
        self.jobs = 0
        self.seconds = 0.0

    def run(self) -> None:
        with grpc.insecure_channel(self.address) as channel:
            send = raw_submit(channel)
            started = time.perf_counter()
            while not self.stopping.is_set():
                send(self.data, timeout=300)
                self.jobs += BATCH
                ahead = started + self.jobs / self.rate - time.perf_counter()
                if ahead > 0:
                    self.stopping.wait(ahead)
            self.seconds = time.perf_counter() - started


async def _latency_run(address: str, shape: LatencyShape) -> dict:
    channel = grpc.aio.insecure_channel(address)
    events = event_pb2_grpc.EventStub(channel)
    submit = submit_pb2_grpc.SubmitStub(channel)
    watched = sorted({shape.job_set(w) for w in range(shape.watchers)})
    latencies: list[float] = []  # ms from an event's creation to a watcher receiving it
    expected = shape.probes * (shape.watchers // len(watched))
    done = asyncio.Event()
    opened = asyncio.Event()
    started = 0

    async def watch(w: int) -> None:
        nonlocal started
        stream = events.GetJobSetEvents(
            event_pb2.JobSetRequest(queue="latency", id=shape.job_set(w), watch=True)
        )
        started += 1
        if started == shape.watchers:
            opened.set()
        async for message in stream:
            now = time.time()
            if message.message.WhichOneof("events") != "submitted":
                continue
            latencies.append(
                (now - message.message.submitted.created.ToMicroseconds() / 1e6) * 1000
            )
            if len(latencies) >= expected:
                done.set()

    tasks = [asyncio.create_task(watch(w)) for w in range(shape.watchers)]
    await opened.wait()
    await asyncio.sleep(2.0)  # let every stream reach the server and subscribe
    item = job_item()
    for k in range(shape.probes):
        await submit.SubmitJobs(
            submit_pb2.JobSubmitRequest(
                queue="latency", job_set_id=watched[k % len(watched)], job_request_items=[item]
            )
        )
        await asyncio.sleep(shape.interval)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), 60)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await channel.close()
    return {"latencies": latencies, "expected": expected}


def event_latency(
    database_url: str, backend: str, shape: LatencyShape, work: Path, *, load_rate: float
) -> dict:
    """Event delivery while a submitter loads the server: see the module's docstring."""
    log(f"event_latency[{backend}]: {shape.name}, load {load_rate:.0f} jobs/s")
    server = Server(database_url, work / f"server-latency-{backend}-{shape.name}.log")
    load = LoadSubmitter(server.address, load_rate)
    try:
        create_queue(server.address, "latency")
        load.start()
        run = asyncio.run(_latency_run(server.address, shape))
    finally:
        load.stopping.set()
        load.join()
        server.stop()
    ms = run["latencies"]
    result = {
        "measurement": "event_latency",
        "backend": backend,
        "shape": shape.name,
        "watchers": shape.watchers,
        "job_sets_watched": 1 if shape.one_set else shape.watchers,
        "probes": shape.probes,
        "events": len(ms),
        "expected_events": run["expected"],
        "ms_from_created_p50": round(percentile(ms, 50), 2),
        "ms_from_created_p99": round(percentile(ms, 99), 2),
        "ms_from_created_max": round(max(ms, default=float("nan")), 2),
        "submit_jobs_per_second": round(load.jobs / load.seconds, 1) if load.seconds else None,
        "target_p99_ms": 10,
        "target_submit_jobs_per_second": 10_000,
    }
    log(
        f"  p50 {result['ms_from_created_p50']} ms, p99 {result['ms_from_created_p99']} ms, "
        f"max {result['ms_from_created_max']} ms, {result['submit_jobs_per_second']} jobs/s"
    )
    return result


def event_latencies(
    database_url: Callable[[], str], backend: str, quick: bool, work: Path
) -> list[dict]:
    return [
        event_latency(database_url(), backend, shape, work, load_rate=LOAD_RATE)
        for shape in latency_shapes(quick)
    ]


def submit_many(database_url: str, backend: str, jobs: int, work: Path) -> dict:
    batches = jobs // BATCH
    log(f"submit_many[{backend}]: {jobs} jobs")
    data = batch_bytes("many", "many", None)
    server = Server(database_url, work / f"server-many-{backend}.log")
    times: list[tuple[int, float]] = []
    lock = threading.Lock()
    counter = iter(range(batches))
    try:
        create_queue(server.address, "many")

        def client() -> None:
            with grpc.insecure_channel(server.address) as channel:
                send = raw_submit(channel)
                while True:
                    with lock:
                        b = next(counter, None)
                    if b is None:
                        return
                    t0 = time.perf_counter()
                    send(data, timeout=600)
                    with lock:
                        times.append((b, time.perf_counter() - t0))
                        if len(times) % max(1, batches // 20) == 0:
                            log(f"  {len(times) * BATCH} jobs")

        started = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(client) for _ in range(2)]:
                f.result()
        elapsed = time.perf_counter() - started
    finally:
        server.stop()
    ordered = [t for _, t in sorted(times)]
    tenth = max(1, len(ordered) // 10)
    result = {
        "measurement": "submit_many",
        "backend": backend,
        "jobs": jobs,
        "batch_size": BATCH,
        "client_threads": 2,
        "seconds": round(elapsed, 1),
        "jobs_per_second": round(jobs / elapsed, 1),
        "batch_seconds_first_tenth_median": round(statistics.median(ordered[:tenth]), 4),
        "batch_seconds_last_tenth_median": round(statistics.median(ordered[-tenth:]), 4),
    }
    log(f"  {result['seconds']} s ({result['jobs_per_second']} jobs/s)")
    return result


# --- main -----------------------------------------------------------------------------------


MEASUREMENTS = ("submit_throughput", "submit_single", "event_latency", "submit_many")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="short version (about a minute)")
    parser.add_argument(
        "--postgres-url", help="use this PostgreSQL (an empty database) instead of starting one"
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        default=list(MEASUREMENTS),
        help=f"these measurements, comma-separated, of {', '.join(MEASUREMENTS)} (default all; "
        "submit_throughput includes submit_throughput_tasks)",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.only) - set(MEASUREMENTS))
    if unknown:
        parser.error(f"--only: no measurement {', '.join(unknown)}; there are {MEASUREMENTS}")
    only = set(args.only)

    work = Path(tempfile.mkdtemp(prefix="armada-bench-"))
    about = machine()
    batches = 10 if args.quick else 50
    many = 50_000 if args.quick else 1_000_000
    singles = 1_000 if args.quick else 5_000
    results: list[dict] = []
    postgres = None
    try:
        if "submit_throughput" in only:
            results.append(
                submit_throughput(f"sqlite:///{work / 'throughput.db'}", "sqlite", batches, work)
            )
            results.append(
                submit_throughput(
                    f"sqlite:///{work / 'tasks.db'}", "sqlite", batches, work, tasks=True
                )
            )
        if "submit_single" in only:
            results.append(
                submit_single(f"sqlite:///{work / 'single.db'}", "sqlite", singles, work)
            )
        if "event_latency" in only:
            sqlite_dbs = (f"sqlite:///{work / f'latency-{n}.db'}" for n in range(1_000))
            results += event_latencies(lambda: next(sqlite_dbs), "sqlite", args.quick, work)
        # On PostgreSQL each measurement gets a database of its own; given one database
        # (--postgres-url), only the first of them runs.
        on_postgres: list[Callable[[str], list[dict]]] = []
        if "submit_throughput" in only:
            on_postgres += [
                lambda url: [submit_throughput(url, "postgresql", batches, work)],
                lambda url: [submit_throughput(url, "postgresql", batches, work, tasks=True)],
            ]
        if "submit_single" in only:
            on_postgres.append(lambda url: [submit_single(url, "postgresql", singles, work)])
        if "event_latency" in only:
            on_postgres += [
                lambda url, shape=shape: [
                    event_latency(url, "postgresql", shape, work, load_rate=LOAD_RATE)
                ]
                for shape in latency_shapes(args.quick)
            ]
        if not args.no_postgres and on_postgres:
            if args.postgres_url:
                results += on_postgres[0](args.postgres_url)
            else:
                from tests.postgres import PostgresServer

                postgres = PostgresServer()
                for measure in on_postgres:
                    results += measure(postgres.new_database())
        if "submit_many" in only:
            results.append(submit_many(f"sqlite:///{work / 'many.db'}", "sqlite", many, work))
    finally:
        if postgres is not None:
            postgres.stop()
    for r in results:
        r["machine"] = about
        r["mode"] = "quick" if args.quick else "full"
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
