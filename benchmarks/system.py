"""Whole-system benchmark: submission-to-running latency, and jobs started per second.

Run: ``python benchmarks/system.py --json OUT.json`` (``--quick`` for a short version).
Progress goes to stderr; the JSON file (and stdout) gets one object per measurement, each with
the machine description.

Every component is a real process speaking real gRPC: `armada-server` (SQLite, default
settings unless said otherwise) and, for throughput, `armada-executor`:

- ``latency_idle_local``: the server with its in-process local executor (one virtual node the
  size of the machine), nothing else running. One small job (``sleep 0.2``) at a time: the
  clock starts just before SubmitJobs and stops when the job's ``running`` event arrives on a
  watch stream (GetJobSetEvents, watch=true) opened beforehand; the next job is submitted once
  the previous one has finished. Also reported, from the events' ``created`` timestamps: submit
  to ``leased`` (waiting for the scheduling cycle) and ``leased`` to ``running`` (the executor's
  sync, then starting the process).
- ``throughput_simulated``: 100,000 jobs (quick: 25,000) of one CPU are queued first, then an
  `armada-executor --kind simulated` with 10,000 nodes of 8 CPUs (quick: 10,000 of 2 CPUs)
  connects, so 80% of the jobs fit and the rest stay queued. Jobs started per second = jobs
  running (the server's ``armada_jobs`` metric, polled every 0.5 s) / (time the cluster was
  seen full - the first ``leased`` event's timestamp); also the time from starting the
  executor until the cluster was full, and the last ``running`` event's timestamp as the
  executor reported it. Per-cycle figures come from the server's
  `armada_scheduling_cycle_seconds` metric.
- ``backlog`` (only with ``--only backlog``: long): mixed_10k's jobs, 1,000,000 (quick:
  50,000; ``--backlog N``), submitted from 4 client threads and drained on mixed_10k's 10,000
  simulated nodes, on SQLite and PostgreSQL (``--databases sqlite``: SQLite only). Reports the
  submit rate, the time to the first lease, jobs started per second, the time to drain, the
  mean scheduling cycle (and at a full backlog), the server's RSS, the database's size drained,
  pruned and vacuumed, and queued / running / ended over time, drawn in OUT.html beside the
  JSON (see benchmarks/backlog.py).

``--profile DIR`` profiles the server's side of the throughput run instead, in this process (the
server does this work on worker threads, which cProfile of a server process would not see): with
the same queued jobs and nodes it times, under cProfile, the first scheduling cycle, the executor
syncs that take all its leases (a response's leases are bounded in size), the syncs reporting every
run as running (10,000 per sync, as the agent sends them), an idle sync, the next cycle and one
more where nothing changed, then the syncs reporting every run succeeded and the cycle that
leases again where they ended, and writes ``<step>.prof`` files to DIR (read them with
``python -m pstats``) and the seconds per step to the JSON. With ``--backlog N`` the jobs are N of
mixed_10k's (the backlog run's queues, shapes, classes and gangs) on its 10,000 nodes, with the
backlog run's server settings. With ``--timing`` it times the same steps without cProfile
(whose cost per call multiplies these steps' time several times over), in wall and in the
process's CPU seconds (which a loaded machine changes far less), and each cycle's phases in
wall seconds (the read, the views, the scheduler, comparing reasons, writing).
"""

from __future__ import annotations

import argparse
import itertools
import json
import queue
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from armada_core.api import submit_pb2  # noqa: E402
from armada_core.client import ArmadaClient, job_item  # noqa: E402
from armada_core.jobs import annotations as ann  # noqa: E402
from benchmarks import backlog  # noqa: E402
from benchmarks.common import LISTENING, log, machine, percentile  # noqa: E402

BIN = Path(sys.executable).parent
BATCH = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 4),
        "p90": round(percentile(values, 90), 4),
        "p99": round(percentile(values, 99), 4),
        "mean": round(statistics.mean(values), 4),
        "max": round(max(values), 4),
        "count": len(values),
    }


# --- processes ------------------------------------------------------------------------------


