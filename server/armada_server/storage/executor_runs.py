"""Each executor's active runs, held by a replica between the executor's syncs.

A sync compares the runs the executor holds with the runs storage has active on it: leases
to hand out, runs it lost, runs to stop, runs to preempt. Reading every active run of the
executor at every sync (tens of thousands, twice a second) was most of a sync's cost while
few of them change between two syncs. A replica instead keeps what its last read found
for the executor and reads only the runs of jobs whose change number (storage/changes.py)
says they changed since: every write of a run's state, and every preemption asked for,
writes its job's row too. The mark is a number of the database, not of the replica, so
whichever replica the executor synced with last, and whichever wrote the changes, the next
read finds them.

What is held is taken out for the length of a sync and put back only once the sync's
transaction has committed: a sync that fails leaves nothing, and the executor's next sync at
this replica reads everything, as does its first and one every `FULL_READ_EVERY` of the
process's own clock (a net under writes from outside, which come in real time whatever the
server's clock says; see held_jobs.py). What is held only finds candidates: the sync checks
each lost run and each run to stop against the database before acting on it
(storage/sync.py).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Select, bindparam, select, text

from armada_core.jobs import RunState
from armada_server.storage import changes
from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_RUN_STATES
from armada_server.storage.bulk import fetch
from armada_server.storage.changes import FULL_READ_EVERY

_LEASED = int(RunState.LEASED)
_STARTED = frozenset(ACTIVE_RUN_STATES) - {_LEASED}


@dataclass
class ActiveRuns:
    """An executor's active runs as storage has them."""

    leased: dict[str, None] = field(default_factory=dict)  # not started yet, in lease order
    started: set[str] = field(default_factory=set)
    preempting: dict[str, str] = field(default_factory=dict)  # run -> job, to preempt

    def take(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rows of (run, job, state, preemption asked for), each the run as it now is. Run
        ids are kept interned: an executor in the process (the simulated one) holds the
        same objects, and a sync's differences of thousands of runs then compare pointers
        rather than strings spread over the heap."""
        for run_id, job_id, state, preempt in rows:
            run_id = sys.intern(run_id)
            if state != _LEASED:
                self.leased.pop(run_id, None)
            elif run_id not in self.leased:  # a lease keeps its place in line
                self.leased[run_id] = None
            started = state in _STARTED
            if started:
                self.started.add(run_id)
            else:
                self.started.discard(run_id)
            if preempt and (started or state == _LEASED):
                self.preempting[run_id] = job_id
            else:
                self.preempting.pop(run_id, None)


@dataclass
class _Held:
    runs: ActiveRuns
    mark: int  # where the next read of what changed starts
    read_at: float  # when everything was last read, in time.monotonic()


class HeldRuns:
    """One executor's runs for one sync: `read` brings them up to date in the sync's write
    transaction; what it read is kept if the sync commits (see `ExecutorRuns.held`)."""

    def __init__(self, held: _Held | None) -> None:
        self.held = held
        self.changed: int | None = None  # runs the last read found changed (None: all)

    def read(self, conn: Connection, executor: str) -> ActiveRuns:
        changes.move_on(conn)  # this sync's later writes are read next time
        mark = changes.mark(conn)
        held = self.held
        clock = time.monotonic()
        if held is None or clock - held.read_at >= FULL_READ_EVERY:
            runs = ActiveRuns()
            rows = fetch(conn, active_runs_held_by(executor))
            runs.take(rows)
            self.held, self.changed = _Held(runs, mark, clock), None
            return runs
        rows = fetch(conn, _CHANGED_RUNS, {"mark": held.mark, "executor": executor})
        held.runs.take(rows)
        held.mark, self.changed = mark, len(rows)
        return held.runs


def _runs(where: Any, executor: Any) -> Select[Any]:
    """The executor's runs `where` says, as ActiveRuns.take reads them, in lease order: by
    when, then by job. A cycle leases at one time, and its leases go out (a sync at a time)
    in the order of their jobs' ids, the order of submission: each sync's leases, and the
    reports that follow them, touch neighbouring rows of few job sets, where in the order of
    the runs' random ids they touched rows and job sets all over."""
    r, j = t.runs.c, t.jobs.c
    return (
        select(r.id, r.job_id, r.state, j.preempt_requested)
        .join(t.jobs, j.id == r.job_id)
        .where(where, r.cluster_id == executor)
        .order_by(r.leased_at, r.job_id)
    )


# The executor's runs of the jobs changed since a mark: led by those jobs (SQLite, without
# statistics, would scan every run). Built once: SQLAlchemy works out a statement's cache key
# once per object, and every sync reads this.
_CHANGED_RUNS = _runs(
    t.runs.c.job_id.in_(select(t.jobs.c.id).where(t.jobs.c.changed >= bindparam("mark"))),
    bindparam("executor"),
)


def active_runs_held_by(executor: str) -> Select[Any]:
    """The executor's active runs, as a full read takes them, through ix_runs_active."""
    return _runs(text(t.active_run("runs")), executor)


class ExecutorRuns:
    """Every executor's held runs at this replica."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextmanager
    def held(self, executor: str) -> Iterator[HeldRuns]:
        """The executor's held runs for a sync wrapped in this block (one sync of an
        executor at a time here): kept for its next sync only if the block ends without an
        exception, after the sync's transaction committed."""
        with self._guard:
            lock = self._locks.setdefault(executor, threading.Lock())
        with lock:
            runs = HeldRuns(self._held.pop(executor, None))
            yield runs
            if runs.held is not None:
                self._held[executor] = runs.held

    def holding(self, executor: str) -> ActiveRuns | None:
        """What is held of the executor's runs (None: its next sync here reads them all)."""
        held = self._held.get(executor)
        return None if held is None else held.runs
