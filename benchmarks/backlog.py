"""A backlog end to end: mixed_10k's jobs submitted through the API and run to completion on
10,000 simulated nodes (`system.py --only backlog`).

The workload is the scheduler benchmark's mixed_10k (`scheduler.mixed_world`: 100 queues
of priority factors 1 to 10, five shapes of which one needs a GPU, three priority classes,
gangs of 8 whole GPU nodes with a rack or a hop limit, elastic pod groups), each job running
a short simulated time. Its nodes, 9,000 CPU nodes and 1,000 GPU nodes in racks of 10 and blocks of
5, are an `armada-executor --kind simulated`. The server runs with its shipped scheduling
period and sync interval, on SQLite or PostgreSQL; 4 client threads submit.

Reported: the submit rate, the time to the first lease, jobs started per second, the time
to drain the backlog, the database's size when drained and after pruning what ended, the
server's RSS (peak and at the end), the scheduling cycles' mean time, and queued / running /
ended over time, also drawn as a self-contained HTML page beside the JSON.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from html import escape
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import annotations as ann
from armada_server.simulation.page import STYLE, chart
from benchmarks.common import log
from benchmarks.scheduler import GPU_TAINT, TOPOLOGY_LEVELS, mixed_world

CLIENT_THREADS = 4
BATCH = 1000
CPU_NODES, GPU_NODES, QUEUES = 9000, 1000, 100
#: The simulated runtime of each job, seconds: short, so the backlog drains.
RUNTIME_SECONDS = (10, 60)
ACTIVE = ("leased", "pending", "running")
ENDED = ("succeeded", "failed", "cancelled", "preempted", "rejected")

SERVER_CONFIG = f"""\
priority_classes:
  - {{name: pre0, priority: 0, preemptible: true}}
  - {{name: pre1, priority: 1, preemptible: true}}
  - {{name: np3, priority: 3, preemptible: false}}
default_priority_class: pre0
scheduling:
  topology_levels: [{", ".join(TOPOLOGY_LEVELS)}]
"""


def node_args(cpu_nodes: int = CPU_NODES, gpu_nodes: int = GPU_NODES) -> list[str]:
    """`armada-executor --nodes` arguments for mixed_10k's nodes: one group of CPU nodes and
    a group per rack of GPU nodes (labelled with their rack and block, GPU-tainted)."""
    args = ["--nodes", json.dumps({"count": cpu_nodes, "cpu": "32", "memory": "256Gi"})]
    racks = max(1, gpu_nodes // 10)
    for rack in range(racks):
        group = {
            "count": gpu_nodes // racks,
            "cpu": "64",
            "memory": "1Ti",
            "gpus": 8,
            "labels": {"rack": f"rack-{rack:03d}", "block": f"block-{rack // 5:03d}"},
            "taints": [
                {"key": GPU_TAINT.key, "value": GPU_TAINT.value, "effect": GPU_TAINT.effect}
            ],
        }
        args += ["--nodes", json.dumps(group)]
    return args


def _quantity(name: str, value: int) -> str:
    if name == "cpu":
        return f"{value}m"
    if name == "memory":
        return f"{value // 2**20}Mi"
    return str(value)


def workload(jobs: int, seed: int = 7) -> tuple[list[tuple[str, float]], list[Any]]:
    """mixed_10k's queues (name, priority factor) and its jobs as requests: (queue, job set, items),
    at most BATCH items each, never splitting a gang."""
    _, queues, scheduler_jobs = mixed_world(CPU_NODES, GPU_NODES, QUEUES, jobs, seed=seed)
    rng = random.Random(seed)
    by_queue: dict[str, list[Any]] = {}
    for job in scheduler_jobs:
        by_queue.setdefault(job.queue, []).append(job)
    requests: list[tuple[str, str, list[submit_pb2.JobSubmitRequestItem]]] = []
    for queue, queue_jobs in by_queue.items():
        batch: list[submit_pb2.JobSubmitRequestItem] = []
        gang = None
        for job in queue_jobs:
            if len(batch) >= BATCH and (job.gang_id is None or job.gang_id != gang):
                requests.append((queue, f"{queue}-{len(requests)}", batch))
                batch = []
            gang = job.gang_id
            batch.append(_item(job, rng.randint(*RUNTIME_SECONDS)))
        if batch:
            requests.append((queue, f"{queue}-{len(requests)}", batch))
    return [(q.name, q.priority_factor) for q in queues], requests


def _item(job: Any, runtime: int) -> submit_pb2.JobSubmitRequestItem:
    amounts = {name: _quantity(name, value) for name, value in job.requests.items() if value}
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox",
        "command": ["sleep", str(runtime)],
        "resources": {"requests": amounts, "limits": amounts},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if job.tolerations:
        spec["tolerations"] = [
            {"key": t.key, "operator": t.operator, "effect": t.effect} for t in job.tolerations
        ]
    annotations = {ann.PREFIX + "simulatedDuration": str(runtime)}
    if job.gang_id is not None:
        annotations[ann.GANG_ID] = job.gang_id
        annotations[ann.GANG_CARDINALITY] = str(job.gang_cardinality)
        if job.gang_uniformity_label:
            annotations[ann.GANG_NODE_UNIFORMITY_LABEL] = job.gang_uniformity_label
        if job.gang_max_hops is not None:
            annotations[ann.GANG_MAX_HOPS] = str(job.gang_max_hops)
        if job.gang_role:
            annotations[ann.GANG_ROLE] = job.gang_role
            annotations[ann.GANG_ROLE_MINIMUM] = str(job.gang_role_min)
    return job_item(spec, priority_class=job.priority_class, annotations=annotations, check=False)


def submit_all(
    address: str, queues: Sequence[tuple[str, float]], requests: Sequence[Any]
) -> dict[str, Any]:
    """Create the queues and send the requests from CLIENT_THREADS threads."""
    with ArmadaClient(address, timeout=600) as client:
        for name, factor in queues:
            client.create_queue(submit_pb2.Queue(name=name, priority_factor=factor))
    total = sum(len(items) for _, _, items in requests)
    sent = [0] * CLIENT_THREADS
    ended = [0.0] * CLIENT_THREADS
    errors: list[BaseException] = []

    def send(worker: int) -> None:
        try:
            with ArmadaClient(address, timeout=600) as client:
                for queue, job_set, items in requests[worker::CLIENT_THREADS]:
                    client.submit_jobs(queue, job_set, items, check=False)
                    sent[worker] += len(items)
        except BaseException as e:  # reported once the others end
            errors.append(e)
        ended[worker] = time.monotonic()

    threads = [threading.Thread(target=send, args=(w,)) for w in range(CLIENT_THREADS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(5)
            log(f"submitted {sum(sent):,}/{total:,}")
    seconds = max(ended) - started
    if errors:
        raise RuntimeError(f"submission failed: {errors[0]}") from errors[0]
    return {"jobs": total, "seconds": round(seconds, 1), "jobs_per_second": round(total / seconds)}


def job_counts(values: dict[str, float]) -> dict[str, float]:
    """The server's live jobs by state (`armada_jobs`) and ended jobs by outcome
    (`armada_jobs_ended_total`), summed over queues."""
    counts: dict[str, float] = {}
    for key, value in values.items():
        if key.startswith(("armada_jobs{", "armada_jobs_ended_total{")):
            label = "state" if key.startswith("armada_jobs{") else "outcome"
            name = key.rsplit(f'{label}="', 1)[1].split('"', 1)[0]
            counts[name] = counts.get(name, 0) + value
    return counts


def rss_kib(pid: int) -> dict[str, int]:
    """The process's resident set now and at its peak (KiB), and how much of it now is
    mapped files' pages (the kernel's page cache, which it may reclaim)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:", "RssFile:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return {
        "rss_kib": out.get("VmRSS", 0),
        "peak_rss_kib": out.get("VmHWM", 0),
        "rss_file_kib": out.get("RssFile", 0),
    }


