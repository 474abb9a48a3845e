"""/metrics after a known story, on a real server with its simulated executor, on each
database backend: the numbers of jobs that ended by outcome, preemptions by kind, the queues'
shares, the nodes, the leader; and the watch lag that counts only the live tail."""

from __future__ import annotations

import itertools
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_server.app import EmbeddedServer
from armada_server.executors.simulated import DURATION, FAILURE

from .test_preemption_events import in_state, one_node_config, wait_until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: EmbeddedServer) -> Samples:
    """Every sample of the server's /metrics, by name and labels."""
    port = server.server.metrics.port if server.server.metrics else None
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} is not exported"
    return samples[key]


@pytest.fixture
def running(database_url: str) -> Iterator[tuple[EmbeddedServer, ArmadaClient]]:
    """One simulated node of 2 CPUs and 4Gi in pool 'default'."""
    config = one_node_config(database_url, http_port=0)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        assert server.server.metrics is not None
        # Every scrape reads ended jobs and node loads afresh (not once every 30 and 10 s).
        server.server.metrics.database.ended.every = 0
        server.server.metrics.database.loads.every = 0
        for name in ("batch", "urgent", "idle"):
            armada.create_queue(submit_pb2.Queue(name=name, priority_factor=1))
        yield server, armada


def job(
    priority_class: str = "low", cpu: str = "2", seconds: str = "600", fail: str = ""
) -> submit_pb2.JobSubmitRequestItem:
    annotations = {DURATION: seconds} | ({FAILURE: fail} if fail else {})
    return job_item(
        {
            "containers": [
                {
                    "name": "main",
                    "command": ["sleep", seconds],
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                }
            ]
        },
        priority_class=priority_class,
        annotations=annotations,
    )


def test_the_exposition_after_a_known_story(
    running: tuple[EmbeddedServer, ArmadaClient],
) -> None:
    server, armada = running
    # 3 succeed, 1 fails.
    done = armada.submit_jobs("batch", "quick", [job(cpu="0.5", seconds="0")] * 3)
    [failed] = armada.submit_jobs("batch", "quick", [job(cpu="0.5", seconds="0", fail="main")])
    for job_id in done:
        wait_until(in_state(armada, job_id, submit_pb2.SUCCEEDED), "a quick job to succeed")
    wait_until(in_state(armada, failed, submit_pb2.FAILED), "the failing job to fail")
    # 2 are cancelled while they run.
    cancelled = armada.submit_jobs("batch", "cancel", [job(cpu="1")] * 2)
    for job_id in cancelled:
        wait_until(in_state(armada, job_id, submit_pb2.RUNNING), "a job to run")
    assert sorted(armada.cancel_jobs("batch", "cancel", cancelled)) == sorted(cancelled)
    # 1 is preempted by urgency: the urgent queue's job of a higher class takes its node.
    [victim] = armada.submit_jobs("batch", "fill", [job()])
    wait_until(in_state(armada, victim, submit_pb2.RUNNING), "the low job to run")
    [urgent] = armada.submit_jobs("urgent", "now", [job("high")])
    wait_until(in_state(armada, victim, submit_pb2.PREEMPTED), "the urgency preemption")
    wait_until(in_state(armada, urgent, submit_pb2.RUNNING), "the urgent job to run")
    # A batch job waits behind it, so cycles go on and weigh both queues.
    [waiter] = armada.submit_jobs("batch", "wait", [job()])
    actual = "armada_queue_actual_share"
    urgent_share: list[Samples] = []

    def weighed_both() -> bool:
        found = scrape(server)
        both = value(found, actual, queue="urgent", pool="default") == 1
        both = both and value(found, "armada_queue_demand", queue="batch", pool="default") == 1
        if both:
            urgent_share.append(found)
        return both

    wait_until(weighed_both, "a cycle that found the urgent job holding the node, batch waiting")
    [while_urgent_runs] = urgent_share
    # 1 is preempted by hand; the waiting job then runs, and is cancelled.
    assert armada.preempt_jobs("urgent", "now", [urgent]) == {urgent: ""}
    wait_until(in_state(armada, urgent, submit_pb2.PREEMPTED), "the manual preemption")
    wait_until(in_state(armada, waiter, submit_pb2.RUNNING), "the waiting job to run")
    assert armada.cancel_jobs("batch", "wait", [waiter]) == [waiter]
    for job_id in [*cancelled, waiter]:
        wait_until(in_state(armada, job_id, submit_pb2.CANCELLED), "a cancel to end its job")

    samples = scrape(server)
    ended = "armada_jobs_ended_total"
    assert value(samples, ended, queue="batch", outcome="succeeded") == 3
    assert value(samples, ended, queue="batch", outcome="failed") == 1
    assert value(samples, ended, queue="batch", outcome="cancelled") == 3
    assert value(samples, ended, queue="batch", outcome="preempted") == 1
    assert value(samples, ended, queue="urgent", outcome="preempted") == 1
    assert value(samples, ended, queue="idle", outcome="succeeded") == 0  # 0, not missing
    kinds = "armada_preemptions_total"
    assert value(samples, kinds, queue="batch", kind="urgency") == 1
    assert value(samples, kinds, queue="urgent", kind="manual") == 1
    for queue, kind in itertools.product(
        ("batch", "urgent", "idle"), ("fair_share", "group_below_minimum")
    ):
        assert value(samples, kinds, queue=queue, kind=kind) == 0
    assert value(samples, kinds, queue="batch", kind="manual") == 0
    for state in ("queued", "leased", "pending", "running"):
        assert value(samples, "armada_jobs", queue="batch", state=state) == 0
    assert value(samples, "armada_jobs_submitted_total", queue="batch") == 8
    assert value(samples, "armada_scheduler_leader") == 1
    # The node: 2 CPUs and 4Gi in pool default, nothing held once every job ended.
    assert value(samples, "armada_nodes", pool="default", state="all") == 1
    assert value(samples, "armada_nodes", pool="default", state="cordoned") == 0
    assert value(samples, "armada_node_capacity", pool="default", resource="cpu") == 2
    assert value(samples, "armada_node_capacity", pool="default", resource="memory") == 4 << 30
    assert value(samples, "armada_database_connections", state="size") >= 1
    assert value(samples, "armada_database_connections", state="in_use") >= 0

    # A cycle while the urgent job held the node and a batch job waited: both active.
    fair, adjusted = "armada_queue_fair_share", "armada_queue_adjusted_fair_share"
    assert value(while_urgent_runs, "armada_node_allocated", pool="default", resource="cpu") == 2
    for queue in ("urgent", "batch"):
        assert value(while_urgent_runs, fair, queue=queue, pool="default") == 0.5
        assert value(while_urgent_runs, adjusted, queue=queue, pool="default") == 0.5
    assert value(while_urgent_runs, actual, queue="batch", pool="default") == 0
    assert value(while_urgent_runs, "armada_queue_demand", queue="urgent", pool="default") == 1
    for series in (fair, adjusted, actual, "armada_queue_demand"):
        assert value(while_urgent_runs, series, queue="idle", pool="default") == 0


