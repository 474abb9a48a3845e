"""A waiting job's place in its queue's line, as GetJobDetails says it after the queue's
standing: "...; queue q at 0.0x its fair share; 3rd in line of 9 queued".

The line is the scheduler's order within a queue (class priority, job priority, submit time,
id; a gang at its first member's place, counted once); its length, said with the place, is
counted the same way and read with it. The first test checks it against the
scheduler itself: the test speaks the executor protocol (as test_scheduling_loop.py does) and
adds one node at a time with room for exactly one item, so the scheduler leases the head of
the line each time, and that must be the job that was said to be 1st.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine, event

from armada_core.api import executor_pb2, job_pb2, submit_pb2
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import PriorityClassConfig, ServerConfig
from armada_server.storage import places
from armada_server.storage.database import open_database
from armada_server.storage.places import ordinal

from ..jobs.factories import container, item
from .conftest import Stubs
from .test_scheduling_loop import Executor

# Two classes share the lowest priority: the line mixes them by job priority and submit time,
# so ordering by class name (or by class alone) fails.
CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("batch", 0, preemptible=True),
    PriorityClassConfig("mid", 5),
    PriorityClassConfig("high", 10),
)
PLACE = re.compile(
    r"; queue \S+ at \d+\.\dx its fair share; (\d+)(st|nd|rd|th) in line of "
    r"(\d+) queued$"
)


@pytest.fixture
def server(database_url: str) -> Iterator[EmbeddedServer]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.1,
        lease_timeout=60.0,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as running:
        yield running


def job(cls: str, priority: float, cpu: str = "2", **kw) -> submit_pb2.JobSubmitRequestItem:
    return item(
        {"containers": [container(cpu=cpu)], "priorityClassName": cls}, priority=priority, **kw
    )


def submit(api: Stubs, *items: submit_pb2.JobSubmitRequestItem, queue: str = "q") -> list[str]:
    response = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(queue=queue, job_set_id="s", job_request_items=list(items))
    )
    return [i.job_id for i in response.job_response_items]


def all_details(api: Stubs, ids: list[str]) -> dict[str, job_pb2.JobDetails]:
    return dict(api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=ids)).job_details)


def lines_of(api: Stubs, ids: list[str]) -> dict[str, tuple[int, int]]:
    """The place each job is said to have and the length of the line said with it (one
    GetJobDetails call for all): jobs with no place are left out."""
    out = {}
    for job_id, d in all_details(api, ids).items():
        found = PLACE.search(d.scheduling_reason)
        if found:
            assert d.state == submit_pb2.QUEUED
            assert found[2] == ordinal(int(found[1]))[-2:]
            out[job_id] = (int(found[1]), int(found[3]))
    return out


def places_of(api: Stubs, ids: list[str]) -> dict[str, int]:
    """The place each job is said to have: jobs with none are left out."""
    return {job_id: place for job_id, (place, _) in lines_of(api, ids).items()}


def in_line(places: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Places with the length of their line, when every job of the line has one of them: the
    last place."""
    last = max(places.values(), default=0)
    return {k: (v, last) for k, v in places.items()}


