"""A submission's new jobs, made before its write transaction opens: their rows and
events' rows, and the verdict of the caller's checks on them.

Items that differ only in their client ids make their jobs from what they share
(`AlikeJobs`): a row, a spec and events' headers made once, and each job's id and client id
put in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from armada_core.api import submit_pb2
from armada_core.jobs import new_job_ids
from armada_core.jobs.alike import AlikeJobs
from armada_core.jobs.lifecycle import timestamp
from armada_core.jobs.submission import CheckedItems, without_client_id
from armada_server.storage import schema as t
from armada_server.storage.base import NewEvents, from_timestamp, new_event_rows
from armada_server.storage.bulk import NewRows, sqlite_value
from armada_server.storage.rows import job_row

#: Called with the new jobs a submission built (each with its item's index in the request,
#: and its spec as stored but for its id and client id, one object for the jobs of items
#: alike) before its transaction, and again in it with those it stores when some of them
#: turned out to be stored already; raises to refuse the request.
Admit = Callable[[Sequence[tuple[int, submit_pb2.Job]]], None]


class NewJob(NamedTuple):
    """An item of a request as a new job: what storing it writes (a tuple: a request makes
    one per job, and a frozen dataclass took three times as long to make)."""

    position: int  # its item's, in the request
    id: str
    spec: submit_pb2.Job  # as stored, but for its id and client id (shared with items alike)
    row: tuple[Any, ...]  # as `JobRows` makes it
    events: tuple[tuple[Any, ...], tuple[Any, ...]]  # `submitted`, `queued`: the events' rows


@dataclass(frozen=True, slots=True)
class Made:
    """What storing every job a request built writes, made before the write transaction
    opens: the jobs' rows, their events' rows, and `admit`'s verdict on them. The
    transaction uses it when none of them turns out to be stored already (always, for a
    request without client ids); otherwise it writes the jobs it finds new from their rows.
    `admit`'s refusal of them waits for the transaction, which raises it where it asked
    `admit` before (after the queue's cordon and the tasks' generations)."""

    jobs: NewRows
    events: list[NewEvents]
    refusal: Exception | None

    @classmethod
    def of(cls, names: JobRows, new: Mapping[int, NewJob], admit: Admit | None) -> Made:
        jobs = list(new.values())
        refusal = None
        if admit is not None:
            try:
                admit([(job.position, job.spec) for job in jobs])
            except Exception as e:  # raised by the transaction, if these are what it stores
                refusal = e
        return cls(names.rows(jobs), events_of(jobs), refusal)


class JobRows:
    """New jobs' rows as the driver takes them: those of jobs alike differ from the first
    one's only in the columns of their ids and their spec."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.names: tuple[str, ...] = ()
        self.id = self.client_id = self.spec = 0  # the columns' places in a row

    def like(self, spec: submit_pb2.Job, now: datetime) -> list[Any]:
        """The row of jobs of `spec` (the stored spec but for the id and client id)."""
        made = NewRows(self.dialect, t.jobs, [job_row(spec, now)])
        if not self.names:
            self.names = made.names
            self.id, self.client_id, self.spec = map(made.names.index, ("id", "client_id", "spec"))
        return list(made.values[0])

    def rows(self, jobs: Sequence[NewJob]) -> NewRows:
        # In client-id order: two submissions sharing client ids then meet on the first they
        # share, where one waits for the other, and never each hold one the other needs
        # (which PostgreSQL ends as a deadlock).
        place = self.client_id
        ordered = sorted((job.row for job in jobs), key=lambda row: row[place] or "")
        return NewRows.of_values(t.jobs, self.names, ordered)


def events_of(jobs: Sequence[NewJob]) -> list[NewEvents]:
    """The events of new jobs of one job set, in order: each job's `submitted`, then its
    `queued`."""
    rows = [row for job in jobs for row in job.events]
    return [new_event_rows((rows[0][0], rows[0][1]), rows)] if rows else []


def new_jobs(
    items: Sequence[submit_pb2.JobSubmitRequestItem],
    queue: str,
    job_set: str,
    owner: str,
    groups: tuple[str, ...],
    now: datetime,
    names: JobRows,
) -> dict[int, NewJob]:
    """Each item as a new job, by its index, but for the items repeating a client id of an
    earlier one: those are the earlier one's job. Items whose client id turns out to be
    stored already are built for nothing (a resubmission), and their ids are never used.
    Items that differ only in their client ids share what they make (`AlikeJobs`)."""
    firsts: list[int] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item.client_id:
            if item.client_id in seen:
                continue
            seen.add(item.client_id)
        firsts.append(index)
    when: Any = from_timestamp(timestamp(now))  # the events' column, as `new_events` has it
    if names.dialect == "sqlite":
        when = sqlite_value(when)
    # Alike items (the same but for their client ids) make one kind: as validation found them,
    # or else as their serialisations without client ids say.
    kind_of = items.alike if isinstance(items, CheckedItems) else None
    kinds: dict[object, tuple[AlikeJobs, list[Any]]] = {}
    new: dict[int, NewJob] = {}
    for index, job_id in zip(firsts, new_job_ids(len(firsts)), strict=True):
        item = items[index]
        client_id = item.client_id
        key: object
        if kind_of is not None:
            key = kind_of[index]
        else:
            key = without_client_id(item) if len(firsts) > 1 else b""
        kind = kinds.get(key)
        if kind is None:
            alike = AlikeJobs(
                item, queue=queue, job_set_id=job_set, owner=owner, now=now, groups=groups
            )
            kind = kinds[key] = (alike, names.like(alike.spec, now))
        alike, row = kind
        spec, submitted, queued = alike.encoded(job_id, client_id)
        row[names.id], row[names.client_id], row[names.spec] = job_id, client_id or None, spec
        events = (
            (queue, job_set, job_id, when, submitted),
            (queue, job_set, job_id, when, queued),
        )
        new[index] = NewJob(index, job_id, alike.spec, tuple(row), events)
    return new
