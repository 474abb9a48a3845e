"""The `scheduling:` block of the server's config file, end to end.

Each option is set in YAML, the server is started from that file, and the effect is observed
through the gRPC API while the test speaks the executor protocol (as in
test_scheduling_loop.py). Orderings and counts are observed, never durations: a contest
between queues is set up with the executor's nodes unschedulable, so that the cycle that
decides it sees every competitor queued.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from armada_core.api import (
    event_pb2,
    event_pb2_grpc,
    executor_pb2,
    job_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_core.scheduling import reasons
from armada_server.app import EmbeddedServer
from armada_server.config import (
    ConfigError,
    SchedulingSettings,
    build,
    load_file,
    reload_scheduling,
)

from ..jobs.factories import container, item
from .conftest import Stubs
from .test_crash_safety import LISTENING, server_command
from .test_scheduling_loop import Executor

BASE = """
port: 0
http_port: null
executor: none
database_url: {db}
lease_timeout: 60
scheduling_period: 0.1
config_reload_interval: {reload}
priority_classes:
  - {{name: low, priority: 0, preemptible: true}}
  - {{name: high, priority: 10}}
default_priority_class: low
"""


def config_text(
    tmp_path: Path, scheduling: str = "", reload: str = "0.1", database_url: str | None = None
) -> str:
    db = database_url or f"sqlite:///{tmp_path / 'armada.db'}"
    text = BASE.format(db=db, reload=reload)
    return text + (f"scheduling:\n{scheduling}" if scheduling.strip() else "")


def stubs(channel: grpc.Channel) -> Stubs:
    return Stubs(
        channel,
        submit_pb2_grpc.SubmitStub(channel),
        submit_pb2_grpc.QueueServiceStub(channel),
        submit_pb2_grpc.RetryPolicyServiceStub(channel),
        event_pb2_grpc.EventStub(channel),
        job_pb2_grpc.JobsStub(channel),
    )


@contextmanager
def serving(
    tmp_path: Path,
    scheduling: str = "",
    queues: tuple[str, ...] = ("a", "b"),
    database_url: str | None = None,
) -> Iterator[tuple[EmbeddedServer, Stubs, Path]]:
    """A server started from a config file with this `scheduling:` block (indented), on
    `database_url` (default: SQLite in `tmp_path`)."""
    path = tmp_path / "server.yaml"
    path.write_text(config_text(tmp_path, scheduling, database_url=database_url))
    with (
        EmbeddedServer(build(path), config_file=path) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        api = stubs(channel)
        for name in queues:
            api.queues.CreateQueue(submit_pb2.Queue(name=name, priority_factor=1))
        yield server, api, path


@contextmanager
def started_again(
    tmp_path: Path, scheduling: str, database_url: str, held: dict[str, executor_pb2.Lease]
) -> Iterator[tuple[EmbeddedServer, Stubs, Executor]]:
    """The server started again on the same database (a new leader, its memory empty), five
    cycles in, with the executor (one node of 8 CPUs) syncing on with the runs it holds."""
    with serving(tmp_path, scheduling, queues=(), database_url=database_url) as (server, api, _):
        again = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        again.held = held
        loop = server.server.scheduler
        start = loop.cycles
        until(
            lambda: again.sync() is not None and loop.cycles >= start + 5,
            "five cycles of the new leader",
        )
        yield server, api, again


def job(
    cpu: str = "1", memory: str = "1Gi", pc: str = "low", lifetime: int | None = None
) -> submit_pb2.JobSubmitRequestItem:
    pod = {"containers": [container(cpu=cpu, memory=memory)], "priorityClassName": pc}
    if lifetime is None:
        return item(pod)
    return item(pod, annotations={"armadaproject.io/lifetimeSeconds": str(lifetime)})


def submit(api: Stubs, queue: str, *items: submit_pb2.JobSubmitRequestItem) -> list[str]:
    response = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(queue=queue, job_set_id="s", job_request_items=list(items))
    )
    return [i.job_id for i in response.job_response_items]


def reason(api: Stubs, job_id: str) -> str:
    return (
        api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[job_id]))
        .job_details[job_id]
        .scheduling_reason
    )


def until(condition: Callable[[], object], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def scheduler_part(text: str) -> str:
    """A scheduling reason without what GetJobDetails adds to it ("; queue q at 1.0x its fair
    share"): the scheduler's own words."""
    return text.partition("; queue ")[0]


def wait_reasons(api: Stubs, job_ids: list[str], expected: str | None = None) -> None:
    """Until every job carries a scheduling reason (this one, when given)."""
    until(
        lambda: all(
            reason(api, j) if expected is None else scheduler_part(reason(api, j)) == expected
            for j in job_ids
        ),
        f"reasons {expected!r} on {job_ids}",
    )


def leased_jobs(ex: Executor) -> set[str]:
    return {lease.job.id for lease in ex.held.values()}


def leases_per_cycle(api: Stubs, queue: str) -> list[int]:
    """Leases grouped by the cycle that made them: a cycle stamps its events with its time."""
    stream = api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue=queue, id="s"))
    cycles = Counter(
        m.message.leased.created.ToNanoseconds()
        for m in stream
        if m.message.WhichOneof("events") == "leased"
    )
    return [cycles[t] for t in sorted(cycles)]


