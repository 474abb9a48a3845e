"""Tables (SQLAlchemy Core). The same schema runs on SQLite and PostgreSQL.

Protobuf messages that clients send and receive (queues, retry policies, jobs, events) are
stored as serialised bytes beside the columns that queries filter on, so what a client gets back
is exactly what was stored.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    text,
)

from armada_server.storage.changes import change_number

metadata = MetaData()


def ended(table: str = "") -> str:
    """A job row that ended (SUCCEEDED, FAILED, PREEMPTED, CANCELLED, REJECTED) in SQL, as
    ix_jobs_finished's WHERE and the retention's queries spell it (`table`: its alias).

    Not `state IN (...)`: SQLite builds the list's lookup table afresh each time it checks a
    written row against a partial index, twice per row (before and after), which made every
    UPDATE of a job about four times as costly (migration 0016)."""
    state = f"{table}.state" if table else "state"
    return "(" + " OR ".join(f"{state} = {s}" for s in (3, 4, 8, 9, 10)) + ")"


def active_run(table: str = "") -> str:
    """A run row that is active (LEASED, PENDING, RUNNING) in SQL, as ix_runs_active's WHERE
    and the reads of an executor's active runs spell it (`table`: its name or alias). Written
    out, with no bound value, so that both databases find the partial index usable."""
    state = f"{table}.state" if table else "state"
    return "(" + " OR ".join(f"{state} = {s}" for s in (1, 2, 3)) + ")"


queues = Table(
    "queues",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("cordoned", Boolean, nullable=False, default=False),
    Column("spec", LargeBinary, nullable=False),  # api.Queue
)

retry_policies = Table(
    "retry_policies",
    metadata,
    Column("name", String(253), primary_key=True),
    Column("spec", LargeBinary, nullable=False),  # api.RetryPolicy
)

# One row per job set: hands out the job set's event sequence numbers. Taking the next numbers
# locks the row, so events of one job set commit in the order of their numbers and a watcher
# reading "everything after N" never misses a later-committing smaller number.
job_sets = Table(
    "job_sets",
    metadata,
    Column("queue", String(63), primary_key=True),
    Column("name", String(1024), primary_key=True),
    Column("last_seq", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("queue", String(63), primary_key=True),
    Column("job_set", String(1024), primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("job_id", String(26), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("payload", LargeBinary, nullable=False),  # api.EventMessage
    # A job's events, for pruning them with the job (storage/retention.py, migration 0012).
    Index("ix_events_job_id", "job_id"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(26), primary_key=True),
    Column("queue", String(63), nullable=False),
    Column("job_set", String(1024), nullable=False),
    Column("client_id", String(1024)),
    Column("external_job_uri", String(2048)),
    Column("state", SmallInteger, nullable=False),
    Column("priority", Float, nullable=False),
    Column("priority_class", String(253), nullable=False),
    Column("gang_id", String(1024)),
    Column("submitted_at", DateTime(timezone=True), nullable=False),
    Column("last_transition_at", DateTime(timezone=True), nullable=False),
    Column("retry_after", DateTime(timezone=True)),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("cancel_reason", Text, nullable=False, default=""),
    Column("cancel_user", String(253), nullable=False, default=""),
    Column("cancelled_at", DateTime(timezone=True)),
    Column("preempt_requested", Boolean, nullable=False, default=False),
    Column("failure_reason", Text, nullable=False, default=""),
    Column("spec", LargeBinary, nullable=False),  # api.Job as submitted
    # Why the scheduler left the job queued in its latest cycle ("" once placed).
    Column("scheduling_reason", Text, nullable=False, default="", server_default=""),
    # The cycle that reason began in (NULL: no cycle with reports on gave it); the reasons
    # before it are rows of job_reasons (storage/cycle_reports.py, migration 0014).
    Column("reason_cycle", BigInteger),
    # armada_core.retry.RetryHistory as JSON: what the job's retries have used so far.
    Column("retry_history", Text, nullable=False, default="{}", server_default="{}"),
    # Node the next run must avoid (anti-affinity of a retry policy).
    Column("avoid_node", String(253)),
    # Compare-and-set version: every transition writes version + 1 where it is still the
    # version it read (migration 0004).
    Column("version", Integer, nullable=False, default=0, server_default="0"),
    # The task the job works for: its armadaproject.io/task annotation, as the task lifecycle
    # stamps it (NULL: none). Fixed at submission. A queue keeps one live generation per task
    # (storage/task_generations.py); jobs of a task are found by queue and task through
    # ix_jobs_queue_task (migration 0010).
    Column("task", String(512)),
    # The change number of the row's latest write (storage/changes.py, migration 0015): the
    # scheduling loop reads the jobs that changed since its last cycle by it.
    Column(
        "changed",
        BigInteger,
        nullable=False,
        default=change_number(),
        onupdate=change_number(),
        server_default="0",
    ),
    Index("ix_jobs_queue_job_set", "queue", "job_set"),
    Index("ix_jobs_changed", "changed"),
    Index("ix_jobs_state_queue", "state", "queue"),
    Index(
        "ux_jobs_queue_client_id",
        "queue",
        "client_id",
        unique=True,
        sqlite_where=text("client_id IS NOT NULL"),
        postgresql_where=text("client_id IS NOT NULL"),
    ),
    # Queued jobs in the scheduler's order within their queue (class, priority, submit time,
    # id), with what counting a job's place in line reads (storage/places.py, migration 0006).
    Index(
        "ix_jobs_queued_order",
        "queue",
        "priority_class",
        "priority",
        "submitted_at",
        "id",
        "gang_id",
        "retry_after",
        "state",
        sqlite_where=text("state = 0"),
        postgresql_where=text("state = 0"),
    ),
    # Queued gang members by gang: a gang stands in line at its first member's place.
    Index(
        "ix_jobs_queued_gangs",
        "queue",
        "gang_id",
        "priority_class",
        "priority",
        "submitted_at",
        "id",
        "retry_after",
        "state",
        sqlite_where=text("state = 0 AND gang_id IS NOT NULL"),
        postgresql_where=text("state = 0 AND gang_id IS NOT NULL"),
    ),
    # Every member of a gang, whatever its state: a retried or cut gang reads its members,
    # and each scheduling cycle the members that succeeded of pod groups still running
    # (migration 0007). Queue and gang id never change, so the index is written once per job.
    Index(
        "ix_jobs_gang_members",
        "gang_id",
        "queue",
        sqlite_where=text("gang_id IS NOT NULL"),
        postgresql_where=text("gang_id IS NOT NULL"),
    ),
    # Ended jobs by when they ended: what the retention prunes (storage/retention.py,
    # migration 0012). Partial, so jobs that have not ended never write it.
    Index(
        "ix_jobs_finished",
        "last_transition_at",
        sqlite_where=text(ended()),
        postgresql_where=text(ended()),
    ),
    # Every job of a task in a queue, whatever its state (jobs with a task only).
    Index(
        "ix_jobs_queue_task",
        "queue",
        "task",
        sqlite_where=text("task IS NOT NULL"),
        postgresql_where=text("task IS NOT NULL"),
    ),
)

# One row per task and queue that was ever submitted to: a submission of the task's jobs locks
# it (an upsert) before it looks for the task's live jobs, so two submissions of one task take
# turns even on PostgreSQL's READ COMMITTED, and the second sees the first's jobs
# (storage/task_generations.py).
task_locks = Table(
    "task_locks",
    metadata,
    Column("queue", String(63), primary_key=True),
    Column("task", String(512), primary_key=True),
    Column("locked_at", DateTime(timezone=True), nullable=False),
)

# Executors and the nodes they last reported (executor.Node messages, length-delimited).
executors = Table(
    "executors",
    metadata,
    Column("id", String(253), primary_key=True),
    Column("pool", String(253), nullable=False),
    Column("nodes", LargeBinary, nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    # executor.Capabilities: the pod fields it can honour (None: it never said).
    Column("capabilities", LargeBinary),
    # Where the executor serves logs (executor.ExecutorControl), and the secret it expects.
    Column("address", String(1024)),
    Column("address_token", String(256)),
)

# Nodes cordoned by an operator, of any executor: the scheduler places nothing new on them.
node_cordons = Table(
    "node_cordons",
    metadata,
    Column("executor_id", String(253), primary_key=True),
    Column("node", String(253), primary_key=True),
    Column("cordoned_at", DateTime(timezone=True), nullable=False),
    Column("requestor", String(253), nullable=False, default="", server_default=""),
)

# What the scheduling leader carries from one cycle to the next (scheduling/carryover.py):
# one row, written by the leader as it changes, read by a replica that comes to lead.
scheduler_carryover = Table(
    "scheduler_carryover",
    metadata,
    Column("id", SmallInteger, primary_key=True),
    Column("state", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# SQLite's change clock (storage/changes.py): one row, the number writes of jobs stamp,
# moved on by the scheduling loop after each read (migration 0015). PostgreSQL stamps
# transaction ids instead and leaves it alone.
change_clock = Table(
    "change_clock",
    metadata,
    Column("n", BigInteger, nullable=False),
)

# One row per scheduling cycle the reports read (migration 0011): its number, when it began,
# how long it took and its figures as JSON (reporting/cycle.py). The leader keeps the
# last `report_cycles` of them (storage/cycle_reports.py).
scheduling_cycles = Table(
    "scheduling_cycles",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("seconds", Float, nullable=False),
    Column("report", Text, nullable=False),
)

# A job's earlier reasons for waiting, one row per reason it had: the cycle it began in and
# the reason ("" once placed). The reason in force is on the job's row (scheduling_reason,
# reason_cycle), so a job's first reason, the one every job of a backlog gets, costs no row.
# Rows older than the kept cycles go, but for a queued job's reason then.
job_reasons = Table(
    "job_reasons",
    metadata,
    Column("job_id", String(26), primary_key=True),
    Column("cycle", BigInteger, primary_key=True, autoincrement=False),
    Column("reason", Text, nullable=False),
    Index("ix_job_reasons_cycle", "cycle"),
)

#: runs.preemption_kind's values, armada_preemptions_total's `kind` label: a scheduling
#: cycle's kinds (scheduling/preemption_kind.py says which is which) and a user's (manual).
PREEMPTION_KINDS = ("urgency", "fair_share", "manual", "group_below_minimum")
MANUAL_PREEMPTION = "manual"

runs = Table(
    "runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("job_id", String(26), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("run_index", Integer, nullable=False),
    Column("cluster_id", String(253), nullable=False),
    Column("node", String(253), nullable=False),
    Column("pool", String(253), nullable=False),
    Column("state", SmallInteger, nullable=False),
    Column("leased_at", DateTime(timezone=True)),
    Column("pending_at", DateTime(timezone=True)),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    Column("kubernetes_id", String(253), nullable=False, default=""),
    Column("condition", String(64), nullable=False, default=""),
    Column("category", String(253), nullable=False, default=""),
    Column("subcategory", String(253), nullable=False, default=""),
    Column("reason", Text, nullable=False, default=""),
    Column("containers", Text, nullable=False, default="[]"),  # JSON list of results
    # A run that ended by the server's decision (cancelled, restarted with its gang, expired)
    # may still be terminating on its node: until this time, or until its executor no longer
    # holds it, it keeps its node's capacity.
    Column("releases_at", DateTime(timezone=True)),
    # The job a scheduling cycle preempted this run to make room for (placed on its node in
    # that cycle); the preempted event names it once the run has stopped. NULL: none (a
    # manual preemption, or a preemption that placed nothing on the node).
    Column("preempting_job_id", String(26)),
    # Why the run was preempted, once a preemption was asked for (PREEMPTION_KINDS). NULL:
    # no preemption asked for, or one asked for before this column.
    Column("preemption_kind", String(32)),
    # What the run holds of its queue's excess-flow budget (thousandths of a resource-minute),
    # from the cycle that leased it; given back as the run ends. NULL: nothing.
    Column("excess_flow", BigInteger),
    Index("ix_runs_job_id", "job_id", "run_index", unique=True),
    # An executor's active runs, among every run kept until the retention prunes it: what a
    # lease expiry and an executor's full read of what it holds look for (migration 0017).
    # Without it both scanned every run, the expiry in every cycle while any executor that
    # ever synced was silent.
    Index(
        "ix_runs_active",
        "cluster_id",
        sqlite_where=text(active_run()),
        postgresql_where=text(active_run()),
    ),
    Index(
        "ix_runs_releases_at",
        "cluster_id",
        "releases_at",
        sqlite_where=text("releases_at IS NOT NULL"),
        postgresql_where=text("releases_at IS NOT NULL"),
    ),
)