def test_replaying_an_old_job_set_adds_no_lag(
    running: tuple[EmbeddedServer, ArmadaClient],
) -> None:
    server, armada = running
    [old] = armada.submit_jobs("batch", "old", [job(cpu="0.5", seconds="0")])
    wait_until(in_state(armada, old, submit_pb2.SUCCEEDED), "the old job to succeed")
    history = len(list(armada.get_job_set_events("batch", "old")))
    assert history >= 5  # submitted, queued, leased, ..., succeeded

    def observed() -> float:
        return value(scrape(server), "armada_event_stream_lag_seconds_count")

    stream = armada.get_job_set_events("batch", "old", watch=True, timeout=30)
    for _ in range(history):  # the whole history, replayed
        next(stream)
    assert observed() == 0
    [new] = armada.submit_jobs("batch", "old", [job(cpu="0.5", seconds="0")])
    live = 0
    for message in stream:  # the live tail: each of its events is observed
        live += 1
        if message.message.WhichOneof("events") == "succeeded":
            break
    wait_until(lambda: observed() == live, "the live events' lag to be observed")
    assert new


def test_jobs_ended_stay_counted_when_their_rows_are_deleted(database_url: str) -> None:
    """The running total adds each ended job once, so the retention deleting old jobs takes
    nothing away; a job whose end was committed long after the time it carries (an
    executor's late report) is added too."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import delete, insert

    from armada_core.jobs import JobState
    from armada_server.metrics_db import FINISHED_INDEX, EndedJobs
    from armada_server.storage import schema as t
    from armada_server.storage.base import Transactions
    from armada_server.storage.changes import move_on
    from armada_server.storage.database import open_database
    from armada_server.storage.job_reads import JobReads

    engine = open_database(database_url)
    with engine.begin() as conn:  # the retention's index (migration 0012), as it defines it
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS {FINISHED_INDEX} ON jobs (last_transition_at) "
            "WHERE state IN (3, 4, 8, 9, 10)"
        )
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def end(job_id: str, state: JobState, at: datetime) -> None:
        row = {
            "id": job_id,
            "queue": "q",
            "job_set": "s",
            "state": int(state),
            "priority": 0.0,
            "priority_class": "default",
            "submitted_at": start,
            "last_transition_at": at,
            "spec": b"",
        }
        with engine.begin() as conn:
            conn.execute(insert(t.jobs).values(**row))

    def writes_go_on() -> None:  # what every cycle and submission does to SQLite's clock
        with engine.begin() as conn:
            move_on(conn)

    try:
        end("a", JobState.SUCCEEDED, start)
        end("b", JobState.FAILED, start)
        ended = EndedJobs(JobReads(Transactions(engine)))
        first = ended.read()
        assert ended.running_total
        assert first[("q", JobState.SUCCEEDED)] == 1 and first[("q", JobState.FAILED)] == 1
        writes_go_on()
        end("c", JobState.SUCCEEDED, start + timedelta(hours=1))
        assert ended.read()[("q", JobState.SUCCEEDED)] == 2
        writes_go_on()
        assert ended.read()[("q", JobState.SUCCEEDED)] == 2  # nothing counted twice
        with engine.begin() as conn:  # the retention deletes the old jobs
            conn.execute(delete(t.jobs).where(t.jobs.c.id.in_(["a", "b"])))
        # Reported late: its end is stamped hours before reads that already counted others.
        end("d", JobState.SUCCEEDED, start - timedelta(hours=5))
        later = ended.read()
        assert later[("q", JobState.SUCCEEDED)] == 3 and later[("q", JobState.FAILED)] == 1
        writes_go_on()
        assert ended.read() == later
        assert ended.read() == later
    finally:
        engine.dispose()


def test_node_allocation_sums_every_run_of_equal_and_different_specs(
    running: tuple[EmbeddedServer, ArmadaClient],
) -> None:
    """Runs whose specs differ only in their ids share one reading of their requests; a
    different spec is read on its own, and every run counts."""
    server, armada = running
    ids = armada.submit_jobs("batch", "alloc", [job(cpu="0.5")] * 2)
    ids += armada.submit_jobs("batch", "alloc", [job(cpu="1")])
    for job_id in ids:
        wait_until(in_state(armada, job_id, submit_pb2.RUNNING), "a job to run")
    samples = scrape(server)
    assert value(samples, "armada_node_allocated", pool="default", resource="cpu") == 2
    assert value(samples, "armada_node_allocated", pool="default", resource="memory") == 3 << 30


def test_node_series_follow_each_report_and_cordon(database_url: str) -> None:
    """Each executor's report of its nodes is decoded once and kept; a new report, a cordon
    and an uncordon show at the next scrape, and a cordon of a node no executor reports
    counts nowhere."""
    from datetime import UTC, datetime

    from sqlalchemy import insert, update

    from armada_core.api import executor_pb2
    from armada_server.metrics_db import DatabaseSeries
    from armada_server.storage import schema as t
    from armada_server.storage.base import Transactions
    from armada_server.storage.database import open_database
    from armada_server.storage.job_reads import JobReads
    from armada_server.storage.nodes import Nodes, encode_nodes

    def node(name: str, cpu: str, *, unschedulable: bool = False) -> executor_pb2.Node:
        return executor_pb2.Node(
            name=name, allocatable={"cpu": cpu, "memory": "1Gi"}, unschedulable=unschedulable
        )

    engine = open_database(database_url)
    try:
        tx = Transactions(engine)
        nodes = Nodes(tx)
        series = DatabaseSeries(JobReads(tx), nodes, load_refresh=0)
        seen = datetime(2026, 1, 1, tzinfo=UTC)
        with engine.begin() as conn:
            for executor, pool, reported in (
                ("e1", "a", [node("n1", "2"), node("n2", "500m", unschedulable=True)]),
                ("e2", "b", [node("n1", "8")]),
            ):
                row = {"id": executor, "pool": pool, "nodes": encode_nodes(reported)}
                conn.execute(insert(t.executors).values(last_seen=seen, **row))

        def scrape() -> Samples:
            return {
                (sample.name, frozenset(sample.labels.items())): sample.value
                for family in series.collect()
                for sample in family.samples
            }

        def nodes_in(pool: str) -> tuple[float, float, float, float]:
            samples = scrape()
            return (
                value(samples, "armada_nodes", pool=pool, state="all"),
                value(samples, "armada_nodes", pool=pool, state="cordoned"),
                value(samples, "armada_nodes", pool=pool, state="unschedulable"),
                value(samples, "armada_node_capacity", pool=pool, resource="cpu"),
            )

        assert nodes_in("a") == (2, 0, 1, 2.5)
        assert nodes_in("b") == (1, 0, 0, 8)
        assert nodes.set_node_cordon("e1", "n1", True)
        assert not nodes.set_node_cordon("e1", "n1", True)  # it was already
        assert nodes.set_node_cordon("e1", "gone", True)  # no executor reports it
        assert nodes_in("a") == (2, 1, 1, 2.5)
        assert nodes_in("b") == (1, 0, 0, 8)  # e2's n1 is another node
        with engine.begin() as conn:  # e1 reports again: n1 left, n3 came
            new = encode_nodes([node("n2", "500m"), node("n3", "4"), node("n4", "1")])
            conn.execute(update(t.executors).where(t.executors.c.id == "e1").values(nodes=new))
        assert nodes_in("a") == (3, 0, 0, 5.5)
        assert nodes.set_node_cordon("e1", "n3", True)
        assert nodes_in("a") == (3, 1, 0, 5.5)
        assert nodes.set_node_cordon("e1", "n3", False)
        assert not nodes.set_node_cordon("e1", "n3", False)
        assert nodes_in("a") == (3, 0, 0, 5.5)
    finally:
        engine.dispose()