def wait_for(check, what: str, timeout: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def tiny_executor(api: Stubs) -> Executor:
    """An executor whose one node a job of another queue holds, which nothing preempts: the
    test's jobs fit the node when empty (so they are in line) but not now, and each gets a
    reason. (A job that fits no node even empty has no place: test_submission_checks.py.)"""
    ex = Executor(api.channel, nodes=1, cpu="3", memory="64Gi")
    ex.sync()
    api.queues.CreateQueue(submit_pb2.Queue(name="held", priority_factor=1))
    submit(api, job("high", 0, cpu="3"), queue="held")
    ex.wait_leases(1)
    return ex


def add_node(ex: Executor) -> None:
    """A node with room for one item of the line (2 cpu: one job, or the gang's two)."""
    ex.nodes.append(
        executor_pb2.Node(
            name=f"{ex.name}-n{len(ex.nodes)}",
            allocatable={"cpu": "2", "memory": "64Gi"},
            labels={"rack": "r0"},
        )
    )
    ex.sync()


def leased(ex: Executor) -> set[str]:
    ex.sync()
    return {lease.job.id for lease in ex.held.values()}


def test_places_follow_the_order_the_scheduler_takes_the_line_in(
    api: Stubs, queue: str, server: EmbeddedServer
) -> None:
    ex = tiny_executor(api)
    # One submission each, so that submit times follow this order.
    order = [
        ("a", "low", 0),
        ("b", "high", 5),
        ("c", "batch", 0),
        ("d", "mid", 0),
        ("e", "high", 1),
        ("f", "low", 2),
    ]
    ids = {name: submit(api, job(cls, priority))[0] for name, cls, priority in order}
    gang = {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2"}
    ids["g1"], ids["g2"] = submit(api, *[job("mid", 0, cpu="1", annotations=gang)] * 2)
    ids["h"] = submit(api, job("batch", 0))[0]
    ids["i"] = submit(api, job("high", 1))[0]
    by_id = {v: k for k, v in ids.items()}
    everyone = list(ids.values())
    wait_for(
        lambda: len(places_of(api, everyone)) == len(everyone),
        "every job waits with a place in line",
    )
    # high: priority 1 (e, then i submitted later), then 5 (b); mid: d before the gang (one
    # place for both); low and batch mixed: priority 0 by submit time (a, c, h), then f.
    expected = {"e": 1, "i": 2, "b": 3, "d": 4, "g1": 5, "g2": 5, "a": 6, "c": 7, "h": 8, "f": 9}
    said = {by_id[k]: v for k, v in lines_of(api, everyone).items()}
    assert said == in_line(expected)
    first = all_details(api, [ids["e"]])[ids["e"]].scheduling_reason
    # Ten jobs queued, the gang's two counted once.
    assert first.endswith("; queue q at 0.0x its fair share; 1st in line of 9 queued"), first

    # A job ahead cancelled: everyone behind it moves up.
    api.submit.CancelJobs(
        submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[ids["b"]])
    )
    wait_for(lambda: ids["b"] not in places_of(api, everyone), "the cancelled job has no place")
    expected = {k: v - (v > 3) for k, v in expected.items() if k != "b"}
    assert {by_id[k]: v for k, v in lines_of(api, everyone).items()} == in_line(expected)

    # Room for one item at a time: the scheduler takes the one said to be 1st, and the
    # rest move up by one (the gang's two members together).
    while expected:
        head = {ids[k] for k, v in expected.items() if v == 1}
        add_node(ex)
        wait_for(lambda head=head: head <= leased(ex), f"{head} leased")
        expected = {k: v - 1 for k, v in expected.items() if v > 1}
        # Leased jobs have no place; the others moved up, in a line one shorter.
        lines = in_line(expected)
        wait_for(
            lambda want=lines: {by_id[k]: v for k, v in lines_of(api, everyone).items()} == want,
            f"places after {head} left the line",
        )
    assert len(ex.held) == 9 + 1  # and the job holding the first node


def test_one_call_gives_every_job_of_several_queues_its_place(
    api: Stubs, queue: str, server: EmbeddedServer
) -> None:
    api.queues.CreateQueue(submit_pb2.Queue(name="other", priority_factor=1))
    tiny_executor(api)
    classes = {c.name: c.priority for c in CLASSES}
    names = sorted(classes)
    ids: dict[str, list[str]] = {"q": [], "other": []}
    for round_ in range(6):
        for q in ids:
            batch = [job(names[(round_ + i) % 4], float((i * 7 + round_) % 5)) for i in range(40)]
            # A gang of three in the middle of each submission.
            gang = {ann.GANG_ID: f"g{round_}", ann.GANG_CARDINALITY: "3"}
            batch[20:20] = [job("mid", 1, cpu="1", annotations=gang)] * 3
            ids[q] += submit(api, *batch, queue=q)
    everyone = ids["q"] + ids["other"]
    wait_for(
        lambda: len(places_of(api, everyone)) == len(everyone),
        "every job waits with a place in line",
    )
    found = api.jobs.GetJobDetails(
        job_pb2.JobDetailsRequest(job_ids=everyone, expand_job_spec=True)
    ).job_details
    said = places_of(api, everyone)
    for q, members in ids.items():

        def key(job_id: str) -> tuple:
            d = found[job_id]
            return (
                -classes[d.job_spec.pod_specs[0].priorityClassName],
                int(d.job_spec.priority),
                d.submitted_ts.ToNanoseconds(),
                job_id,
            )

        line: list[str] = []  # the job, or the first member of its gang
        first: dict[str, str] = {}
        for j in sorted(members, key=key):
            gang = found[j].job_spec.annotations.get(ann.GANG_ID)
            if gang is None:
                line.append(j)
            elif gang not in first:
                line.append(j)
                first[gang] = j
        place = {j: n for n, j in enumerate(line, 1)}
        gang_of = {j: found[j].job_spec.annotations.get(ann.GANG_ID) for j in members}
        expected = {j: place[first[gang_of[j]] if gang_of[j] else j] for j in members}
        assert {j: said[j] for j in members} == expected, q
        assert len(line) == 6 * 41
    # Each queue's line holds 6 * 41 items: 6 * 43 jobs, each gang of three counted once.
    for j in everyone:
        text = found[j].scheduling_reason
        assert text.endswith(f"; {ordinal(said[j])} in line of {6 * 41} queued"), text


def test_a_cordoned_queue_has_no_line(api: Stubs, queue: str, server: EmbeddedServer) -> None:
    tiny_executor(api)
    [a] = submit(api, job("low", 0))
    wait_for(lambda: places_of(api, [a]), "a place in line")
    api.queues.CordonQueue(submit_pb2.QueueCordonRequest(name="q"))
    reason = wait_for(
        lambda: (
            (r := all_details(api, [a])[a].scheduling_reason).startswith("queue is cordoned") and r
        ),
        "the cordon as the reason",
    )
    assert re.fullmatch(r"queue is cordoned; queue q at 0\.0x its fair share", reason), reason


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112, 1000)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "23rd",
        "101st",
        "111th",
        "112th",
        "1000th",
    ]


