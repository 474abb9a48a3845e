"""One live generation per task and queue, decided in the transaction that stores the jobs.

Two attempts of one task that reach submission at the same instant both find nothing live and
both submit; only the server can tell them apart. A submission of jobs with a task
(armada_core.jobs.tasks) first locks the task's row in `task_locks` (an upsert per task, in
task order, so two submitters of overlapping tasks never deadlock), then looks for the task's
live jobs with a new statement: on PostgreSQL's READ COMMITTED that statement sees whatever the
previous holder of the lock committed; SQLite has one writer at a time. Live jobs of another
attempt or generation refuse the submission (ALREADY_EXISTS) naming them; jobs of the same
attempt and generation (the other members of a gang submitted in parts) are the same
generation.

Liveness is read, not kept: a job is live while it has not ended, or while a run the server
ended still holds its node (`runs.releases_at` in the future, not a lease that expired: the
same test GetJobDetails uses to leave such a run's finished time out). So no flag has to be
kept up wherever a job or run ends, and a run's release (its executor's confirmation, or its
grace running out) frees the task at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Insert, or_, select

from armada_core.api import submit_pb2
from armada_core.jobs import TERMINAL_STATES, RunState
from armada_core.jobs import annotations as ann
from armada_core.jobs.tasks import (
    LIVE_GENERATION_METADATA,
    MAX_TASK,
    LiveGeneration,
    generation_of,
    task_of,
)
from armada_server.errors import AlreadyExists, InvalidArgument
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import executemany
from armada_server.storage.rows import chunks

Specs = Sequence[tuple[int, submit_pb2.Job]]


class LiveGenerationExists(AlreadyExists):
    """A submission would start a second live generation of a task: the live one's jobs,
    in the message and, for the task lifecycle, in the trailing metadata."""

    def __init__(self, live: LiveGeneration) -> None:
        super().__init__(live.describe())
        self.live = live
        self.trailing_metadata = ((LIVE_GENERATION_METADATA, live.encode()),)


def refuse_second_generation(
    tx: Transactions, conn: Connection, queue: str, specs: Specs, now: datetime
) -> None:
    """Lock the tasks of the new jobs `specs` (index in the request, job) and refuse them
    (LiveGenerationExists) if one of those tasks has live jobs of another generation."""
    mine = _generations(specs)
    if not mine:
        return
    tasks = sorted(mine)
    executemany(
        conn,
        _lock_statement(tx),
        [{"queue": queue, "task": task, "locked_at": now} for task in tasks],
    )
    for task, jobs in sorted(_live_jobs(conn, queue, tasks, now).items()):
        rivals = [j for j in jobs if j[3] != mine[task]]
        if rivals:
            raise LiveGenerationExists(_answer(task, rivals))


# The upsert that locks a task's row, per dialect: one statement object, whose compiled form
# bulk.executemany caches (compiling a multi-row INSERT per request cost more than the rest).
_LOCKS: dict[str, Insert] = {}


def _lock_statement(tx: Transactions) -> Insert:
    found = _LOCKS.get(tx.dialect)
    if found is None:
        stmt = tx.insert(t.task_locks)
        found = _LOCKS[tx.dialect] = stmt.on_conflict_do_update(
            index_elements=[t.task_locks.c.queue, t.task_locks.c.task],
            set_={"locked_at": stmt.excluded.locked_at},
        )
    return found


def _generations(specs: Specs) -> dict[str, tuple[str, str]]:
    """Each task of `specs` with its attempt and generation; a task too long to index, or
    one request's jobs of one task in several generations, is refused."""
    found: dict[str, tuple[int, tuple[str, str]]] = {}
    for index, spec in specs:
        task = task_of(spec.annotations)
        if task is None:
            continue
        where = f"job_request_items[{index}].annotations[{ann.TASK}]"
        if len(task) > MAX_TASK:
            raise InvalidArgument(
                f"{where}: must be at most {MAX_TASK} characters, got {len(task)}"
            )
        generation = generation_of(spec.annotations)
        first = found.setdefault(task, (index, generation))
        if first[1] != generation:
            raise InvalidArgument(
                f"{where}: the jobs of one task in one request are one generation, but item "
                f"{first[0]} is attempt {first[1][0]!r} generation {first[1][1]!r} and item "
                f"{index} attempt {generation[0]!r} generation {generation[1]!r}"
            )
    return {task: generation for task, (_, generation) in found.items()}


# A live job of a task: id, job set, submitted at, (attempt, generation).
_Live = tuple[str, str, Any, tuple[str, str]]


def _live_jobs(
    conn: Connection, queue: str, tasks: Sequence[str], now: datetime
) -> dict[str, list[_Live]]:
    """The live jobs of `tasks` in `queue` (see the module docstring), by task."""
    stopping = (
        select(t.runs.c.id)
        .where(
            t.runs.c.job_id == t.jobs.c.id,
            t.runs.c.releases_at > now,
            t.runs.c.state != int(RunState.LEASE_EXPIRED),
        )
        .exists()
    )
    out: dict[str, list[_Live]] = defaultdict(list)
    for chunk in chunks(tasks, 500):
        rows: Sequence[tuple[str, str, str, Any, bytes]] = conn.execute(
            select(
                t.jobs.c.task, t.jobs.c.id, t.jobs.c.job_set, t.jobs.c.submitted_at, t.jobs.c.spec
            ).where(
                t.jobs.c.queue == queue,
                t.jobs.c.task.in_(chunk),
                or_(t.jobs.c.state.not_in([int(s) for s in TERMINAL_STATES]), stopping),
            )
        ).all()
        for task, job_id, job_set, submitted_at, spec in rows:
            annotations = submit_pb2.Job.FromString(spec).annotations
            out[task].append((job_id, job_set, submitted_at, generation_of(annotations)))
    return out


def _answer(task: str, rivals: Sequence[_Live]) -> LiveGeneration:
    """The live generation to name: the latest submitted, when (from before this check
    existed) there are several."""
    groups: dict[tuple[tuple[str, str], str], list[_Live]] = defaultdict(list)
    for job in rivals:
        groups[(job[3], job[1])].append(job)
    (attempt, generation), job_set = max(groups, key=lambda k: max(j[2] for j in groups[k]))
    jobs = sorted(groups[((attempt, generation), job_set)], key=lambda j: (j[2], j[0]))
    return LiveGeneration(task, job_set, tuple(j[0] for j in jobs), attempt, generation)
