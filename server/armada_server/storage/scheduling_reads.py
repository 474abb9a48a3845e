"""What a scheduling cycle reads: queues, live executors' nodes (cordons applied), queued and
running jobs, runs still terminating, and what pod groups' ended members leave behind, from
one consistent read (`SchedulingReads.scheduling_state`).

The scheduling loop turns it into the scheduler's snapshot (scheduling/snapshot.py); the fair
share sampler (shares.py) reads it too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Select, and_, bindparam, func, or_, select

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import TERMINAL_STATES, JobState
from armada_core.jobs import annotations as ann
from armada_core.jobs.gangs import gang_of
from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_RUN_STATES, Transactions
from armada_server.storage.bulk import fetch
from armada_server.storage.nodes import decode_nodes
from armada_server.storage.retries import gang_cardinalities_of, gang_cardinalities_select
from armada_server.storage.rows import STATE_OF_JOBS_BY_ID, chunks, spec_key, when

if TYPE_CHECKING:
    from armada_server.storage.held_jobs import HeldJobs

GangKey = tuple[str, str]  # (queue, gang id)


@dataclass(frozen=True)
class ExecutorNodes:
    id: str
    pool: str
    nodes: list[executor_pb2.Node]  # shared with later reads: never changed in place
    # The pod-spec fields the executor declared it cannot honour (executors/capabilities.py).
    unsupported: tuple[str, ...] = ()
    # The nodes as stored (before cordons; empty: not read from storage) and the names of
    # the cordoned ones: together they say what `nodes` is, so that views of the nodes can
    # be kept while both are unchanged (scheduling/snapshot.py).
    stored: bytes = b""
    cordoned: frozenset[str] = frozenset()


class _LazySpec:
    """`spec` parsed from the stored bytes on first use: the scheduling loop converts each
    job once and reuses it while the job is unchanged, so most cycles never need the spec."""

    id: str
    raw: bytes
    client_id: str | None = None  # a field of the rows that read it (spec_key)

    @cached_property
    def spec(self) -> submit_pb2.Job:
        return submit_pb2.Job.FromString(self.raw)

    @property
    def spec_key(self) -> bytes | None:
        return spec_key(self.id, self.raw, self.client_id)


@dataclass(frozen=True)
class QueuedJob(_LazySpec):
    id: str
    queue: str
    priority: float
    submitted_at: datetime
    raw: bytes
    avoid_node: str | None
    # A retried gang's generation may be smaller than the gang (see gangs.restart_gangs).
    gang_cardinality: int | None = None
    version: int = 0  # the row's version: a lease applies only while it is unchanged
    # Why the last cycle left it queued, and the cycle that reason began in (None: no cycle
    # with reports on gave it): the cycle writes only the reasons that change.
    reason: str = ""
    reason_cycle: int | None = None
    # Until when a retry delay holds it back (None: it may be placed now).
    retry_after: datetime | None = None
    client_id: str | None = None
    # The scheduler's view of this row, once made (scheduling/snapshot.py): a plain queued
    # job's view depends on its row alone, and the leader holds a row until the job changes.
    # Not copied by `dataclasses.replace`, which makes another row.
    view: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True)
class RunningJob(_LazySpec):
    id: str
    queue: str
    priority: float
    submitted_at: datetime
    raw: bytes
    node: str  # "<executor>/<node>"
    started_at: datetime | None
    run_id: str = ""  # a preemption applies only while this is still the job's run
    excess_flow: int = 0  # what the run holds of its queue's excess-flow budget
    client_id: str | None = None
    # The scheduler's view of this row, once made: as QueuedJob's (a running job's view
    # depends on its row alone).
    view: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True)
class TerminatingRun(_LazySpec):
    """A run the server ended (cancelled, restarted with its gang, expired) whose end its
    executor has not confirmed: its node's capacity is not free yet."""

    id: str  # the job's id
    raw: bytes
    node: str  # "<executor>/<node>"