def database_size(url: str) -> dict[str, int]:
    """The database's bytes: on SQLite the files and the pages in use, on PostgreSQL
    pg_database_size."""
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1])
        files = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        with sqlite3.connect(path) as conn:
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            used = conn.execute("PRAGMA page_count").fetchone()[0]
            used -= conn.execute("PRAGMA freelist_count").fetchone()[0]
        return {"file_bytes": files, "used_bytes": used * page}
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
    finally:
        engine.dispose()
    return {"database_bytes": int(size)}


def vacuum(url: str) -> None:
    """Give the space pruning freed back to the file system."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.split("///", 1)[1]) as conn:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the vacuumed pages are in the WAL
        return
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("VACUUM FULL"))
    finally:
        engine.dispose()


def prune_ended(bin_dir: Path, url: str) -> dict[str, Any]:
    """`armada-server prune` of every job that has ended (a retention of one second)."""
    time.sleep(1.5)
    done = subprocess.run(
        [str(bin_dir / "armada-server"), "prune", "--older-than", "1s", "--database-url", url],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def samples_page(title: str, about: str, runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The queued / running / ended share of the backlog over time, per database."""
    sections = []
    for label, result in runs:
        samples = result["over_time"]
        times = [s[0] for s in samples]
        total = result["submit"]["jobs"] or 1
        lines = [
            ("queued", [s[1] / total for s in samples], "#1f77b4", False),
            ("running", [s[2] / total for s in samples], "#d62728", False),
            ("ended", [s[3] / total for s in samples], "#2ca02c", False),
        ]
        sections.append(
            f"<section><h2>{escape(label)}</h2>"
            f"{chart('Share of the backlog, from the executor start', times, lines)}"
            f"<p>{escape(_summary(result))}</p></section>"
        )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><p>{escape(about)}</p>"
        f'<div class="runs">{"".join(sections)}</div></body></html>\n'
    )


def _summary(result: dict[str, Any]) -> str:
    rate = result["jobs_started_per_second"]
    started = f"{rate:,} started/s" if rate else "every job started within one sample"
    return (
        f"{result['submit']['jobs']:,} jobs submitted at {result['submit']['jobs_per_second']:,}"
        f"/s; first lease after {result['seconds_to_first_lease']} s; {started}; drained in "
        f"{result['seconds_to_drain']} s"
    )


def sample_until_drained(
    metrics: Any, http_port: int, jobs: int, timeout: float
) -> Iterator[tuple[float, float, float, float, dict[str, float]]]:
    """(seconds, queued, running, ended, all metrics) until nothing is left to run or
    `timeout`: every second, every 5 s past 100,000 jobs (a scrape counts them all)."""
    interval = 1 if jobs <= 100_000 else 5
    started = time.monotonic()
    last_log = 0.0
    while True:
        values = metrics(http_port)
        counts = job_counts(values)
        queued = counts.get("queued", 0) + counts.get("submitted", 0)
        running = sum(counts.get(s, 0) for s in ACTIVE)
        ended = sum(counts.get(s, 0) for s in ENDED)
        now = time.monotonic() - started
        yield round(now, 1), queued, running, ended, values
        if now - last_log >= 10:
            log(f"{now:.0f}s: {queued:,.0f} queued, {running:,.0f} running, {ended:,.0f} ended")
            last_log = now
        if (queued + running == 0 and ended >= jobs) or now > timeout:
            return
        time.sleep(interval)
