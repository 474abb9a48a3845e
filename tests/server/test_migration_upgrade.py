"""A database kept since the first release comes through every migration with its data.

The database is built revision by revision from empty (Alembic, storage/migrations); after each
revision, rows are written as the release of that revision wrote them (only the columns and
tables that revision has): queues, retry policies, jobs and their runs and events, executors,
cordons, the scheduler's carry-over. At the newest revision everything reads back through the
storage API, and the old rows take the writes of a running server (a submission deduplicated
against an old job, a cancel, a lease, an executor's sync).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, MetaData, Table, select

from armada_core.api import event_pb2, executor_pb2, submit_pb2
from armada_core.jobs import Job, JobState, RunState, job_from_item, lifecycle, new_job_id
from armada_core.jobs import annotations as ann
from armada_core.jobs.lifecycle import EventMessage
from armada_server.storage import Storage
from armada_server.storage.base import Transactions
from armada_server.storage.database import MIGRATIONS, begin_write, make_engine, migrate
from armada_server.storage.executor_runs import active_runs_held_by
from armada_server.storage.held_jobs import HeldJobs
from armada_server.storage.nodes import ExecutorControl, encode_nodes
from armada_server.storage.rows import job_row, mutable_job_row, run_row
from armada_server.storage.scheduling_reads import SchedulingState
from armada_server.storage.task_generations import LiveGenerationExists

from ..jobs.factories import T0, container, item

QUEUE, JOB_SET, CLASS = "q1", "s", "armada-default"
NODES = [
    executor_pb2.Node(name="n1", allocatable={"cpu": "8", "memory": "32Gi"}),
    executor_pb2.Node(name="n2", allocatable={"cpu": "8", "memory": "32Gi"}),
]
QUEUE_SPEC = submit_pb2.Queue(name=QUEUE, priority_factor=1, retry_policies=["p1"])
POLICY = submit_pb2.RetryPolicy(name="p1", retry_limit=3)
CAPABILITIES = executor_pb2.Capabilities(unsupported_pod_fields=["hostNetwork"]).SerializeToString()
CARRIED = '{"usage": {"q1": 1.5}, "usage_at": 1.0}'
RELEASES_AT = T0 + timedelta(days=1)  # a cancelled run still terminating
LATER = {"task"}  # job columns that job_row writes and the first releases did not (0010)
NOW = T0 + timedelta(hours=1)

# A step of a job's life (lease, start, cancel, ...), taken at a time.
Step = Callable[[Job, datetime], tuple[Job, list[EventMessage]]]


def config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def revisions() -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(config())
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def upgrade(engine: Engine, revision: str) -> None:
    """One revision further, as database.migrate runs migrations."""
    cfg = config()
    with engine.connect() as conn, begin_write(conn):
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


@dataclass
class Old:
    """What the old releases wrote, to check it against what storage reads back."""

    events: int = 0  # events appended to the job set
    ids: dict[str, str] = field(default_factory=dict)  # name -> job id
    runs: dict[str, str] = field(default_factory=dict)  # name -> its latest run's id
    states: dict[str, JobState] = field(default_factory=dict)


def reflected(conn: Connection, table: str) -> Table:
    """The table as the database has it at this revision (not as schema.py declares it)."""
    found = MetaData()
    found.reflect(bind=conn, only=[table])
    return found.tables[table]


def insert(conn: Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Rows written with the columns the database has at this revision: every column given
    must exist (what that release wrote), and none is filled in by today's schema."""
    found = reflected(conn, table)
    for row in rows:
        assert set(row) <= set(found.columns.keys()), f"{table} has no {set(row)} yet"
    conn.execute(found.insert(), rows)