@dataclass(frozen=True)
class SchedulingState:
    """Everything one scheduling cycle reads, from one consistent read."""

    queues: list[submit_pb2.Queue]
    executors: list[ExecutorNodes]
    queued: list[QueuedJob]
    #: In order of id. The leader's held jobs hand over their own view of them (HeldJobs):
    #: read it within the cycle, do not keep it.
    running: Collection[RunningJob]
    terminating: list[TerminatingRun] = field(default_factory=list)
    #: Members that SUCCEEDED of each pod group with members running or queued again in a
    #: retried generation, per role: (queue, gang id) -> role -> count (`Job.gang_succeeded`).
    succeeded: dict[GangKey, dict[str, int]] = field(default_factory=dict)
    #: The roles and minimums of those groups' members that ended (whatever the end): a role
    #: whose members have all ended keeps its minimum (`Job.gang_roles`).
    ended_roles: dict[GangKey, dict[str, int]] = field(default_factory=dict)
    #: `running` by id, when the leader holds its jobs between cycles (HeldJobs): the jobs
    #: that changed are looked up there, not found by walking `running`. Read-only.
    running_by_id: Mapping[str, RunningJob] | None = None
    #: Where the leader's held jobs read the jobs that changed from and to (HeldJobs.since,
    #: None when it read every job, and .mark).
    held_marks: tuple[int | None, int] | None = None


# What every cycle reads besides its jobs, built once (SQLAlchemy works out a statement's
# cache key once per object).
_QUEUE_SPECS = select(t.queues.c.spec).order_by(t.queues.c.name)
_LIVE_EXECUTOR_COUNT = (
    select(func.count())
    .select_from(t.executors)
    .where(t.executors.c.last_seen >= bindparam("cutoff"))
)
_LIVE_EXECUTORS = (
    select(t.executors.c.id, t.executors.c.pool, t.executors.c.nodes, t.executors.c.capabilities)
    .where(t.executors.c.last_seen >= bindparam("cutoff"))
    .order_by(t.executors.c.id)
)
_TERMINATING = (
    select(t.jobs.c.id, t.jobs.c.spec, t.runs.c.cluster_id, t.runs.c.node)
    .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
    .where(t.runs.c.releases_at.is_not(None), t.runs.c.releases_at > bindparam("now"))
)
_CORDONS = select(t.node_cordons.c.executor_id, t.node_cordons.c.node)

# The columns of a job that a cycle reads, queued or running.
_JOB_COLUMNS = (
    t.jobs.c.id,
    t.jobs.c.queue,
    t.jobs.c.priority,
    t.jobs.c.submitted_at,
    t.jobs.c.spec,
    t.jobs.c.client_id,
)
# Pod groups are found by a byte search in their specs (no parsing): a spec naming a role.
_ROLE_KEY = ann.GANG_ROLE.encode()
# Jobs are read in no order and sorted by id here: the database sorted whole rows, specs
# included (on SQLite a temporary B-tree, about a third of the read at 200,000 queued); the
# rows come nearly in id order, so this sort is a merge of runs.
_BY_ID = attrgetter("id")