def contest(
    api: Stubs, ex: Executor, jobs: dict[str, list[submit_pb2.JobSubmitRequestItem]]
) -> dict[str, list[str]]:
    """Submit every queue's jobs while the nodes are unschedulable, then open the nodes:
    the first cycle that can place anything sees them all queued."""
    for node in ex.nodes:
        node.unschedulable = True
    ex.sync()
    ids = {queue: submit(api, queue, *items) for queue, items in jobs.items()}
    for node in ex.nodes:
        node.unschedulable = False
    ex.sync()
    return ids


def running(ex: Executor) -> None:
    for lease in list(ex.held.values()):
        ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))


# --- one test per option -------------------------------------------------------------------


def test_max_jobs_per_cycle_leases_at_most_that_many_per_cycle(tmp_path: Path) -> None:
    with serving(tmp_path, "  max_jobs_per_cycle: 2\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        ids = submit(api, "a", *[job() for _ in range(5)])
        ex.wait_leases(5)
        assert leased_jobs(ex) == set(ids)
        assert leases_per_cycle(api, "a") == [2, 2, 1]


def test_max_fraction_per_cycle_caps_what_new_jobs_take_in_a_cycle(tmp_path: Path) -> None:
    # 8 CPUs in all: a quarter is two 1-CPU jobs per cycle.
    with serving(tmp_path, "  max_fraction_per_cycle: {cpu: 0.25}\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=2, cpu="4", memory="16Gi")
        ex.sync()
        submit(api, "a", *[job() for _ in range(5)])
        ex.wait_leases(5)
        assert leases_per_cycle(api, "a") == [2, 2, 1]


def test_per_class_caps_hold_each_queue_to_its_fraction_of_the_pool(tmp_path: Path) -> None:
    # 8 CPUs: each queue may hold 2 CPUs with jobs of class low; class high is not capped.
    caps = "  max_fraction_per_queue:\n    low: {cpu: 0.25}\n"
    with serving(tmp_path, caps) as (_, api, _path):
        ex = Executor(api.channel, nodes=2, cpu="4", memory="16Gi")
        ex.sync()
        a_low = submit(api, "a", *[job() for _ in range(4)])
        [a_high] = submit(api, "a", job(pc="high"))
        b_low = submit(api, "b", *[job() for _ in range(4)])
        ex.wait_leases(5)
        held = leased_jobs(ex)
        assert a_high in held
        assert len(held & set(a_low)) == 2 and len(held & set(b_low)) == 2
        waiting = [j for j in a_low + b_low if j not in held]
        wait_reasons(api, waiting, reasons.queue_class_limit("low"))
        ex.sync()
        assert len(ex.held) == 5


@pytest.mark.parametrize(("fraction", "preempted"), [("2.0", 0), ("1.0", 2), ("null", 2)])
def test_protected_fraction_decides_whether_a_queue_above_its_share_is_preempted(
    tmp_path: Path, fraction: str, preempted: int
) -> None:
    # Queue a holds the whole node: twice its fair share once b has work. Protected up to
    # twice its share, it keeps everything; otherwise it gives b half the node.
    with serving(tmp_path, f"  protected_fraction: {fraction}\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="16Gi")
        ex.sync()
        submit(api, "a", *[job() for _ in range(4)])
        ex.wait_leases(4)
        running(ex)
        b = submit(api, "b", *[job() for _ in range(4)])
        if preempted:
            until(lambda: ex.sync() is not None and len(ex.stops) >= preempted, "preemptions")
            assert len(ex.stops) == preempted and all(s.preempt for s in ex.stops)
        else:
            # The cycle that would preempt ran: b's jobs found no room on the one node.
            wait_reasons(api, b, "0 of 1 matching node has 1 cpu, 1Gi memory free")
            ex.sync()
            assert ex.stops == []


@pytest.mark.parametrize(("multipliers", "winner"), [("{memory: 2}", "a"), ("{cpu: 2}", "b")])
def test_resource_multipliers_change_which_queue_wins(
    tmp_path: Path, multipliers: str, winner: str
) -> None:
    # a holds CPU, b memory, at equal cost; the next job fits once. Weighting memory makes b
    # the richer queue, weighting CPU makes a the richer one.
    with serving(tmp_path, f"  resource_multipliers: {multipliers}\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        submit(api, "a", job(cpu="4", memory="100Mi", pc="high"))
        submit(api, "b", job(cpu="100m", memory="8Gi", pc="high"))
        ex.wait_leases(2)
        ids = contest(api, ex, {q: [job(cpu="3", memory="6Gi", pc="high")] for q in "ab"})
        ex.wait_leases(3)
        loser = "b" if winner == "a" else "a"
        assert ids[winner][0] in leased_jobs(ex)
        wait_reasons(api, ids[loser], "0 of 1 matching node has 3 cpu, 6Gi memory free")
        ex.sync()
        assert ids[loser][0] not in leased_jobs(ex)


@pytest.mark.parametrize(("half_life", "a_share"), [("3600", 0), (None, 2), ("0.001", 2)])
def test_usage_half_life_puts_a_queue_that_used_a_lot_recently_behind(
    tmp_path: Path, half_life: str | None, a_share: int
) -> None:
    block = f"  usage_half_life: {half_life}\n" if half_life else ""
    with serving(tmp_path, block) as (server, api, path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
        ex.sync()
        submit(api, "a", *[job(pc="high") for _ in range(4)])  # a uses the whole node...
        for lease in ex.wait_leases(4):
            ex.sync(ex.update(lease, succeeded=executor_pb2.RunUpdate.Succeeded()))
        assert ex.held == {}  # ...and is done: a and b now both use nothing
        ids = contest(api, ex, {q: [job(pc="high") for _ in range(4)] for q in "ab"})
        ex.wait_leases(4)
        held = leased_jobs(ex)
        # Without decayed usage the two alternate (a first, by name); with it, b takes the
        # node: a still carries nearly its whole past usage after an hour's half-life. With a
        # millisecond's, a's past usage is gone by the time the nodes open.
        assert len(held & set(ids["a"])) == a_share
        assert len(held & set(ids["b"])) == 4 - a_share
        loop = server.server.scheduler
        if half_life == "3600":
            assert loop.carried.usage["a"] > 0.9
            # Reloaded without the option, fairness is on current usage only: no queue
            # carries a past from the next cycle on.
            path.write_text(config_text(tmp_path))
            until(lambda: loop.carried.usage == {}, "decayed usage to be dropped")


def test_a_new_leader_carries_on_with_decayed_usage(tmp_path: Path, database_url: str) -> None:
    """Queue a used the whole node, then the server stopped: the one started again (a new
    leader) reads a's decayed usage back, so b takes the node when both ask for it."""
    block = "  usage_half_life: 3600\n"
    with serving(tmp_path, block, database_url=database_url) as (server, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
        ex.sync()
        submit(api, "a", *[job(pc="high") for _ in range(4)])
        for lease in ex.wait_leases(4):
            ex.sync(ex.update(lease, succeeded=executor_pb2.RunUpdate.Succeeded()))
        until(lambda: "a" in server.server.storage.carryover.read(), "a's usage to be kept")
    with serving(tmp_path, block, queues=(), database_url=database_url) as (server, api, _):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="8Gi")
        ex.sync()
        ids = contest(api, ex, {q: [job(pc="high") for _ in range(4)] for q in "ab"})
        ex.wait_leases(4)
        assert leased_jobs(ex) == set(ids["b"])
        assert server.server.scheduler.carried.usage["a"] > 0.9


@pytest.mark.parametrize(
    ("order", "node"), [("[cpu, memory]", "e1-n0"), ("[memory, cpu]", "e1-n1")]
)
def test_resource_names_decide_the_best_fit_order(tmp_path: Path, order: str, node: str) -> None:
    # n0 has less CPU free, n1 less memory: best fit takes the node with the least of the
    # first resource.
    with serving(tmp_path, f"  resource_names: {order}\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=2)
        ex.nodes[0].allocatable.update({"cpu": "4", "memory": "32Gi"})
        ex.nodes[1].allocatable.update({"cpu": "16", "memory": "8Gi"})
        ex.sync()
        [job_id] = submit(api, "a", job())
        [lease] = ex.wait_leases(1)
        assert (lease.job.id, lease.node) == (job_id, node)


def test_max_queue_lookback_leaves_jobs_beyond_it_unattempted(tmp_path: Path) -> None:
    # Two jobs that fit nowhere head queue a: with a lookback of 2, the small job behind them
    # is never attempted, while queue b's job is leased.
    with serving(tmp_path, "  max_queue_lookback: 2\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="16Gi")
        # Submitted before the executor connects: jobs that fit no node are refused after.
        huge = submit(api, "a", job(cpu="100"), job(cpu="100"))
        ex.sync()
        wait_reasons(api, huge, reasons.TOO_LARGE)
        [small] = submit(api, "a", job())
        [other] = submit(api, "b", job())
        ex.wait_leases(1)
        wait_reasons(api, [small], reasons.queue_lookback(2))
        ex.sync()
        assert leased_jobs(ex) == {other}


def test_max_queue_lookback_considers_that_many_jobs_per_cycle(tmp_path: Path) -> None:
    with serving(tmp_path, "  max_queue_lookback: 2\n") as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        submit(api, "a", *[job() for _ in range(5)])
        ex.wait_leases(5)
        assert leases_per_cycle(api, "a") == [2, 2, 1]


def test_scheduling_rate_and_burst_limit_new_jobs_of_all_queues(tmp_path: Path) -> None:
    # A bucket of 3 tokens that refills one token every 1000 seconds: the first cycle leases
    # 3 jobs of the two queues together, later cycles none while the test runs.
    block = "  scheduling_rate: 0.001\n  scheduling_burst: 3\n"
    with serving(tmp_path, block) as (server, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        ids = contest(api, ex, {q: [job() for _ in range(3)] for q in "ab"})
        ex.wait_leases(3)
        waiting = [j for j in ids["a"] + ids["b"] if j not in leased_jobs(ex)]
        assert len(waiting) == 3
        wait_reasons(api, waiting, reasons.GLOBAL_RATE_LIMIT)
        cycles = server.server.scheduler.cycles
        until(lambda: server.server.scheduler.cycles >= cycles + 3, "three more cycles")
        ex.sync()
        assert len(ex.held) == 3
        assert leases_per_cycle(api, "a") + leases_per_cycle(api, "b") in ([2, 1], [1, 2])


def test_a_new_leader_carries_on_with_the_rate_limits_buckets(
    tmp_path: Path, database_url: str
) -> None:
    """The buckets emptied by one server stay empty for the one started again (a new
    leader): the jobs held back by the rate limits are still held back."""
    block = (
        "  scheduling_rate: 0.001\n  scheduling_burst: 3\n"
        "  queue_scheduling_rate: 0.001\n  queue_scheduling_burst: 2\n"
    )
    with serving(tmp_path, block, database_url=database_url) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        ids = contest(api, ex, {q: [job() for _ in range(3)] for q in "ab"})
        ex.wait_leases(3)
        waiting = [j for j in ids["a"] + ids["b"] if j not in leased_jobs(ex)]
        wait_reasons(api, waiting)
        held = dict(ex.held)
    with started_again(tmp_path, block, database_url, held) as (_, api, again):
        assert len(again.held) == 3
        assert {scheduler_part(reason(api, j)) for j in waiting} <= {
            reasons.GLOBAL_RATE_LIMIT,
            reasons.QUEUE_RATE_LIMIT,
        }


def test_queue_scheduling_rate_and_burst_limit_each_queue(tmp_path: Path) -> None:
    block = "  queue_scheduling_rate: 0.001\n  queue_scheduling_burst: 2\n"
    with serving(tmp_path, block) as (server, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        ids = contest(api, ex, {q: [job() for _ in range(3)] for q in "ab"})
        ex.wait_leases(4)
        held = leased_jobs(ex)
        assert len(held & set(ids["a"])) == 2 and len(held & set(ids["b"])) == 2
        waiting = [j for j in ids["a"] + ids["b"] if j not in held]
        wait_reasons(api, waiting, reasons.QUEUE_RATE_LIMIT)
        cycles = server.server.scheduler.cycles
        until(lambda: server.server.scheduler.cycles >= cycles + 3, "three more cycles")
        ex.sync()
        assert len(ex.held) == 4


def test_non_preemptible_overshoot_caps_a_queues_jobs_of_infinite_lifetime(tmp_path: Path) -> None:
    # Class high is not preemptible and the jobs have no lifetime: once leased they stay.
    # Without the option a takes the whole node by urgency. With an overshoot of 0, a's
    # share of such jobs stops at its fair share, half the node, and b's job gets in.
    with serving(tmp_path, "  non_preemptible_overshoot: 0\n") as (_, api, path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="16Gi")
        ex.sync()
        ids = contest(api, ex, {"a": [job(pc="high") for _ in range(4)], "b": [job()]})
        ex.wait_leases(3)
        held = leased_jobs(ex)
        assert len(held & set(ids["a"])) == 2 and ids["b"][0] in held
        waiting = [j for j in ids["a"] if j not in held]
        wait_reasons(api, waiting, reasons.NON_PREEMPTIBLE_OVERSHOOT)
        ex.sync()
        assert len(ex.held) == 3

        # Reloaded to 50% above the fair share: a may hold three of the four CPUs.
        path.write_text(config_text(tmp_path, "  non_preemptible_overshoot: 0.5\n"))
        ex.wait_leases(4)
        [last] = [j for j in ids["a"] if j not in leased_jobs(ex)]
        wait_reasons(api, [last], reasons.NON_PREEMPTIBLE_OVERSHOOT)
        ex.sync()
        assert len(ex.held) == 4


def test_lifetime_limits_count_all_queues_limits_a_queue_alone(
    tmp_path: Path, database_url: str
) -> None:
    # Queue b exists but has no jobs. Counting every queue, a's fair share is half the node
    # even alone: with an overshoot of 0 two of its four jobs that are never preempted wait.
    block = "  non_preemptible_overshoot: 0\n  lifetime_limits_count_all_queues: true\n"
    with serving(tmp_path, block, database_url=database_url) as (_, api, path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="16Gi")
        ex.sync()
        ids = contest(api, ex, {"a": [job(pc="high") for _ in range(4)]})
        ex.wait_leases(2)
        waiting = [j for j in ids["a"] if j not in leased_jobs(ex)]
        assert len(waiting) == 2
        wait_reasons(api, waiting, reasons.NON_PREEMPTIBLE_OVERSHOOT)
        ex.sync()
        assert len(ex.held) == 2

        # Reloaded with the default (active queues only): a alone has the whole node.
        path.write_text(
            config_text(tmp_path, "  non_preemptible_overshoot: 0\n", database_url=database_url)
        )
        ex.wait_leases(4)
        assert leased_jobs(ex) == set(ids["a"])


def charges(server: EmbeddedServer) -> dict[str, int]:
    """What running jobs hold of their queues' excess-flow budgets, as the scheduler reads it
    from storage (thousandths of a resource-minute)."""
    state = server.server.storage.scheduling_reads.scheduling_state(executor_timeout=3600)
    return {j.id: j.excess_flow for j in state.running if j.excess_flow}


def test_excess_flow_budget_limits_finite_lifetime_jobs_above_the_fair_share(
    tmp_path: Path,
) -> None:
    # Eight CPUs, a's fair share four. Each of a's jobs runs at least ten minutes on one CPU
    # (class high with a lifetime): 10 resource-minutes of the budget once a is above its
    # share. A budget of 15 lets one such job through.
    with serving(tmp_path, "  excess_flow_budget: 15\n") as (server, api, path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        ids = contest(
            api, ex, {"a": [job(pc="high", lifetime=600) for _ in range(6)], "b": [job()]}
        )
        ex.wait_leases(6)
        held = leased_jobs(ex)
        assert len(held & set(ids["a"])) == 5 and ids["b"][0] in held
        [sixth] = [j for j in ids["a"] if j not in held]
        wait_reasons(api, [sixth], reasons.EXCESS_FLOW_BUDGET)
        assert list(charges(server).values()) == [10_000]  # thousandths of a minute

        # Reloaded with room for two such jobs: the sixth is leased without a restart.
        path.write_text(config_text(tmp_path, "  excess_flow_budget: 25\n"))
        ex.wait_leases(7)
        charged = sorted(charges(server))
        assert len(charged) == 2 and sixth in charged

        # A seventh needs 10 more than the 20 in use: once a charged job has left, its share
        # of the budget is back.
        [seventh] = submit(api, "a", job(pc="high", lifetime=600))
        wait_reasons(api, [seventh], reasons.EXCESS_FLOW_BUDGET)
        done = ex.lease_of(charged[0])
        ex.sync(ex.update(done, succeeded=executor_pb2.RunUpdate.Succeeded()))
        until(lambda: ex.sync() is not None and seventh in leased_jobs(ex), "the seventh lease")
        until(lambda: set(charges(server)) == {charged[1], seventh}, "the charges to move")


def test_a_new_leader_knows_what_each_budget_has_left(tmp_path: Path, database_url: str) -> None:
    """The charges live on the runs in storage: a server started again (a new leader, its
    memory empty) still holds the sixth job back, as the first one did."""
    block = "  excess_flow_budget: 15\n"
    with serving(tmp_path, block, database_url=database_url) as (server, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="16Gi")
        ex.sync()
        ids = contest(
            api, ex, {"a": [job(pc="high", lifetime=600) for _ in range(6)], "b": [job()]}
        )
        ex.wait_leases(6)
        [sixth] = [j for j in ids["a"] if j not in leased_jobs(ex)]
        wait_reasons(api, [sixth], reasons.EXCESS_FLOW_BUDGET)
        held = dict(ex.held)
    with started_again(tmp_path, block, database_url, held) as (server, api, again):
        assert sixth not in leased_jobs(again) and len(again.held) == 6
        assert scheduler_part(reason(api, sixth)) == reasons.EXCESS_FLOW_BUDGET
        assert list(charges(server).values()) == [10_000]


def test_excess_flow_weights_price_resources_in_cpus(tmp_path: Path) -> None:
    # With memory at a quarter of a CPU per GiB, a 1-CPU, 4Gi job for ten minutes costs 20
    # resource-minutes above the fair share: more than the budget of 15.
    block = "  excess_flow_budget: 15\n  excess_flow_weights: {memory: 0.25}\n"
    with serving(tmp_path, block) as (_, api, _path):
        ex = Executor(api.channel, nodes=1, cpu="8", memory="64Gi")
        ex.sync()
        ids = contest(
            api,
            ex,
            {"a": [job(memory="4Gi", pc="high", lifetime=600) for _ in range(5)], "b": [job()]},
        )
        ex.wait_leases(5)
        held = leased_jobs(ex)
        assert len(held & set(ids["a"])) == 4 and ids["b"][0] in held
        wait_reasons(api, [j for j in ids["a"] if j not in held], reasons.EXCESS_FLOW_BUDGET)


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("  protected_fraction: -1\n", "scheduling.protected_fraction: must be at least 0, got -1"),
        (
            "  protected_fraction: lots\n",
            "scheduling.protected_fraction: must be a number, got 'lots'",
        ),
        (
            "  max_jobs_per_cycle: 1.5\n",
            "scheduling.max_jobs_per_cycle: must be a whole number at least 0, got 1.5",
        ),
        (
            "  max_jobs_per_cycle: -2\n",
            "scheduling.max_jobs_per_cycle: must be a whole number at least 0, got -2",
        ),
        (
            "  max_fraction_per_cycle: {cpu: 2}\n",
            "scheduling.max_fraction_per_cycle.cpu: must be between 0 and 1, got 2",
        ),
        (
            "  max_fraction_per_cycle: 0.5\n",
            "scheduling.max_fraction_per_cycle: must be a mapping of resource names to numbers",
        ),
        (
            "  max_fraction_per_queue: {low: {cpu: 3}}\n",
            "scheduling.max_fraction_per_queue.low.cpu: must be between 0 and 1, got 3",
        ),
        (
            "  max_fraction_per_queue: {nope: {cpu: 0.5}}\n",
            "scheduling.max_fraction_per_queue.nope: 'nope' is not one of the priority classes",
        ),
        (
            "  resource_multipliers: {nvidia.com/gpu: -1}\n",
            "scheduling.resource_multipliers.nvidia.com/gpu: must be at least 0, got -1",
        ),
        ("  usage_half_life: 0\n", "scheduling.usage_half_life: must be above 0, got 0"),
        ("  resource_names: [cpu, cpu]\n", "scheduling.resource_names: names must be unique"),
        ("  resource_names: cpu\n", "scheduling.resource_names: must be a list"),
        (
            "  max_queue_lookback: 0\n",
            "scheduling.max_queue_lookback: must be a whole number at least 1, got 0",
        ),
        ("  scheduling_rate: 0\n", "scheduling.scheduling_rate: must be above 0, got 0"),
        (
            "  scheduling_burst: 1.5\n",
            "scheduling.scheduling_burst: must be a whole number at least 1, got 1.5",
        ),
        (
            "  queue_scheduling_rate: fast\n",
            "scheduling.queue_scheduling_rate: must be a number, got 'fast'",
        ),
        (
            "  queue_scheduling_burst: 0\n",
            "scheduling.queue_scheduling_burst: must be a whole number at least 1, got 0",
        ),
        (
            "  topology_levels: topology/rack\n",
            "scheduling.topology_levels: must be a list of node labels, widest first",
        ),
        (
            "  topology_levels: [topology/rack, topology/rack]\n",
            "scheduling.topology_levels: levels must be unique",
        ),
        (
            "  topology_levels: [kubernetes.io/hostname, topology/rack]\n",
            "scheduling.topology_levels: kubernetes.io/hostname is the node itself, so it can only "
            "be the last (narrowest) level",
        ),
        (
            "  topology_levels: ['rack one']\n",
            "scheduling.topology_levels: 'rack one' is not a valid node label name",
        ),
        (
            "  non_preemptible_overshoot: -0.1\n",
            "scheduling.non_preemptible_overshoot: must be at least 0, got -0.1",
        ),
        (
            "  excess_flow_budget: plenty\n",
            "scheduling.excess_flow_budget: must be a number, got 'plenty'",
        ),
        (
            "  excess_flow_weights: {memory: -1}\n",
            "scheduling.excess_flow_weights.memory: must be at least 0, got -1",
        ),
        (
            "  excess_flow_weights: 2\n",
            "scheduling.excess_flow_weights: must be a mapping of resource names to numbers",
        ),
        (
            "  lifetime_limits_count_all_queues: yes please\n",
            "scheduling.lifetime_limits_count_all_queues: must be true or false, got 'yes please'",
        ),
        ("  colour: blue\n", "scheduling.colour: unknown setting"),
        ("  - protected_fraction\n", "scheduling: must be a mapping"),
    ],
)
def test_invalid_values_are_refused_naming_the_key(
    tmp_path: Path, block: str, message: str
) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(config_text(tmp_path, block))
    with pytest.raises(ConfigError) as raised:
        build(path)
    assert message in str(raised.value)


def test_config_reload_interval_must_be_positive(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(config_text(tmp_path, reload="0"))
    with pytest.raises(ConfigError, match="config_reload_interval: must be above 0, got 0"):
        build(path)


def test_every_option_reaches_the_scheduler(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(
        config_text(
            tmp_path,
            """\
  protected_fraction: 0.5
  max_jobs_per_cycle: 100
  max-fraction-per-cycle: {cpu: 0.5}
  max_fraction_per_queue: {low: {cpu: 0.25, memory: 0.5}}
  resource_multipliers: {nvidia.com/gpu: 4}
  usage_half_life: 600
  resource_names: [memory, cpu]
  max_queue_lookback: 1000
  scheduling_rate: 50
  scheduling_burst: 200
  queue-scheduling-rate: 2.5
  queue_scheduling_burst: 10
  topology_levels: [topology/block, topology/rack]
  non_preemptible_overshoot: 0.2
  excess-flow-budget: 600
  excess_flow_weights: {nvidia.com/gpu: 8, memory: 0.25}
  lifetime-limits-count-all-queues: true
""",
        )
    )
    settings = build(path).scheduling
    assert settings == SchedulingSettings(
        protected_fraction=0.5,
        max_jobs_per_cycle=100,
        max_fraction_per_cycle={"cpu": 0.5},
        max_fraction_per_queue={"low": {"cpu": 0.25, "memory": 0.5}},
        resource_multipliers={"nvidia.com/gpu": 4.0},
        usage_half_life=600.0,
        resource_names=("memory", "cpu"),
        max_queue_lookback=1000,
        scheduling_rate=50,
        scheduling_burst=200,
        queue_scheduling_rate=2.5,
        queue_scheduling_burst=10,
        topology_levels=("topology/block", "topology/rack"),
        non_preemptible_overshoot=0.2,
        excess_flow_budget=600,
        excess_flow_weights={"nvidia.com/gpu": 8, "memory": 0.25},
        lifetime_limits_count_all_queues=True,
    )
    model = settings.model()
    assert (
        model.protected_fraction,
        model.max_jobs_per_cycle,
        model.usage_half_life,
        model.resource_names,
        dict(model.resource_multipliers),
    ) == (0.5, 100, 600.0, ("memory", "cpu"), {"nvidia.com/gpu": 4.0})
    assert (
        model.max_queue_lookback,
        model.scheduling_rate,
        model.scheduling_burst,
        model.queue_scheduling_rate,
        model.queue_scheduling_burst,
    ) == (1000, 50, 200, 2.5, 10)
    assert model.topology_levels == ("topology/block", "topology/rack")
    assert (
        model.non_preemptible_overshoot,
        model.excess_flow_budget,
        dict(model.excess_flow_weights),
    ) == (0.2, 600.0, {"nvidia.com/gpu": 8.0, "memory": 0.25})
    assert model.lifetime_limits_count_all_queues is True
    assert build(tmp_path / "server.yaml").config_reload_interval == 0.1


# --- reloading ----------------------------------------------------------------------------


def test_changing_the_file_changes_scheduling_without_a_restart(tmp_path: Path) -> None:
    with serving(tmp_path, "  max_fraction_per_queue: {low: {cpu: 0.25}}\n") as (server, api, path):
        ex = Executor(api.channel, nodes=1, cpu="4", memory="16Gi")
        ex.sync()
        ids = submit(api, "a", *[job() for _ in range(4)])
        [first] = ex.wait_leases(1)
        waiting = [j for j in ids if j != first.job.id]
        wait_reasons(api, waiting, reasons.queue_class_limit("low"))

        # An invalid file is refused with the key named; the running configuration stays.
        path.write_text(config_text(tmp_path, "  max_fraction_per_queue: {low: {cpu: 3}}\n"))
        until(lambda: server.server.config_error, "the invalid file to be refused")
        assert "scheduling.max_fraction_per_queue.low.cpu: must be between 0 and 1, got 3" in (
            server.server.config_error
        )
        wait_reasons(api, waiting, reasons.queue_class_limit("low"))
        ex.sync()
        assert len(ex.held) == 1

        # A valid change applies to the next cycles.
        path.write_text(config_text(tmp_path, "  max_fraction_per_queue: {low: {cpu: 0.75}}\n"))
        ex.wait_leases(3)
        [last] = [j for j in ids if j not in leased_jobs(ex)]
        wait_reasons(api, [last], reasons.queue_class_limit("low"))
        assert server.server.config_error is None

        # Removing the block restores the defaults.
        path.write_text(config_text(tmp_path))
        ex.wait_leases(4)


def test_a_reload_names_the_settings_only_a_restart_applies(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(config_text(tmp_path))
    before, config = load_file(path), build(path)
    path.write_text(
        config_text(tmp_path, "  max_jobs_per_cycle: 3\n").replace(
            "lease_timeout: 60", "lease_timeout: 90"
        )
    )
    settings, changed = reload_scheduling(path, config, before)
    assert settings == SchedulingSettings(max_jobs_per_cycle=3)
    assert changed == ["lease_timeout"]


class ServerProcess:
    """`armada-server --config FILE` as a child process."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [*server_command(), "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self.proc.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(60)
        match = LISTENING.search(line[0]) if line else None
        if match is None:
            self.close()
            raise AssertionError(f"armada-server did not start: {line!r}, see {log}")
        self.address = f"{match.group(1)}:{match.group(2)}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


def test_sighup_reloads_a_running_server(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    # No polling: only SIGHUP can make the change take effect.
    caps = "  max_fraction_per_queue: {{low: {{cpu: {}}}}}\n"
    path.write_text(config_text(tmp_path, caps.format(0.25), reload="null"))
    server = ServerProcess(path, tmp_path / "server.log")
    try:
        with grpc.insecure_channel(server.address) as channel:
            api = stubs(channel)
            api.queues.CreateQueue(submit_pb2.Queue(name="a", priority_factor=1))
            ex = Executor(channel, nodes=1, cpu="4", memory="16Gi")
            ex.sync()
            ids = submit(api, "a", *[job() for _ in range(4)])
            [first] = ex.wait_leases(1)
            waiting = [j for j in ids if j != first.job.id]
            wait_reasons(api, waiting, reasons.queue_class_limit("low"))

            path.write_text(config_text(tmp_path, caps.format(3), reload="null"))
            os.kill(server.proc.pid, signal.SIGHUP)  # invalid: logged, nothing changes
            until(
                lambda: (
                    "scheduling.max_fraction_per_queue.low.cpu"
                    in (tmp_path / "server.log").read_text()
                ),
                "the refusal in the log",
            )
            wait_reasons(api, waiting, reasons.queue_class_limit("low"))
            ex.sync()
            assert len(ex.held) == 1 and server.proc.poll() is None

            path.write_text(config_text(tmp_path, caps.format(1.0), reload="null"))
            os.kill(server.proc.pid, signal.SIGHUP)
            ex.wait_leases(4)
            assert leased_jobs(ex) == set(ids)
    finally:
        server.close()
