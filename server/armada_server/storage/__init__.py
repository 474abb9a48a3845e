"""The server's state in a database (SQLAlchemy Core, SQLite or PostgreSQL), by concern.

`Storage` is the composition root: built once per server (`open_storage`, or `Storage` on an
engine), it holds one part per concern, and each service, the scheduling loop, the web UI and
the metrics are handed the parts they use. A job's path through them, top-down:

    submission.Submissions              jobs in (deduplicated), cancels, reprioritising
    scheduling_reads.SchedulingReads    what a scheduling cycle reads (its snapshot)
    scheduling_writes.SchedulingWrites  a cycle's decisions: leases, preemptions, failures
    sync.ExecutorSync                   executors' reports in (reports.py), their work out
    leases.Leases                       runs that end without their executor's word;
                                        retries.py decides retries, gangs.py restarts gangs

beside queues.Queues and queues.RetryPolicies, events.EventLog, job_reads.JobReads,
places.Places, nodes.Nodes, carryover.SchedulerCarryover, cycle_reports.CycleReports (what
the scheduling reports read) and retention.Retention (ended jobs pruned). Every part opens its
transactions through the one base.Transactions; a step of a larger transaction takes the
caller's connection, so one RPC or one scheduling cycle commits exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine

from armada_core.retry import RetrySettings
from armada_server.storage.base import JobSetKey, Transactions, utcnow
from armada_server.storage.carryover import SchedulerCarryover
from armada_server.storage.cycle_reports import CycleReports
from armada_server.storage.database import open_database
from armada_server.storage.events import EventLog
from armada_server.storage.job_reads import JobReads
from armada_server.storage.leases import Leases
from armada_server.storage.nodes import Nodes
from armada_server.storage.places import Places
from armada_server.storage.queues import Queues, RetryPolicies
from armada_server.storage.retention import Retention
from armada_server.storage.retries import Retries
from armada_server.storage.scheduling_reads import SchedulingReads
from armada_server.storage.scheduling_writes import SchedulingWrites
from armada_server.storage.submission import Submissions
from armada_server.storage.sync import ExecutorSync

__all__ = ["Storage", "open_storage"]


class Storage:
    """Every part of storage, sharing one set of transactions.

    `on_commit` is called with the job sets that got new events, after their transaction
    committed; `retry_settings` are the server's retry settings (global cap, default
    policy)."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_commit: Callable[[set[JobSetKey]], None] | None = None,
        retry_settings: RetrySettings | None = None,
    ) -> None:
        self.transactions = Transactions(engine, clock=clock, on_commit=on_commit)
        tx = self.transactions
        #: Jobs failed alone because processing them raised, by where (a metric).
        self.isolated_failures: Counter[str] = Counter()
        self.queues = Queues(tx)
        self.retry_policies = RetryPolicies(tx)
        self.submissions = Submissions(tx)
        self.events = EventLog(tx)
        self.job_reads = JobReads(tx)
        self.places = Places(tx)
        self.nodes = Nodes(tx)
        self.carryover = SchedulerCarryover(tx)
        self.cycle_reports = CycleReports(tx)
        self.retention = Retention(tx)
        self.leases = Leases(tx, Retries(retry_settings or RetrySettings()), self.isolated_failures)
        self.scheduling_reads = SchedulingReads(tx)
        self.scheduling_writes = SchedulingWrites(tx, self.leases)
        self.executors = ExecutorSync(tx, self.leases)

    @property
    def engine(self) -> Engine:
        return self.transactions.engine


def open_storage(
    database_url: str,
    *,
    clock: Callable[[], datetime] = utcnow,
    on_commit: Callable[[set[JobSetKey]], None] | None = None,
    retry_settings: RetrySettings | None = None,
) -> Storage:
    """The storage of the database at `database_url`, its schema brought up to date."""
    return Storage(
        open_database(database_url),
        clock=clock,
        on_commit=on_commit,
        retry_settings=retry_settings,
    )