def job(
    conn: Connection,
    old: Old,
    name: str,
    when: datetime,
    steps: Step | None = None,
    *,
    annotations: dict[str, str] | None = None,
    client_id: str = "",
    job_columns: dict[str, Any] | None = None,
    run_columns: dict[str, Any] | None = None,
) -> None:
    """A job submitted at `when` (and taken through `steps`), with its runs and events."""
    pod = {"containers": [container()], "priorityClassName": CLASS}
    spec = job_from_item(
        item(pod, annotations=annotations or {}, client_id=client_id),
        job_id=new_job_id(),
        queue=QUEUE,
        job_set_id=JOB_SET,
        owner="old",
        now=when,
    )
    stored, events = lifecycle.submit(spec, when)
    if steps is not None:
        stored, more = steps(stored, when)
        events = events + more
    changed = {k: v for k, v in mutable_job_row(stored).items() if not k.startswith("_")}
    del changed["version"]
    row = job_row(stored.spec, when) | changed | (job_columns or {})
    # job_row writes today's columns: a release before the revision that added one did not.
    present = set(reflected(conn, "jobs").columns.keys())
    insert(conn, "jobs", [{k: v for k, v in row.items() if k in present or k not in LATER}])
    if stored.runs:
        insert(conn, "runs", [run_row(stored.id, stored.runs[-1]) | (run_columns or {})])
        old.runs[name] = stored.runs[-1].id
    Transactions(conn.engine).append(conn, set(), events)
    old.events += len(events)
    old.ids[name] = stored.id
    old.states[name] = stored.state


def then(*steps: Step) -> Step:
    """The lifecycle steps, one after the other."""

    def run(job: Job, when: datetime) -> tuple[Job, list[EventMessage]]:
        events: list[EventMessage] = []
        for step in steps:
            job, more = step(job, when)
            events += more
        return job, events

    return run


def leased(job: Job, when: datetime) -> tuple[Job, list[EventMessage]]:
    return lifecycle.lease(
        job, run_id=new_run_id(), cluster_id="e1", node="n1", pool="default", now=when
    )


def running(job: Job, when: datetime) -> tuple[Job, list[EventMessage]]:
    return lifecycle.mark_running(job, now=when, node="n1", kubernetes_id="pod")


def succeeded(job: Job, when: datetime) -> tuple[Job, list[EventMessage]]:
    return lifecycle.succeed(job, now=when)


def new_run_id() -> str:
    return str(uuid.uuid4())


# What each revision's release wrote, by revision: every migration runs with data in it.
def rev_0001(conn: Connection, old: Old, when: datetime) -> None:
    insert(
        conn, "queues", [{"name": QUEUE, "cordoned": False, "spec": QUEUE_SPEC.SerializeToString()}]
    )
    insert(conn, "retry_policies", [{"name": "p1", "spec": POLICY.SerializeToString()}])
    job(conn, old, "queued", when, client_id="a")
    job(conn, old, "running", when, then(leased, running))
    job(
        conn,
        old,
        "succeeded",
        when,
        then(leased, running, lambda j, w: lifecycle.succeed(j, now=w)),
    )


def rev_0002(conn: Connection, old: Old, when: datetime) -> None:
    insert(
        conn,
        "executors",
        [{"id": "e1", "pool": "default", "nodes": encode_nodes(NODES), "last_seen": when}],
    )
    job(
        conn,
        old,
        "retried",
        when,
        job_columns={
            "scheduling_reason": "waiting for room",
            "retry_history": '{"total_retries": 1, "run_count": 1}',
            "avoid_node": "e1/n2",
        },
    )


def rev_0003(conn: Connection, old: Old, when: datetime) -> None:
    job(conn, old, "third", when)


def rev_0004(conn: Connection, old: Old, when: datetime) -> None:
    executors = reflected(conn, "executors")
    conn.execute(
        executors.update()
        .where(executors.c.id == "e1")
        .values(capabilities=CAPABILITIES, address="e1:1", address_token="secret")
    )
    insert(
        conn,
        "node_cordons",
        [{"executor_id": "e1", "node": "n2", "cordoned_at": when, "requestor": "op"}],
    )
    cancel = then(
        leased,
        lambda j, w: lifecycle.request_cancel(j, requestor="u", reason="no", now=w),
        lambda j, w: lifecycle.cancel(j, requestor="u", reason="no", now=w),
    )
    job(
        conn,
        old,
        "stopping",
        when,
        cancel,
        job_columns={"version": 2},
        run_columns={"releases_at": RELEASES_AT},
    )