class Process:
    def __init__(self, name: str, argv: list[str], workdir: Path) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
        )

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = pattern.search(self.log_path.read_text(errors="replace"))
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(
            f"{self.name} did not print {pattern.pattern!r}; its output ended: " + "\n".join(tail)
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(300)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


#: Extra armada-server arguments for every server started (--server-config FILE).
SERVER_ARGS: list[str] = []


def start_server(
    workdir: Path, name: str, *args: str, database_url: str | None = None
) -> tuple[Process, str, int]:
    http_port = free_port()
    server = Process(
        name,
        [
            str(BIN / "armada-server"),
            "--port",
            "0",
            "--http-port",
            str(http_port),
            "--database-url",
            database_url or f"sqlite:///{workdir / (name + '.db')}",
            *args,
            *SERVER_ARGS,
        ],
        workdir,
    )
    match = server.wait_for(LISTENING)
    return server, f"{match.group(1)}:{match.group(2)}", http_port


def start_simulated_executor(workdir: Path, name: str, address: str, nodes: list[str]) -> Process:
    """`armada-executor --kind simulated` (id "sim") with `nodes` (its --nodes arguments)."""
    argv = [str(BIN / "armada-executor"), "--server", address, "--id", "sim"]
    return Process(name, [*argv, "--kind", "simulated", *nodes], workdir)


def metrics(http_port: int) -> dict[str, float]:
    """The server's Prometheus metrics, `name{labels}` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=60) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                continue
    return out


def spec(command: list[str], cpu: str = "100m", memory: str = "64Mi") -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": command,
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ]
    }


# --- submission to running, idle, local executor --------------------------------------------


def latency_idle_local(workdir: Path, rounds: int) -> dict[str, Any]:
    server, address, _ = start_server(
        workdir, "server-local", "--executor", "local", "--sandbox-dir", str(workdir / "pods")
    )
    events: queue.Queue[tuple[str, str, float, float]] = queue.Queue()
    stop = threading.Event()
    try:
        with ArmadaClient(address) as client:
            client.create_queue(submit_pb2.Queue(name="latency"))
            client.submit_jobs("latency", "idle", [job_item(spec(["true"]))])  # opens the set

            def follow() -> None:
                for message in client.follow_events("latency", "idle"):
                    received = time.time()
                    kind = message.message.WhichOneof("events")
                    event = getattr(message.message, kind)
                    events.put((kind, event.job_id, received, event.created.ToNanoseconds() / 1e9))
                    if stop.is_set():
                        return

            watcher = threading.Thread(target=follow, daemon=True)
            watcher.start()
            time.sleep(3)  # let the first job finish: from here on the system is idle
            to_running, to_leased, leased_to_running = [], [], []
            item = job_item(spec(["sleep", "0.2"]))
            for i in range(rounds):
                submitted = time.time()
                [job] = client.submit_jobs("latency", "idle", [item])
                seen: dict[str, tuple[float, float]] = {}
                while "succeeded" not in seen and "failed" not in seen:
                    kind, job_id, received, created = events.get(timeout=120)
                    if job_id == job:
                        seen[kind] = (received, created)
                if "running" not in seen:
                    raise RuntimeError(f"job {job} ended without a running event: {seen}")
                to_running.append(seen["running"][0] - submitted)
                to_leased.append(seen["leased"][1] - submitted)
                leased_to_running.append(seen["running"][1] - seen["leased"][1])
                log(f"latency {i + 1}/{rounds}: {to_running[-1] * 1000:.0f} ms to running")
                time.sleep(0.3)  # idle again
            stop.set()
            client.submit_jobs("latency", "idle", [job_item(spec(["true"]))])  # wake watcher
            watcher.join(10)
    finally:
        server.stop()
    return {
        "name": "latency_idle_local",
        "jobs": rounds,
        "settings": "defaults: scheduling_period 1 s, executor_sync_interval 1 s",
        "submit_to_running_seconds": summary(to_running),
        "submit_to_leased_seconds": summary(to_leased),
        "leased_to_running_seconds": summary(leased_to_running),
        "target": "p50 under 1 s",
        "target_met": percentile(to_running, 50) < 1.0,
    }


# --- jobs started per second, simulated executor --------------------------------------------


def throughput_simulated(
    workdir: Path, nodes: int, jobs: int, timeout: float, cpus: int = 8
) -> dict[str, Any]:
    server, address, http_port = start_server(workdir, "server-sim", "--executor", "none")
    capacity = nodes * cpus
    job_sets = [f"set-{i}" for i in range(max(1, jobs // 10_000))]
    executor = None
    try:
        with ArmadaClient(address, timeout=600) as client:
            client.create_queue(submit_pb2.Queue(name="load"))
            item = job_item(
                spec(["sleep", "3600"], cpu="1", memory="2Gi"),
                annotations={ann.PREFIX + "simulatedDuration": "36000"},
            )
            started = time.monotonic()
            per_set = jobs // len(job_sets)
            for n, job_set in enumerate(job_sets):
                for _ in range(0, per_set, BATCH):
                    client.submit_jobs("load", job_set, [item] * BATCH, check=False)
                log(f"submitted {(n + 1) * per_set}/{jobs} jobs")
            submit_seconds = time.monotonic() - started
            time.sleep(5)  # let the server settle (a cycle without nodes does nothing)

            executor_started = time.time()
            executor = start_simulated_executor(
                workdir, "executor-sim", address, ["--nodes", f"{nodes}x{cpus}x{4 * cpus}Gi"]
            )
            want = min(capacity, jobs)
            deadline = time.monotonic() + timeout
            progress: list[tuple[float, float]] = []
            last_log = 0.0
            while True:
                time.sleep(0.5)
                values = metrics(http_port)
                running = values.get('armada_jobs{queue="load",state="running"}', 0)
                now = time.time() - executor_started
                progress.append((round(now, 1), running))
                if now - last_log >= 5 or running >= want:
                    log(f"{running:.0f}/{want} running after {now:.0f}s")
                    last_log = now
                if running >= want or time.monotonic() > deadline:
                    break
            full_at = time.time()
            cycle_count = values.get("armada_scheduling_cycle_seconds_count", 0)
            cycle_sum = values.get("armada_scheduling_cycle_seconds_sum", 0)
            executor.stop()  # stop syncing: the measurement is over
            executor = None
            first_lease, running_times = None, []
            for job_set in job_sets:
                for message in client.get_job_set_events("load", job_set, timeout=600):
                    kind = message.message.WhichOneof("events")
                    created = getattr(message.message, kind).created.ToNanoseconds() / 1e9
                    if kind == "leased":
                        first_lease = created if first_lease is None else min(first_lease, created)
                    elif kind == "running":
                        running_times.append(created)
    finally:
        if executor is not None:
            executor.stop()
        server.stop()
    running_times.sort()
    started_jobs = int(progress[-1][1]) if progress else 0
    window = full_at - first_lease if first_lease else None
    rate = started_jobs / window if window else 0.0
    thinned = [p for i, p in enumerate(progress) if i % 4 == 0 or i == len(progress) - 1]
    return {
        "name": "throughput_simulated",
        "nodes": nodes,
        "cpus_per_node": cpus,
        "queued_jobs": jobs,
        "capacity_jobs": capacity,
        "submit_seconds": round(submit_seconds, 1),
        "jobs_started": started_jobs,
        "seconds_executor_start_to_first_lease": round(first_lease - executor_started, 2)
        if first_lease
        else None,
        "seconds_first_lease_to_full": round(window, 2) if window else None,
        "seconds_executor_start_to_full": round(full_at - executor_started, 1),
        "jobs_started_per_second": round(rate, 1),
        "jobs_started_per_second_from_executor_start": round(
            started_jobs / (full_at - executor_started), 1
        ),
        "executor_reported_seconds_first_lease_to_last_running": round(
            running_times[-1] - first_lease, 2
        )
        if running_times and first_lease
        else None,
        "scheduling_cycles": cycle_count,
        "mean_cycle_seconds": round(cycle_sum / cycle_count, 3) if cycle_count else None,
        "running_over_time": thinned,
        "target": "at least 10,000 jobs started per second",
        "target_met": rate >= 10_000,
    }


# --- a backlog end to end -------------------------------------------------------------------


def backlog_run(
    workdir: Path, label: str, database_url: str, jobs: int, timeout: float
) -> dict[str, Any]:
    """mixed_10k's `jobs` submitted through the API, then run to completion on its 10,000
    simulated nodes (benchmarks/backlog.py); the database's size drained and pruned."""
    queues, requests = backlog.workload(jobs)
    config = workdir / "backlog.yaml"
    config.write_text(backlog.SERVER_CONFIG)
    server, address, http_port = start_server(
        workdir,
        f"backlog-{label}",
        "--executor",
        "none",
        "--config",
        str(config),
        database_url=database_url,
    )
    executor = None
    try:
        log(f"backlog[{label}]: submitting {sum(len(r[2]) for r in requests):,} jobs")
        submitted = backlog.submit_all(address, queues, requests)
        total = submitted["jobs"]
        executor = start_simulated_executor(
            workdir, f"backlog-{label}-executor", address, backlog.node_args()
        )
        samples: list[tuple[float, float, float, float]] = []
        cycles: list[tuple[float, float, float]] = []  # (queued, count, sum) per sample
        for at, queued, running, ended, values in backlog.sample_until_drained(
            metrics, http_port, total, timeout
        ):
            samples.append((at, queued, running, ended))
            cycles.append(
                (
                    queued,
                    values.get("armada_scheduling_cycle_seconds_count", 0),
                    values.get("armada_scheduling_cycle_seconds_sum", 0),
                )
            )
        memory = backlog.rss_kib(server.proc.pid)
        drained_size = backlog.database_size(database_url)
        executor.stop()
        executor = None
    finally:
        if executor is not None:
            executor.stop()
        server.stop()
    pruned = backlog.prune_ended(BIN, database_url)
    pruned_size = backlog.database_size(database_url)
    backlog.vacuum(database_url)
    vacuumed_size = backlog.database_size(database_url)
    return {
        "name": "backlog",
        "database": label,
        "submit": submitted,
        **_backlog_rates(samples, total),
        "mean_cycle_seconds_at_full_backlog": _mean_cycle(cycles, 0.9 * total),
        "mean_cycle_seconds": _mean_cycle(cycles, 0),
        "server_memory": memory,
        "database_size": {
            "drained": drained_size,
            "pruned": pruned_size,
            "pruned_and_vacuumed": vacuumed_size,
        },
        "prune": pruned,
        "over_time": samples[:: max(1, len(samples) // 400)] + samples[-1:],
    }


def _backlog_rates(samples: list[tuple[float, float, float, float]], total: int) -> dict[str, Any]:
    """Time to the first lease and to the drain, and jobs started per second (every job
    leased once: from the first lease until nothing is queued), at the samples' grain."""
    first = next((at for at, _, running, ended in samples if running + ended > 0), None)
    all_started = next((at for at, queued, _, _ in samples if queued == 0), None)
    end, _, running, ended = samples[-1]
    window = (all_started - first) if first is not None and all_started is not None else None
    return {
        "seconds_to_first_lease": first,
        "seconds_to_all_started": all_started,
        "jobs_started_per_second": round(total / window) if window else None,
        "seconds_to_drain": end if running == 0 and ended >= total else None,
        "drained": running == 0 and ended >= total,
    }


def _mean_cycle(cycles: list[tuple[float, float, float]], queued_at_least: float) -> float | None:
    """The mean scheduling cycle over the cycles that began with at least `queued_at_least`
    queued (the cycles between two samples begin after the first of them)."""
    count = seconds = 0.0
    for (queued, c0, s0), (_, c1, s1) in itertools.pairwise(cycles):
        if queued >= queued_at_least and c1 > c0:
            count, seconds = count + c1 - c0, seconds + s1 - s0
    return round(seconds / count, 3) if count else None


def backlog_runs(
    workdir: Path, jobs: int, timeout: float, databases: Sequence[str]
) -> list[dict[str, Any]]:
    """The backlog on each database (PostgreSQL: a server the run starts, as the tests do);
    the plot of them all beside the JSON is written by main."""
    results = []
    for database in databases:
        if database == "sqlite":
            url = f"sqlite:///{workdir / 'backlog.db'}"
            results.append(backlog_run(workdir, database, url, jobs, timeout))
        elif database == "postgresql":
            from tests.postgres import PostgresServer

            server = PostgresServer()
            try:
                url = server.new_database()
                results.append(backlog_run(workdir, database, url, jobs, timeout))
            finally:
                server.stop()
        else:
            raise SystemExit(f"--databases: {database!r} is neither sqlite nor postgresql")
    return results


# --- where the server's time goes -----------------------------------------------------------


def _time_cycle_phases(loop: Any) -> dict[str, float]:
    """Wall seconds of a scheduling cycle's phases, summed into the dict returned until it is
    cleared: the snapshot's read, building the scheduler's views, the scheduler, comparing
    the waiting reasons with the held ones, and writing the decisions."""
    from armada_server.scheduling import loop as loop_module

    totals: dict[str, float] = {}

    def wrap(owner: Any, attribute: str, phase: str) -> None:
        work = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                totals[phase] = totals.get(phase, 0.0) + time.perf_counter() - started

        setattr(owner, attribute, timed)

    wrap(loop.reads, "scheduling_state", "read")
    wrap(loop_module, "build_snapshot", "views")
    wrap(loop_module, "schedule_isolating", "scheduler")
    wrap(loop_module, "changed_reasons", "reasons compared")
    wrap(loop.writes, "apply_schedule", "written")
    return totals


def profile_in_process(
    out: Path,
    workdir: Path,
    nodes: int,
    jobs: int,
    profiling: bool = True,
    cpus: int = 8,
    mixed: int | None = None,
) -> dict[str, Any]:
    """The server's steps in-process: the first cycle, the syncs taking its leases and
    reporting them running, an idle sync, two more cycles, the syncs reporting every run
    succeeded and the cycle after them. `jobs` identical one-CPU jobs in one queue on `nodes`
    nodes of `cpus` CPUs; with `mixed`, that many of mixed_10k's jobs (the backlog run's
    queues, shapes, classes and gangs) on its 10,000 nodes instead."""
    import cProfile
    import pstats

    from armada_core.api import executor_pb2
    from armada_server import config as server_config
    from armada_server.config import NodeGroup
    from armada_server.executors.agent import MAX_RESPONSE_BYTES, MAX_UPDATES_PER_SYNC, update
    from armada_server.executors.nodes import virtual_nodes
    from armada_server.scheduling.loop import SchedulingLoop
    from armada_server.storage import open_storage

    url = f"sqlite:///{workdir / 'profile.db'}"
    settings = workdir / "profile.yaml"
    settings.write_text(backlog.SERVER_CONFIG if mixed else "{}\n")
    config = server_config.build(
        settings, port=0, http_port=None, executor="none", database_url=url
    )
    storage = open_storage(url, retry_settings=config.retry)
    if mixed:
        queues, requests = backlog.workload(mixed)
        for name, factor in queues:
            storage.queues.create_queue(submit_pb2.Queue(name=name, priority_factor=factor))
        for queue, job_set, items in requests:
            storage.submissions.submit(queue, job_set, items, owner="bench")
        args = backlog.node_args()
        groups = [server_config.parse_nodes(a) for a in args[1::2]]
    else:
        storage.queues.create_queue(submit_pb2.Queue(name="load", priority_factor=1))
        item = job_item(
            spec(["sleep", "3600"], cpu="1", memory="2Gi"),
            priority_class=config.default_priority_class,
            annotations={ann.PREFIX + "simulatedDuration": "36000"},
        )
        for i in range(0, jobs, BATCH):
            storage.submissions.submit("load", f"set-{i // 10_000}", [item] * BATCH, owner="bench")
        groups = [NodeGroup(nodes, str(cpus), f"{4 * cpus}Gi")]
    log(f"profile: {mixed or jobs} jobs stored")
    node_list = virtual_nodes(groups, "sim")

    def sync(**kw: Any) -> executor_pb2.SyncResponse:
        return storage.executors.executor_sync(
            executor_pb2.SyncRequest(
                executor_id="sim",
                pool="default",
                nodes=node_list,
                max_response_bytes=MAX_RESPONSE_BYTES,  # as armada-executor says
                **kw,
            )
        )

    sync()
    loop = SchedulingLoop.over(storage, config)
    seconds: dict[str, float] = {}
    cpu_seconds: dict[str, float] = {}
    phases: dict[str, dict[str, float]] = {}  # step -> a cycle's phase -> wall seconds
    timed = _time_cycle_phases(loop) if not profiling else {}

    def step(name: str, work: Any) -> Any:
        if not profiling:  # without cProfile's own cost per call
            timed.clear()
            started, cpu = time.perf_counter(), time.process_time()
            result = work()
            seconds[name] = round(time.perf_counter() - started, 3)
            # The process's CPU seconds: on a shared machine wall time measures the load.
            cpu_seconds[name] = round(time.process_time() - cpu, 3)
            if timed:
                phases[name] = {k: round(v, 3) for k, v in timed.items()}
            log(f"timing: {name} took {seconds[name]} s, {cpu_seconds[name]} s of CPU")
            if timed:
                log(f"timing: {name} by phase: {phases[name]}")
            return result
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        result = work()
        profiler.disable()
        seconds[name] = round(time.perf_counter() - started, 3)
        profiler.dump_stats(out / f"{name}.prof")
        stats = pstats.Stats(profiler, stream=sys.stderr)
        log(f"profile: {name} took {seconds[name]} s under cProfile; top functions:")
        stats.sort_stats("tottime").print_stats(8)
        return result

    leased = step("cycle", loop.cycle)
    held: list[str] = []
    running: list[executor_pb2.RunUpdate] = []

    def take_leases() -> int:
        # A sync response carries leases up to a size bound: sync until none are left.
        syncs = 0
        while True:
            response = sync(run_ids=held)
            syncs += 1
            if not response.leases:
                return syncs
            held.extend(lease.run_id for lease in response.leases)
            running.extend(
                update(
                    lease.run_id,
                    lease.job.id,
                    running=executor_pb2.RunUpdate.Running(
                        node=lease.node, kubernetes_id=lease.run_id
                    ),
                )
                for lease in response.leases
            )

    def report_running() -> int:
        # In portions of the agent's MAX_UPDATES_PER_SYNC, as the executor sends them.
        for i in range(0, len(running), MAX_UPDATES_PER_SYNC):
            sync(run_ids=held, updates=running[i : i + MAX_UPDATES_PER_SYNC])
        return -(-len(running) // MAX_UPDATES_PER_SYNC)

    lease_syncs = step("sync_leases", take_leases)
    running_syncs = step("sync_running", report_running)
    step("sync_idle", lambda: sync(run_ids=held))
    step("cycle_again", loop.cycle)
    step("cycle_unchanged", loop.cycle)  # nothing changed since the last

    # Every run ends, in the same portions; the executor holds only those yet to end.
    ended = [
        update(u.run_id, u.job_id, succeeded=executor_pb2.RunUpdate.Succeeded()) for u in running
    ]

    def report_succeeded() -> int:
        for i in range(0, len(ended), MAX_UPDATES_PER_SYNC):
            later = i + MAX_UPDATES_PER_SYNC
            sync(run_ids=held[later:], updates=ended[i:later])
        return -(-len(ended) // MAX_UPDATES_PER_SYNC)

    step("sync_succeeded", report_succeeded)
    step("cycle_after_ends", loop.cycle)  # leases again where the runs ended
    storage.engine.dispose()
    return {
        "name": "profile_in_process",
        "workload": "mixed_10k" if mixed else "identical one-CPU jobs",
        "nodes": len(node_list),
        "queued_jobs": mixed or jobs,
        "leased": leased,
        "syncs_taking_leases": lease_syncs,
        "syncs_reporting_running": running_syncs,
        "seconds_under_cprofile" if profiling else "seconds": seconds,
        "cpu_seconds": cpu_seconds if not profiling else None,
        "cycle_phases_seconds": phases if not profiling else None,
        "profiles": str(out) if profiling else None,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, required=True, help="write the results here")
    p.add_argument("--quick", action="store_true", help="smaller sizes, a few minutes")
    p.add_argument("--only", choices=("latency", "throughput", "backlog"), help="one measurement")
    p.add_argument(
        "--backlog",
        type=int,
        help="backlog: mixed_10k jobs to submit and drain (default 1,000,000; quick 50,000); "
        "with --profile, that many of mixed_10k's jobs on its nodes",
    )
    p.add_argument(
        "--databases",
        default="sqlite,postgresql",
        help="backlog: the databases to run it on, in order (default sqlite,postgresql)",
    )
    p.add_argument("--nodes", type=int, help="simulated nodes (default 10,000, quick too)")
    p.add_argument("--jobs", type=int, help="queued jobs (default 100,000; quick 25,000)")
    p.add_argument("--cpus", type=int, help="CPUs per simulated node (default 8; quick 2)")
    p.add_argument(
        "--profile",
        type=Path,
        help="instead of measuring, profile the server's work in-process; .prof files go here",
    )
    p.add_argument(
        "--timing",
        action="store_true",
        help="with --profile: time the same steps without cProfile (no .prof files)",
    )
    p.add_argument(
        "--server-config",
        type=Path,
        help="a config file for every armada-server started (e.g. report_cycles: 0)",
    )
    args = p.parse_args()
    if args.server_config:
        SERVER_ARGS.extend(["--config", str(args.server_config.resolve())])
    # Quick is the full run's shape (10,000 nodes, more jobs queued than fit), shorter.
    nodes = args.nodes or 10_000
    jobs = args.jobs or (25_000 if args.quick else 100_000)
    cpus = args.cpus or (2 if args.quick else 8)
    rounds = 20 if args.quick else 100
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        args.profile = args.profile.resolve()
    results = []
    only = args.only
    with tempfile.TemporaryDirectory(prefix="armada-bench-") as tmp:
        workdir = Path(tmp)
        if args.profile:
            results.append(
                profile_in_process(
                    args.profile, workdir, nodes, jobs, not args.timing, cpus, args.backlog
                )
            )
            only = "profile"
        if only in (None, "latency"):
            log(f"latency: {rounds} jobs, one at a time, local executor")
            results.append(latency_idle_local(workdir, rounds))
            log(json.dumps(results[-1]["submit_to_running_seconds"]))
        if only in (None, "throughput"):
            log(f"throughput: {jobs} queued jobs, {nodes} simulated nodes")
            results.append(
                throughput_simulated(
                    workdir, nodes, jobs, timeout=600 if args.quick else 1800, cpus=cpus
                )
            )
            log(f"{results[-1]['jobs_started_per_second']} jobs started per second")
        if only == "backlog":  # long: only when asked for
            size = args.backlog or (50_000 if args.quick else 1_000_000)
            databases = args.databases.split(",")
            runs = backlog_runs(workdir, size, max(600, size / 200), databases)
            results += runs
            plot = args.json.with_suffix(".html")
            plot.write_text(
                backlog.samples_page(
                    f"A backlog of {runs[0]['submit']['jobs']:,} jobs on 10,000 simulated nodes",
                    "mixed_10k's mix, submitted from 4 client threads, drained by "
                    "armada-executor --kind simulated",
                    [(r["database"], r) for r in runs],
                )
            )
            log(f"plot: {plot}")
    info = machine()
    config = args.server_config.read_text() if args.server_config else ""
    out = [{**r, "machine": info, "quick": args.quick, "server_config": config} for r in results]
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
