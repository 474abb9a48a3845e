"""Why a queued job waits, as GetJobDetails says it: the scheduler's reason (stored when it
changes), then where the job's queue stands against its fair share and the job's place in
its queue's line (added when read; the place: test_places_in_line.py).

The test speaks the executor protocol itself, as tests/server/test_scheduling_loop.py does.
"""

from __future__ import annotations

import dataclasses
import random
import time

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.scheduling import Reasons
from armada_server import shares
from armada_server.app import EmbeddedServer
from armada_server.storage.held_jobs import HeldJobs
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
    # A cycle writes its reasons, then its report, which the standing is read from (and kept
    # for a few seconds): wait for the standing of a cycle that weighed both queues.
    deadline = time.monotonic() + 20
    while not (
        "at 2.0x" in details(api, mine).scheduling_reason
        and details(api, theirs.job_id).scheduling_reason
    ):
        assert time.monotonic() < deadline, details(api, mine).scheduling_reason
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
    got, settled = changed_reasons(reasons, held)
    assert {r: sorted(ids) for r, ids in got.groups().items()} == {
        "full": ["blank", "unheld"],
        "lookback": ["other"],
    }
    # Once written, the held jobs are settled with their reason ("unheld" is not held).
    assert settled == {"full": {"same", "blank"}, "lookback": {"other"}, "gang": {"gang"}}


@dataclasses.dataclass(frozen=True)
class HeldRow:
    reason: str
    reason_cycle: int | None = None


@pytest.mark.parametrize("seed", range(6))
def test_settled_reasons_change_nothing_a_full_comparison_decides(seed: int) -> None:
    """Cycles of random changes through HeldJobs' protocol (rows read again with another
    stored reason, rows gone, jobs not held, reasons moving between groups, writes that fail,
    full reads): comparing only the unsettled jobs writes exactly what comparing all does."""
    rng = random.Random(seed)
    names = ["", "no room", "lookback", "gang waits", "over share"]
    held = HeldJobs()
    ids = [f"j{i:03}" for i in range(300)]
    held.queued = {j: HeldRow(rng.choice(names)) for j in ids}  # type: ignore[misc]
    compared_fewer = kept_whole = 0
    last: dict[str, str] = {}
    for cycle in range(40):
        reasons = Reasons()
        if last and rng.random() < 0.3:
            # A quiet cycle: nothing changed, the held jobs keep their reasons.
            for j, reason in last.items():
                if j in held.queued:
                    reasons[j] = reason
        else:
            # Some rows are read again (another stored reason), some leave, some come, or
            # everything is read again.
            if rng.random() < 0.1:
                held.forget()
                held.queued = {j: HeldRow(rng.choice(names)) for j in ids}  # type: ignore[misc]
            else:
                changed = rng.sample(ids, rng.randrange(0, 30))
                held.let_go(changed)
                for j in changed:
                    held.queued.pop(j, None)  # read again, or gone
                    if rng.random() < 0.8:
                        held.queued[j] = HeldRow(rng.choice(names))  # type: ignore[assignment]
            for j in ids:
                if rng.random() < 0.9:  # the rest were placed, or not in the snapshot
                    new = rng.random() < 0.3
                    reasons[j] = rng.choice(names[1:]) if new else held_reason(held, j)
        last = dict(reasons.items())
        settled = held.settled
        compared_fewer += settled is not None
        got, after = changed_reasons(reasons, held.queued, settled)
        want, want_after = changed_reasons(reasons, held.queued)
        assert got.groups() == want.groups(), cycle
        assert after == want_after, cycle
        kept_whole += sum(settled is not None and ids is settled.get(r) for r, ids in after.items())
        if rng.random() < 0.15:
            continue  # the write failed: nothing noted, nothing settled
        held.note_reasons(got, cycle, after)
        for reason, written in got.groups().items():
            assert all(held.queued[j].reason == reason for j in written if j in held.queued)
    assert compared_fewer > 20 and kept_whole > 0


def held_reason(held: HeldJobs, job_id: str) -> str:
    row = held.queued.get(job_id)
    return row.reason if row is not None and row.reason else "no room"