def rev_0005(conn: Connection, old: Old, when: datetime) -> None:
    preempting = then(
        leased,
        running,
        lambda j, w: lifecycle.request_preempt(j, requestor="s", reason="room", now=w),
    )
    job(
        conn,
        old,
        "preempting",
        when,
        preempting,
        run_columns={"preempting_job_id": old.ids["queued"]},
    )


def rev_0006(conn: Connection, old: Old, when: datetime) -> None:
    gang = {ann.GANG_ID: "g1", ann.GANG_CARDINALITY: "2"}
    job(conn, old, "member1", when, annotations=gang)
    job(conn, old, "member2", when, annotations=gang)


def rev_0007(conn: Connection, old: Old, when: datetime) -> None:
    job(conn, old, "seventh", when)


def rev_0008(conn: Connection, old: Old, when: datetime) -> None:
    job(conn, old, "charged", when, then(leased, running), run_columns={"excess_flow": 1234})


def rev_0009(conn: Connection, old: Old, when: datetime) -> None:
    insert(conn, "scheduler_carryover", [{"id": 1, "state": CARRIED, "updated_at": when}])
    # a task lifecycle's job, from before jobs had a task column (0010 fills it in)
    job(conn, old, "task-old", when, annotations=task("old-task"))


def task(name: str) -> dict[str, str]:
    return {ann.TASK: name, ann.TASK_ATTEMPT: "1", ann.TASK_GENERATION: "0"}


def rev_0010(conn: Connection, old: Old, when: datetime) -> None:
    job(conn, old, "task-new", when, annotations=task("new-task"))
    insert(conn, "task_locks", [{"queue": QUEUE, "task": "new-task", "locked_at": when}])


REPORT = '{"cycle": 7, "queues": {}}'


def rev_0011(conn: Connection, old: Old, when: datetime) -> None:
    insert(
        conn, "scheduling_cycles", [{"id": 7, "started_at": when, "seconds": 0.5, "report": REPORT}]
    )
    insert(conn, "job_reasons", [{"job_id": old.ids["task-new"], "cycle": 7, "reason": "waits"}])
    # A job placed after waiting: its last row is its reason in force, "" (moved by 0014).
    job(conn, old, "waited", when, then(leased, running, succeeded))
    rows = [(3, "no room"), (6, "")]
    insert(
        conn,
        "job_reasons",
        [{"job_id": old.ids["waited"], "cycle": c, "reason": r} for c, r in rows],
    )


def rev_0012(conn: Connection, old: Old, when: datetime) -> None:
    succeed = then(leased, running, lambda j, w: lifecycle.succeed(j, now=w))
    job(conn, old, "ended-0012", when, succeed)


def rev_0013(conn: Connection, old: Old, when: datetime) -> None:
    urgency = then(
        leased,
        running,
        lambda j, w: lifecycle.request_preempt(j, requestor="scheduler", reason="room", now=w),
        lambda j, w: lifecycle.preempt(j, reason="room", now=w, requestor="scheduler"),
    )
    columns = {"preempting_job_id": old.ids["queued"], "preemption_kind": "urgency"}
    job(conn, old, "urgency", when, urgency, run_columns=columns)


def rev_0014(conn: Connection, old: Old, when: datetime) -> None:
    columns = {"scheduling_reason": "later", "reason_cycle": 6}
    job(conn, old, "reason-0014", when, then(leased, running, succeeded), job_columns=columns)
    insert(
        conn, "job_reasons", [{"job_id": old.ids["reason-0014"], "cycle": 5, "reason": "earlier"}]
    )


def rev_0015(conn: Connection, old: Old, when: datetime) -> None:
    job(conn, old, "queued-0015", when, job_columns={"changed": 1})


def rev_0016(conn: Connection, old: Old, when: datetime) -> None:
    succeed = then(leased, running, lambda j, w: lifecycle.succeed(j, now=w))
    job(conn, old, "ended-0016", when, succeed, job_columns={"changed": 2})