def test_counting_reads_the_queued_indexes_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SQLite uses a partial index only when the query names its condition as written: each
    piece of a range is a search of ix_jobs_queued_order bounded by priority, the line's
    length a search of it per class, and a gang's earlier members a search of
    ix_jobs_queued_gangs, none reading a job row."""
    url = f"sqlite:///{tmp_path / 'armada.db'}"
    open_database(url).dispose()
    engine = create_engine(url)
    now = datetime.now(UTC)
    statements = places._statements((("high", 10), ("low", 0)))

    def explain(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        return f"EXPLAIN QUERY PLAN {statement}", parameters

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    counts = [
        *statements.range((0, now, "a"), (0, now, "b")),
        *statements.range((0, now, "a"), (2, now, "b")),
    ]
    for statement, params in [*counts, (statements.length, {"names": ["high", "low"]})]:
        values = {"now": now, "queue": "q", "name": "low", **params}
        with engine.connect() as conn:
            plan = " ".join(str(r[-1]) for r in conn.execute(statement, values))
        assert (
            "SEARCH r USING COVERING INDEX ix_jobs_queued_order (queue=? AND "
            "priority_class=?" in plan
        ), plan
        if statement is not statements.length:
            assert "priority_class=? AND priority" in plan, plan
        assert (
            "SEARCH o USING COVERING INDEX ix_jobs_queued_gangs (queue=? AND gang_id=?)" in plan
        ), plan
    engine.dispose()
