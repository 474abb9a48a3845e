"""Why a queued job waits, as GetJobDetails says it: the scheduler's reason (stored when it
changes), then where the job's queue stands against its fair share and the job's place in
its queue's line (added when read; the place: test_places_in_line.py).

The test speaks the executor protocol itself, as tests/server/test_scheduling_loop.py does.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.scheduling import Reasons
from armada_server import shares
from armada_server.app import EmbeddedServer
from armada_server.storage.scheduling_writes import changed_reasons

from .conftest import Stubs
from .test_scheduling_loop import Executor, high, low, submit


@pytest.fixture
def server(executorless_server: EmbeddedServer) -> EmbeddedServer:
    return executorless_server


def details(api: Stubs, job_id: str) -> job_pb2.JobDetails:
    return api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[job_id])).job_details[job_id]


def test_a_waiting_job_says_why_and_where_its_queue_stands(
    api: Stubs, queue: str, server: EmbeddedServer
) -> None:
    api.queues.CreateQueue(submit_pb2.Queue(name="other", priority_factor=1))
    ex = Executor(api.channel, nodes=2, cpu="4", memory="8Gi")
    ex.sync()
    # q fills both nodes with jobs nothing may preempt.
    submit(api, high(cpu="4"), high(cpu="4"))
    ex.wait_leases(2)
    # Then each queue asks for a whole node more. q holds all 8 CPUs, twice its fair share of
    # half the cluster (other asks for half); other holds nothing.
    [theirs] = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(queue="other", job_set_id="s", job_request_items=[low(cpu="4")])
    ).job_response_items
    [mine] = submit(api, high(cpu="4"))
    deadline = time.monotonic() + 10
    while not (
        details(api, mine).scheduling_reason and details(api, theirs.job_id).scheduling_reason
    ):
        assert time.monotonic() < deadline, "the scheduler gave no reason"
        time.sleep(0.05)
    said = details(api, mine)
    assert said.state == submit_pb2.QUEUED
    assert said.scheduling_reason == (
        "0 of 2 matching nodes have 4 cpu, 1Gi memory free; queue q at 2.0x its fair share; "
        "1st in line of 1 queued"
    )
    assert details(api, theirs.job_id).scheduling_reason == (
        "0 of 2 matching nodes have 4 cpu, 1Gi memory free; queue other at 0.0x its fair "
        "share; 1st in line of 1 queued"
    )
    # Only the scheduler's part is stored: the queue's standing does not rewrite it each cycle.
    store = server.server.storage
    assert store is not None
    assert store.job_reads.scheduling_reasons([mine]) == {
        mine: "0 of 2 matching nodes have 4 cpu, 1Gi memory free"
    }
    ex.sync()
    assert len(ex.held) == 2


def test_fair_shares_are_read_once_per_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    reads: list[float] = []

    def compute(cycles, queues):  # type: ignore[no-untyped-def]
        reads.append(now[0])
        now[0] += 0.01  # reading takes 10ms
        return shares.Sample(now[0], {}, {})

    monkeypatch.setattr(shares, "compute", compute)
    recent = shares.RecentShares(None, None, max_age=5.0, clock=lambda: now[0])  # type: ignore[arg-type]
    first = recent.get()
    now[0] += 4.0
    assert recent.get() is first and reads == [100.0]
    now[0] += 1.0
    assert recent.get() is not first and len(reads) == 2


def test_a_queue_without_a_share_stands_at_zero() -> None:
    def queue(name: str, share: float, adjusted: float) -> shares.QueueShare:
        return shares.QueueShare(
            name=name,
            weight=1.0,
            cordoned=False,
            active=adjusted > 0,
            fair_share=adjusted,
            adjusted_fair_share=adjusted,
            share=share,
            demand=share,
        )

    sample = shares.Sample(
        0.0, {"cpu": 8000}, {"rich": queue("rich", 0.7, 0.5), "idle": queue("idle", 0.0, 0.0)}
    )
    assert shares.place_in_fair_share(sample, "rich") == "queue rich at 1.4x its fair share"
    assert shares.place_in_fair_share(sample, "idle") == "queue idle at 0.0x its fair share"
    assert shares.place_in_fair_share(sample, "gone") == "queue gone at 0.0x its fair share"


def test_a_cycle_writes_only_the_reasons_that_change() -> None:
    """Of a cycle's reasons, those of jobs whose held reason is another and of jobs not held
    (their reason is read before writing) are written; the others are left as they are."""

    @dataclasses.dataclass(frozen=True)
    class Held:
        reason: str
        reason_cycle: int | None = None

    held = {"same": Held("full"), "other": Held("full"), "blank": Held(""), "gang": Held("gang")}
    reasons = Reasons()
    reasons.add_many(["same", "unheld", "blank"], "full")
    reasons["other"] = "lookback"
    reasons["gang"] = "gang"
    got = changed_reasons(reasons, held)
    assert {r: sorted(ids) for r, ids in got.groups().items()} == {
        "full": ["blank", "unheld"],
        "lookback": ["other"],
    }