def rev_0017(conn: Connection, old: Old, when: datetime) -> None:
    succeed = then(leased, running, lambda j, w: lifecycle.succeed(j, now=w))
    job(conn, old, "ended-0017", when, succeed)


WRITERS: dict[str, Callable[[Connection, Old, datetime], None]] = {
    "0001": rev_0001,
    "0002": rev_0002,
    "0003": rev_0003,
    "0004": rev_0004,
    "0005": rev_0005,
    "0006": rev_0006,
    "0007": rev_0007,
    "0008": rev_0008,
    "0009": rev_0009,
    "0010": rev_0010,
    "0011": rev_0011,
    "0012": rev_0012,
    "0013": rev_0013,
    "0014": rev_0014,
    "0015": rev_0015,
    "0016": rev_0016,
    "0017": rev_0017,
}


@pytest.fixture
def upgraded(database_url: str) -> Iterator[tuple[Storage, Old]]:
    """A database upgraded one revision at a time from empty, each revision's release
    writing its rows, then opened as the server opens it."""
    engine = make_engine(database_url)
    old = Old()
    every = revisions()
    assert list(WRITERS) == every, "every migration runs with data in it: add its rows"
    for minutes, revision in enumerate(every):
        upgrade(engine, revision)
        with engine.connect() as conn, begin_write(conn):
            WRITERS[revision](conn, old, T0 + timedelta(minutes=minutes))
    migrate(engine)  # as the server does when it starts: nothing is left to do
    with engine.connect() as conn:
        version = conn.execute(select(reflected(conn, "alembic_version").c.version_num))
        assert version.scalar_one() == every[-1]
    yield Storage(engine, clock=lambda: NOW), old
    engine.dispose()


def test_queues_policies_and_carried_state_read_back(upgraded: tuple[Storage, Old]) -> None:
    storage, _ = upgraded
    assert storage.queues.get_queue(QUEUE) == QUEUE_SPEC
    assert storage.queues.list_queues() == [QUEUE_SPEC]
    assert storage.retry_policies.list_retry_policies() == [POLICY]
    assert storage.carryover.read() == CARRIED


def test_jobs_runs_and_events_read_back(upgraded: tuple[Storage, Old]) -> None:
    storage, old = upgraded
    names = sorted(old.ids)
    states = storage.job_reads.job_states([old.ids[n] for n in names] + ["unknown"])
    assert states == {old.ids[n]: old.states[n] for n in names} | {"unknown": JobState.UNKNOWN}
    jobs = {j.id: j for j in storage.job_reads.jobs([old.ids[n] for n in names])}
    for name, run_id in old.runs.items():
        assert jobs[old.ids[name]].runs[-1].id == run_id
    assert jobs[old.ids["succeeded"]].runs[-1].state == RunState.SUCCEEDED
    assert jobs[old.ids["preempting"]].preempt_requested
    assert [r.id for _, r in storage.job_reads.runs([old.runs["running"]])] == [old.runs["running"]]
    assert storage.job_reads.stopping_runs(list(old.runs.values())) == {old.runs["stopping"]}
    assert storage.job_reads.scheduling_reasons([old.ids["retried"]]) == {
        old.ids["retried"]: "waiting for room"
    }
    assert storage.events.last_seq(QUEUE, JOB_SET) == old.events
    events = storage.events.events_after(QUEUE, JOB_SET, 0, limit=10_000)
    assert [e.seq for e in events] == list(range(1, old.events + 1))
    assert {event_pb2.EventMessage.FromString(e.payload).submitted.job_id for e in events} >= set(
        old.ids.values()
    )


