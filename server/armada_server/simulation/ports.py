"""The server a simulation drives.

`InProcess` is the server's own storage and scheduling loop, called directly on a private
SQLite database: what `armada-server simulate` uses. `OverGrpc` is a running server (an
`EmbeddedServer` started with the same virtual clock and no cycles of its own), reached as
clients and executors reach it: submissions and executor syncs over gRPC, and the server's
own `SchedulingLoop.cycle()` at the driver's instants. Both go through the same validation,
storage and loop; the comparison test runs one workload through each and finds the same
decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from pathlib import Path
from typing import Protocol

import grpc

from armada_core.api import (
    executor_pb2,
    executor_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_core.jobs import JobState
from armada_server.config import ServerConfig
from armada_server.scheduling.loop import SchedulingLoop
from armada_server.services.submit import validate_submission
from armada_server.storage import Storage
from armada_server.storage.database import open_database
from armada_server.storage.nodes import encode_request_nodes

OWNER = "simulation"


class Port(Protocol):
    def create_queue(self, queue: submit_pb2.Queue) -> None: ...

    def submit(self, request: submit_pb2.JobSubmitRequest) -> list[str]:
        """The job ids, one per item."""
        ...

    def sync(
        self, request: executor_pb2.SyncRequest, held: AbstractSet[str]
    ) -> executor_pb2.SyncResponse:
        """One sync of `request`, whose executor holds the runs `held` (its `run_ids`)."""
        ...

    def cycle(self) -> int:
        """One scheduling cycle at the clock's time; the leases it made."""
        ...

    def job_states(self, job_ids: Sequence[str]) -> Mapping[str, JobState]: ...

    def close(self) -> None: ...


class InProcess:
    """The server's storage and scheduling loop on a SQLite file of its own."""

    def __init__(self, config: ServerConfig, database: Path, clock: Callable[[], datetime]):
        self.config = config
        self.storage = Storage(
            open_database(f"sqlite:///{database}", durable=False),
            clock=clock,
            retry_settings=config.retry,
        )
        storage = self.storage
        self.loop = SchedulingLoop.over(storage, config, clock=clock)
        self.submission = config.submission()
        self._nodes: tuple[Sequence[executor_pb2.Node], bytes] | None = None

    def create_queue(self, queue: submit_pb2.Queue) -> None:
        self.storage.queues.create_queue(queue)

    def submit(self, request: submit_pb2.JobSubmitRequest) -> list[str]:
        items = validate_submission(request, self.submission)
        return self.storage.submissions.submit(
            request.queue, request.job_set_id, items, owner=OWNER
        )

    def sync(
        self, request: executor_pb2.SyncRequest, held: AbstractSet[str]
    ) -> executor_pb2.SyncResponse:
        # The driver's nodes never change and come in the same container every sync (its
        # one request): encode them once (ExecutorApi encodes them per sync). The runs held
        # go as the set they are, not through the message's thousands of strings.
        if self._nodes is None or self._nodes[0] is not request.nodes:
            self._nodes = (request.nodes, encode_request_nodes(request))
        response = self.storage.executors.executor_sync(request, nodes=self._nodes[1], held=held)
        response.lease_timeout_seconds = self.config.lease_timeout
        return response

    def cycle(self) -> int:
        return self.loop.cycle()

    def job_states(self, job_ids: Sequence[str]) -> Mapping[str, JobState]:
        return self.storage.job_reads.job_states(job_ids)

    def close(self) -> None:
        self.loop.close()
        self.storage.engine.dispose()


class OverGrpc:
    """A running server: gRPC for submissions, syncs and job states; its own loop's cycle."""

    def __init__(
        self, address: str, loop: SchedulingLoop, metadata: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.channel = grpc.insecure_channel(address)
        self.metadata = tuple(metadata)  # credentials, when the server asks for them
        self.submit_stub = submit_pb2_grpc.SubmitStub(self.channel)
        self.queues = submit_pb2_grpc.QueueServiceStub(self.channel)
        self.executor = executor_pb2_grpc.ExecutorApiStub(self.channel)
        self.jobs = job_pb2_grpc.JobsStub(self.channel)
        self.loop = loop

    def create_queue(self, queue: submit_pb2.Queue) -> None:
        self.queues.CreateQueue(queue, metadata=self.metadata)

    def submit(self, request: submit_pb2.JobSubmitRequest) -> list[str]:
        response = self.submit_stub.SubmitJobs(request, metadata=self.metadata)
        return [i.job_id for i in response.job_response_items]

    def sync(
        self, request: executor_pb2.SyncRequest, held: AbstractSet[str]
    ) -> executor_pb2.SyncResponse:
        del request.run_ids[:]
        request.run_ids.extend(held)  # a set to the server: in any order
        response: executor_pb2.SyncResponse = self.executor.Sync(request, metadata=self.metadata)
        return response

    def cycle(self) -> int:
        return self.loop.cycle()

    def job_states(self, job_ids: Sequence[str]) -> Mapping[str, JobState]:
        response = self.jobs.GetJobStatus(
            job_pb2.JobStatusRequest(job_ids=list(job_ids)), metadata=self.metadata
        )
        return {job: JobState(state) for job, state in response.job_states.items()}

    def close(self) -> None:
        self.channel.close()
