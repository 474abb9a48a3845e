"""Fair share end to end: a real server, the simulated executor, shares measured from events.

Two queues, each with far more jobs than the cluster holds. Queue `heavy` has priority factor 1
and queue `light` priority factor 2; a queue's weight is 1 / priority factor, so the weights
are 1 and 1/2 and the cluster should be shared 2:1 (light gets half of what heavy gets).

The share is measured only from the job sets' events: a job holds its slot from its `leased`
event until its terminal event. Occupancy per queue is integrated over time from the event
timestamps, after the cluster has turned over twice (convergence), until the end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODES, CPUS_PER_NODE = 4, 6
CAPACITY = NODES * CPUS_PER_NODE  # one-cpu jobs
QUEUES = {"heavy": 1.0, "light": 2.0}  # priority factors: weights 1 and 1/2
JOBS_PER_QUEUE = 12 * CAPACITY  # far more than fit
DURATION = "1"  # seconds per simulated job
WARMUP_TURNOVERS = 2  # completions (in cluster capacities) before measuring
MEASURED_TURNOVERS = 6  # completions (in cluster capacities) measured

STARTS = ("leased",)
ENDS = ("succeeded", "failed", "cancelled", "preempted")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="simulated",
        database_url=f"sqlite:///{tmp_path / 'armada.db'}",
        nodes=(NodeGroup(NODES, str(CPUS_PER_NODE), f"{4 * CPUS_PER_NODE}Gi"),),
        scheduling_period=0.2,
        executor_sync_interval=0.2,
    )
    with EmbeddedServer(config) as running:
        yield running


def one_cpu_job() -> submit_pb2.JobSubmitRequestItem:
    spec = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["true"],
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                },
            }
        ]
    }
    return job_item(spec, annotations={ann.PREFIX + "simulatedDuration": DURATION})


def occupancy_changes(client: ArmadaClient, queue: str) -> list[tuple[float, int]]:
    """(time, +1/-1) for every lease and every end in the queue's job set, from its events."""
    changes = []
    for message in client.get_job_set_events(queue, "fair", watch=False):
        kind = message.message.WhichOneof("events")
        if kind in STARTS or kind in ENDS:
            event = getattr(message.message, kind)
            changes.append((event.created.ToNanoseconds() / 1e9, 1 if kind in STARTS else -1))
    return changes


def time_weighted_mean(changes: list[tuple[float, int]], start: float, end: float) -> float:
    """Mean of the step function `sum of changes so far` over [start, end]."""
    level, area, last = 0, 0.0, start
    for when, delta in sorted(changes):
        if when > end:
            break
        if when > start:
            area += level * (when - last)
            last = when
        level += delta
    area += level * (end - last)
    return area / (end - start)


def test_two_queues_converge_to_their_weighted_shares(server: EmbeddedServer) -> None:
    with ArmadaClient(server.address) as client:
        for name, factor in QUEUES.items():
            client.create_queue(submit_pb2.Queue(name=name, priority_factor=factor))
        ids = {
            name: client.submit_jobs(name, "fair", [one_cpu_job()] * JOBS_PER_QUEUE)
            for name in QUEUES
        }
        everything = [j for queue_ids in ids.values() for j in queue_ids]
        wanted = (WARMUP_TURNOVERS + MEASURED_TURNOVERS) * CAPACITY
        deadline = time.monotonic() + 300  # generous: the machine may be busy
        finished = 0
        while finished < wanted:
            assert time.monotonic() < deadline, f"only {finished} of {wanted} jobs finished"
            time.sleep(0.5)
            states = client.get_job_status(everything)
            finished = sum(1 for s in states.values() if s == submit_pb2.SUCCEEDED)
        changes = {name: occupancy_changes(client, name) for name in QUEUES}

    # Convergence: from the moment the WARMUP_TURNOVERS * CAPACITY-th job ended, to the moment
    # the last counted job ended.
    ends = sorted(when for name in QUEUES for when, delta in changes[name] if delta < 0)
    start, end = ends[WARMUP_TURNOVERS * CAPACITY - 1], ends[wanted - 1]
    assert end - start > 2.0, "the measured window is too short to mean anything"
    mean = {name: time_weighted_mean(changes[name], start, end) for name in QUEUES}
    total = sum(mean.values())
    ratio = mean["heavy"] / mean["light"]
    detail = (
        f"mean slots held: {mean} of {CAPACITY} over {end - start:.1f}s; "
        f"heavy:light = {ratio:.2f} (expected 2)"
    )
    # Weights 1 and 1/2: heavy should hold 2/3 of the cluster and light 1/3.
    assert 1.7 <= ratio <= 2.3, detail
    assert abs(mean["heavy"] / total - 2 / 3) < 0.05, detail
    # The cluster stays (nearly) full: jobs wait only for the next sync and cycle.
    assert total >= 0.6 * CAPACITY, detail
    # Converged, not just right on average: each half of the window has the same split.
    middle = (start + end) / 2
    for lo, hi in ((start, middle), (middle, end)):
        half = {name: time_weighted_mean(changes[name], lo, hi) for name in QUEUES}
        assert half["light"] > 0 and 1.6 <= half["heavy"] / half["light"] <= 2.4, (
            f"{half} in [{lo - start:.1f}s, {hi - start:.1f}s]; {detail}"
        )