def test_the_scheduler_reads_the_old_state(upgraded: tuple[Storage, Old]) -> None:
    storage, old = upgraded
    ids = old.ids
    state = storage.scheduling_reads.scheduling_state(executor_timeout=86_400, now=NOW)
    queued = {j.id: j for j in state.queued}
    waiting = [
        "queued",
        "retried",
        "third",
        "member1",
        "member2",
        "seventh",
        "task-old",
        "task-new",
        "queued-0015",
    ]
    assert set(queued) == {ids[n] for n in waiting}
    assert queued[ids["retried"]].avoid_node == "e1/n2"
    assert {j.version for j in queued.values()} == {0}
    running = {j.id: j for j in state.running}
    assert set(running) == {ids["running"], ids["charged"]}  # "preempting" is leaving
    assert running[ids["charged"]].excess_flow == 1234
    assert running[ids["running"]].excess_flow == 0
    assert [r.id for r in state.terminating] == [ids["stopping"]]
    [executor] = state.executors
    assert executor.unsupported == ("hostNetwork",)
    assert {n.name: n.unschedulable for n in executor.nodes} == {"n1": False, "n2": True}
    lines = storage.places.queue_places([ids[n] for n in waiting], {CLASS: 1000})
    places = [1, 2, 3, 4, 4, 5, 6, 7, 8]
    assert lines.places == {ids[n]: p for n, p in zip(waiting, places, strict=True)}
    assert lines.lengths == {QUEUE: 8}
    cordons = [(n.executor, n.name, n.cordoned_by) for n in storage.nodes.nodes_with_cordons()]
    assert cordons == [("e1", "n1", ""), ("e1", "n2", "op")]
    assert storage.nodes.executor_control("e1") == ExecutorControl("e1:1", "secret")


def test_the_leader_holds_the_old_state_and_reads_what_changes_it(
    upgraded: tuple[Storage, Old],
) -> None:
    """Rows written before jobs had change numbers are read by a new leader's first read,
    and a later change to one of them by the next read of what changed."""
    storage, old = upgraded
    reads, held = storage.scheduling_reads, HeldJobs()

    def ids(state: SchedulingState) -> tuple[list[str], list[str]]:
        return [j.id for j in state.queued], [j.id for j in state.running]

    first = reads.scheduling_state(executor_timeout=86_400, now=NOW, held=held)
    assert ids(first) == ids(reads.scheduling_state(executor_timeout=86_400, now=NOW))
    assert held.mark is not None
    storage.submissions.cancel(QUEUE, JOB_SET, [old.ids["queued"], old.ids["running"]])
    again = reads.scheduling_state(executor_timeout=86_400, now=NOW, held=held)
    assert ids(again) == ids(reads.scheduling_state(executor_timeout=86_400, now=NOW))
    assert old.ids["queued"] not in ids(again)[0]
    assert old.ids["running"] not in ids(again)[1]


def test_active_runs_written_before_their_index_are_found_through_it(
    upgraded: tuple[Storage, Old],
) -> None:
    """ix_runs_active (0017) holds the active runs written before it, and no ended one: the
    executor's full read finds them, and so does a lease expiry once the executor is
    silent."""
    storage, old = upgraded
    with storage.engine.connect() as conn:
        held = {job_id for _, job_id, *_ in conn.execute(active_runs_held_by("e1"))}
    assert {old.ids[n] for n in ("running", "preempting", "charged")} <= held
    assert old.ids["ended-0017"] not in held
    expired = storage.leases.expire_leases(timeout=60, now=NOW + timedelta(days=365))
    assert set(expired) == held


def test_old_rows_take_a_running_servers_writes(upgraded: tuple[Storage, Old]) -> None:
    storage, old = upgraded
    ids = old.ids
    pod = {"containers": [container()], "priorityClassName": CLASS}
    submit = storage.submissions.submit
    assert submit(QUEUE, JOB_SET, [item(pod, client_id="a")], owner="new") == [ids["queued"]]
    [new] = submit(QUEUE, JOB_SET, [item(pod)], owner="new")
    assert storage.submissions.cancel(QUEUE, JOB_SET, [ids["third"]]) == [ids["third"]]
    leases = storage.scheduling_writes.apply_schedule(
        scheduled={ids["retried"]: ("e1", "n1", "default")},
        preempted=(),
        failed={},
        reasons={new: "just submitted"},
        seen={ids["retried"]: 0},
        now=NOW,
    )
    assert leases == 1
    held = [old.runs[n] for n in ("running", "preempting", "charged")]
    response = storage.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=NODES, run_ids=held),
        now=NOW,
    )
    assert [lease.job.id for lease in response.leases] == [ids["retried"]]
    assert [(s.run_id, s.preempt) for s in response.stop] == [(old.runs["preempting"], True)]
    states = storage.job_reads.job_states([ids["third"], ids["retried"], ids["running"], new])
    assert list(states.values()) == [
        JobState.CANCELLED,
        JobState.LEASED,
        JobState.RUNNING,
        JobState.QUEUED,
    ]
    assert storage.job_reads.scheduling_reasons([new]) == {new: "just submitted"}
    # submitted and queued, cancelling and cancelled, leased
    assert storage.events.last_seq(QUEUE, JOB_SET) == old.events + 5