class SchedulingReads:
    """The reads of the scheduling loop and of the fair-share sampler."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions
        # Each executor's nodes as last decoded, by what they were decoded from: an
        # executor's nodes rarely change, and decoding 10,000 took a part of every cycle.
        # The lists and messages are shared between reads, never changed (cordons copy).
        self._decoded: dict[str, tuple[bytes, list[executor_pb2.Node]]] = {}

    def live_executors(self, *, executor_timeout: float, now: datetime | None = None) -> int:
        """How many executors synced within the timeout (a cheap check before a snapshot)."""
        cutoff = (now or self._tx.clock()) - timedelta(seconds=executor_timeout)
        with self._tx.read() as conn:
            [(count,)] = fetch(conn, _LIVE_EXECUTOR_COUNT, {"cutoff": cutoff})
        return int(count)

    def scheduling_state(
        self, *, executor_timeout: float, now: datetime | None = None, held: HeldJobs | None = None
    ) -> SchedulingState:
        """What a cycle reads. With `held` (the scheduling leader's), queued and running jobs
        are read only where they changed since `held` was last brought up to date."""
        now = now or self._tx.clock()
        cutoff = now - timedelta(seconds=executor_timeout)
        if held is not None:
            held.move_on(self._tx)
        with self._tx.read(snapshot=True) as conn:
            queues = [submit_pb2.Queue.FromString(r[0]) for r in fetch(conn, _QUEUE_SPECS)]
            executors, self._decoded = _live_executors(conn, cutoff, self._decoded)
            if held is None:
                members: dict[str, GangKey] = {}  # pod groups' members: see _ended_members
                queued = queued_jobs(conn, members, due_by=now)
                queued.sort(key=_BY_ID)
                running: Collection[RunningJob] = sorted(running_jobs(conn, members), key=_BY_ID)
                groups = set(members.values())
                by_id, marks = None, None
            else:
                queued, running, groups = held.refresh(conn, now)
                assert held.mark is not None
                by_id, marks = held.running, (held.since, held.mark)
            terminating = _terminating_runs(conn, now)
            succeeded, ended_roles = _ended_members(conn, groups)
        return SchedulingState(
            queues,
            executors,
            queued,
            running,
            terminating,
            succeeded,
            ended_roles,
            by_id,
            marks,
        )


def _live_executors(
    conn: Connection, cutoff: datetime, decoded: Mapping[str, tuple[bytes, list[executor_pb2.Node]]]
) -> tuple[list[ExecutorNodes], dict[str, tuple[bytes, list[executor_pb2.Node]]]]:
    """Executors seen since `cutoff`, their cordoned nodes marked unschedulable; and their
    nodes as decoded, by what from (`decoded` the last read's: reused where unchanged)."""
    cordoned = _cordoned(conn)
    executors: list[ExecutorNodes] = []
    now_decoded: dict[str, tuple[bytes, list[executor_pb2.Node]]] = {}
    for executor, pool, stored, capabilities in fetch(conn, _LIVE_EXECUTORS, {"cutoff": cutoff}):
        before = decoded.get(executor)
        nodes = before[1] if before is not None and before[0] == stored else decode_nodes(stored)
        now_decoded[executor] = (stored, nodes)
        names = frozenset(cordoned.get(executor, ()))
        executors.append(
            ExecutorNodes(
                executor,
                pool,
                _with_cordons(nodes, names),
                _unsupported(capabilities),
                stored=stored,
                cordoned=names,
            )
        )
    return executors, now_decoded


#: Which jobs `queued_jobs` and `running_jobs` read besides: those whose change number is at
#: least the parameter `mark` (held_jobs.HeldJobs' reads of what changed since its last).
CHANGED_SINCE_MARK = t.jobs.c.changed >= bindparam("mark")
_QUEUED = int(JobState.QUEUED)
_RUNNING_STATES = (int(JobState.LEASED), int(JobState.PENDING), int(JobState.RUNNING))
_DUE = or_(t.jobs.c.retry_after.is_(None), t.jobs.c.retry_after <= bindparam("due_by"))


def _conditions(
    states: tuple[int, ...], since: bool, due: bool = False
) -> list[ColumnElement[bool]]:
    """Jobs in `states`, changed since the parameter `mark` (the state then kept off its
    index, which SQLite would walk whole), due by the parameter `due_by`."""
    state = STATE_OF_JOBS_BY_ID if since else t.jobs.c.state
    conditions = [state.in_(states) if len(states) > 1 else state == states[0]]
    if due:
        conditions.append(_DUE)
    if since:
        conditions.append(CHANGED_SINCE_MARK)
    return conditions


def _queued_select(since: bool, due: bool) -> tuple[Select[Any], Select[Any]]:
    """The read of `queued_jobs`, and of its jobs' gang cardinalities."""
    conditions = _conditions((_QUEUED,), since, due)
    jobs = select(
        *_JOB_COLUMNS,
        t.jobs.c.version,
        t.jobs.c.avoid_node,
        t.jobs.c.gang_id,
        t.jobs.c.scheduling_reason,
        t.jobs.c.reason_cycle,
        t.jobs.c.retry_after,
    ).where(*conditions)
    return jobs, gang_cardinalities_select(and_(*conditions))


def _running_select(since: bool) -> Select[Any]:
    """The read of `running_jobs`."""
    return (
        select(
            *_JOB_COLUMNS,
            t.runs.c.cluster_id,
            t.runs.c.node,
            t.runs.c.started_at,
            t.runs.c.id,
            t.jobs.c.preempt_requested,
            t.jobs.c.gang_id,
            t.runs.c.excess_flow,
        )
        .join(
            t.runs,
            and_(t.runs.c.job_id == t.jobs.c.id, t.runs.c.state.in_(ACTIVE_RUN_STATES)),
        )
        .where(*_conditions(_RUNNING_STATES, since))
    )


# Built once each: every cycle runs them, and building a select cost more than running it
# for the few jobs a busy cluster's cycle finds changed.
_QUEUED_SELECTS = {
    (since, due): _queued_select(since, due) for since in (False, True) for due in (False, True)
}
_RUNNING_SELECTS = {since: _running_select(since) for since in (False, True)}


def queued_jobs(
    conn: Connection,
    members: dict[str, GangKey],
    *,
    due_by: datetime | None = None,
    since: int | None = None,
) -> list[QueuedJob]:
    """Queued jobs (with `since`, only those whose change number is at least that mark), in
    no order: with `due_by`, only those not waiting out a retry delay then. Adds to
    `members` those of pod groups queued again in a retried generation (earlier members may
    have succeeded), each with its group."""
    stmt, cardinalities = _QUEUED_SELECTS[(since is not None, due_by is not None)]
    params: dict[str, Any] = {}
    if since is not None:
        params["mark"] = since
    if due_by is not None:
        params["due_by"] = due_by
    generations = gang_cardinalities_of(fetch(conn, cardinalities, params))
    # Driver-level rows and frozen dataclasses filled without __init__: this reads every
    # queued and running job, each cycle.
    new = object.__new__
    queued = []
    texts: dict[str, str] = {}  # a backlog has a handful of reasons: one string each
    for (
        job_id,
        queue,
        priority,
        submitted,
        spec,
        client_id,
        version,
        avoid,
        gang_id,
        reason,
        reason_cycle,
        retry_after,
    ) in fetch(conn, stmt, params):
        job = new(QueuedJob)
        job.__dict__.update(
            id=job_id,
            queue=queue,
            priority=priority,
            submitted_at=when(submitted),
            raw=spec,
            client_id=client_id,
            avoid_node=avoid,
            gang_cardinality=generations.get(job_id),
            version=version,
            reason=texts.setdefault(reason, reason),
            reason_cycle=reason_cycle,
            retry_after=when(retry_after) if retry_after is not None else None,
        )
        queued.append(job)
        if job_id in generations and _ROLE_KEY in spec:
            members[job_id] = (queue, gang_id)
    return queued


def running_jobs(
    conn: Connection, members: dict[str, GangKey], *, since: int | None = None
) -> list[RunningJob]:
    """Jobs with an active run (with `since`, only those whose change number is at least
    that mark), except those being preempted, in no order; adds to `members` those of pod
    groups, being preempted or not, each with its group."""
    new = object.__new__
    running = []
    for (
        job_id,
        queue,
        priority,
        submitted,
        spec,
        client_id,
        cluster,
        node,
        started,
        run_id,
        leaving,
        gang_id,
        excess_flow,
    ) in fetch(conn, _RUNNING_SELECTS[since is not None], {} if since is None else {"mark": since}):
        if gang_id is not None and _ROLE_KEY in spec:
            members[job_id] = (queue, gang_id)
        if leaving:
            # Being preempted: the cycle that preempted it gave its room to the job placed
            # instead (counted as that job's), and executors start that job only once this
            # one has stopped. Counted here too, the node would look overcommitted and the
            # next cycle would preempt another job.
            continue
        job = new(RunningJob)
        job.__dict__.update(
            id=job_id,
            queue=queue,
            priority=priority,
            submitted_at=when(submitted),
            raw=spec,
            client_id=client_id,
            node=f"{cluster}/{node}",
            started_at=when(started),
            run_id=run_id,
            excess_flow=excess_flow or 0,
        )
        running.append(job)
    return running


def _terminating_runs(conn: Connection, now: datetime) -> list[TerminatingRun]:
    """Runs the server ended that may still hold their nodes."""
    new = object.__new__
    terminating = []
    for job_id, spec, cluster, node in fetch(conn, _TERMINATING, {"now": now}):
        stopping = new(TerminatingRun)
        stopping.__dict__.update(id=job_id, raw=spec, node=f"{cluster}/{node}")
        terminating.append(stopping)
    return terminating


def _unsupported(capabilities: bytes | None) -> tuple[str, ...]:
    if not capabilities:
        return ()
    return tuple(executor_pb2.Capabilities.FromString(capabilities).unsupported_pod_fields)


def _cordoned(conn: Connection) -> dict[str, set[str]]:
    """The cordoned nodes' names, by executor."""
    cordoned: dict[str, set[str]] = {}
    for executor_id, node in fetch(conn, _CORDONS):
        cordoned.setdefault(executor_id, set()).add(node)
    return cordoned


def _with_cordons(
    nodes: list[executor_pb2.Node], names: Collection[str]
) -> list[executor_pb2.Node]:
    """`nodes` with those named `names` marked unschedulable, as copies (`nodes` is shared
    between reads)."""
    if not names:
        return nodes
    marked = []
    for n in nodes:
        if n.name in names:
            copy = executor_pb2.Node()
            copy.CopyFrom(n)
            copy.unschedulable = True
            n = copy
        marked.append(n)
    return marked


def _ended_members(
    conn: Connection, groups: Collection[GangKey]
) -> tuple[dict[GangKey, dict[str, int]], dict[GangKey, dict[str, int]]]:
    """Of the pod groups `groups` (queue, gang id), the members that ended: how many of each
    role succeeded, and each role's minimum. One query by gang id (ix_jobs_gang_members),
    parsing only those members' specs; read from storage, so any replica that comes to lead
    knows a role whose members have all ended."""
    succeeded: dict[GangKey, dict[str, int]] = {}
    roles: dict[GangKey, dict[str, int]] = {}
    if not groups:
        return succeeded, roles
    ids = sorted({gang_id for _, gang_id in groups})
    ended = sorted(int(s) for s in TERMINAL_STATES)
    for chunk in chunks(ids, 10_000):
        rows: Iterable[tuple[Any, ...]] = conn.execute(
            select(t.jobs.c.queue, t.jobs.c.gang_id, t.jobs.c.state, t.jobs.c.spec).where(
                t.jobs.c.gang_id.in_(chunk), t.jobs.c.state.in_(ended)
            )
        )
        for queue, gang_id, state, spec in rows:
            key = (queue, gang_id)
            if key not in groups:
                continue
            try:
                gang = gang_of(submit_pb2.Job.FromString(spec).annotations)
            except Exception:  # unreadable: it keeps no role we can name
                continue
            if gang is None or not gang.role:
                continue
            minimums = roles.setdefault(key, {})
            minimums[gang.role] = max(minimums.get(gang.role, 0), gang.role_minimum or 0)
            if state == int(JobState.SUCCEEDED):
                counts = succeeded.setdefault(key, {})
                counts[gang.role] = counts.get(gang.role, 0) + 1
    return succeeded, roles
