"""New jobs made from items alike: the stored spec and `submitted`/`queued` events that the
jobs of one item share, encoded once.

A large request mostly repeats one item with a client id of its own per copy. Building,
copying and serialising each job's spec and its two events was most of what storing such a
request cost. A protobuf message's encoding is the concatenation of its fields' encodings, in
any order, so each job's spec is its id, its client id and the shared encoding, and its
events are the shared headers with its id and spec appended. Parsing them gives exactly
what `job_from_item` and `lifecycle.submitted` build (tests/jobs/test_alike.py).
"""

from __future__ import annotations

from datetime import datetime

from armada_core.api import event_pb2, submit_pb2
from armada_core.api.wire import field, tag
from armada_core.jobs.lifecycle import EventMessage, timestamp
from armada_core.jobs.submission import job_from_item

_JOB_ID = tag(submit_pb2.Job, "id")
_CLIENT_ID = tag(submit_pb2.Job, "client_id")
_SUBMITTED = tag(EventMessage, "submitted")
_QUEUED = tag(EventMessage, "queued")
_SUBMITTED_JOB_ID = tag(event_pb2.JobSubmittedEvent, "job_id")
_SUBMITTED_JOB = tag(event_pb2.JobSubmittedEvent, "job")
_QUEUED_JOB_ID = tag(event_pb2.JobQueuedEvent, "job_id")


def client_id_field(client_id: str) -> bytes:
    """A stored spec's client id as `AlikeJobs` writes it, right after the id (nothing when
    empty): storage keys specs on what follows it (rows.spec_key)."""
    return field(_CLIENT_ID, client_id.encode()) if client_id else b""


class AlikeJobs:
    """The jobs of items that differ only in their client ids, submitted at `now`: `spec` is
    their stored spec without an id or client id (what they share), and `encoded` each one's
    spec and events."""

    __slots__ = ("_queued", "_spec", "_submitted", "spec")

    def __init__(
        self,
        item: submit_pb2.JobSubmitRequestItem,
        *,
        queue: str,
        job_set_id: str,
        owner: str,
        now: datetime,
        groups: tuple[str, ...] = (),
    ) -> None:
        shared = submit_pb2.JobSubmitRequestItem()
        shared.CopyFrom(item)
        shared.client_id = ""
        self.spec = job_from_item(
            shared,
            job_id="",
            queue=queue,
            job_set_id=job_set_id,
            owner=owner,
            now=now,
            groups=groups,
        )
        self._spec = self.spec.SerializeToString()
        created = timestamp(now)
        self._submitted = event_pb2.JobSubmittedEvent(
            job_set_id=job_set_id, queue=queue, created=created
        ).SerializeToString()
        self._queued = event_pb2.JobQueuedEvent(
            job_set_id=job_set_id, queue=queue, created=created
        ).SerializeToString()

    def encoded(self, job_id: str, client_id: str) -> tuple[bytes, bytes, bytes]:
        """The job's stored spec, and its `submitted` and `queued` events, serialised."""
        if not job_id:
            raise ValueError("a job needs an id before it is submitted")
        own = job_id.encode()
        # The id first, as the serialiser writes it, then the client id: storage keys what a
        # spec decides on the bytes after them (rows.spec_key), the same for jobs alike.
        spec = field(_JOB_ID, own) + client_id_field(client_id) + self._spec
        submitted = self._submitted + field(_SUBMITTED_JOB_ID, own) + field(_SUBMITTED_JOB, spec)
        queued = self._queued + field(_QUEUED_JOB_ID, own)
        return spec, field(_SUBMITTED, submitted), field(_QUEUED, queued)