def test_old_tasks_keep_one_live_generation(upgraded: tuple[Storage, Old]) -> None:
    """A task's live job from before the task column (filled in by 0010) and one written
    with it are both the live generation of their tasks."""
    storage, old = upgraded
    pod = {"containers": [container()], "priorityClassName": CLASS}
    for name, task_name in (("task-old", "old-task"), ("task-new", "new-task")):
        stamps = task(task_name) | {ann.TASK_ATTEMPT: "2"}
        with pytest.raises(LiveGenerationExists) as e:
            storage.submissions.submit(QUEUE, JOB_SET, [item(pod, annotations=stamps)], owner="new")
        assert e.value.live.job_ids == (old.ids[name],)


def test_preemptions_read_back_with_their_kind(upgraded: tuple[Storage, Old]) -> None:
    """A preemption asked for before 0013 has no kind; one after keeps it beside its job."""
    storage, old = upgraded
    assert storage.job_reads.run_preemptions(old.ids["preempting"]) == {}
    assert storage.job_reads.run_preemptions(old.ids["urgency"]) == {
        old.runs["urgency"]: ("urgency", old.ids["queued"])
    }


def test_kept_reports_read_back_and_go_on(upgraded: tuple[Storage, Old]) -> None:
    """Cycles and reasons kept before an upgrade read back, and the cycles' numbers go on
    from them."""
    storage, old = upgraded
    [cycle] = storage.cycle_reports.cycles(5)
    assert (cycle.cycle, cycle.seconds, cycle.report) == (7, 0.5, REPORT)
    assert storage.cycle_reports.history(old.ids["task-new"]) == [(7, "waits")]
    assert storage.cycle_reports.history(old.ids["waited"]) == [(3, "no room"), (6, "")]
    assert storage.cycle_reports.history(old.ids["reason-0014"]) == [(5, "earlier"), (6, "later")]
    with storage.transactions.read() as conn:
        reasons = reflected(conn, "job_reasons")
        kept = conn.execute(select(reasons.c.job_id, reasons.c.cycle)).all()
    # the reasons in force went onto their jobs' rows (0014): only the earlier ones are rows
    assert sorted(kept) == sorted(
        [(old.ids["task-new"], 7), (old.ids["waited"], 3), (old.ids["reason-0014"], 5)]
    )
    assert storage.cycle_reports.next_cycle() == 8


def test_jobs_ended_before_the_upgrade_are_pruned_with_their_runs_and_events(
    upgraded: tuple[Storage, Old],
) -> None:
    """The retention finds the old ended jobs through the indexes 0012 added (as 0016 spells
    ix_jobs_finished); a cancelled run still keeping its node (releases_at after the cut-off)
    keeps its job."""
    storage, old = upgraded
    ended = {name for name, state in old.states.items() if state.terminal} - {"stopping"}
    assert {"succeeded", "ended-0012", "ended-0016"} <= ended
    pruned = storage.retention.prune(NOW, batch=2)
    assert pruned.jobs == len(ended) and pruned.runs == len(ended)
    for name, job_id in old.ids.items():
        found = storage.job_reads.jobs([job_id])
        assert (found == []) == (name in ended), name
    with storage.transactions.read() as conn:
        job_ids = conn.execute(select(reflected(conn, "events").c.job_id)).scalars().all()
    assert set(job_ids) == {old.ids[n] for n in old.ids if n not in ended}
