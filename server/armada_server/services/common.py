"""What every service needs: its parts of storage, errors as gRPC codes, the caller's identity."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from armada_core.api import submit_pb2
from armada_core.jobs import SubmissionError
from armada_server.auth import Authorizer, Principal, current_principal
from armada_server.config import ServerConfig
from armada_server.errors import ApiError
from armada_server.eventhub import EventHub
from armada_server.guarded import Request, Response, RpcContext
from armada_server.metrics import Metrics
from armada_server.storage.base import Transactions
from armada_server.storage.cycle_reports import CycleReports
from armada_server.storage.events import EventLog
from armada_server.storage.job_reads import JobReads
from armada_server.storage.nodes import Nodes
from armada_server.storage.places import Places
from armada_server.storage.queues import Queues, RetryPolicies
from armada_server.storage.scheduling_reads import SchedulingReads
from armada_server.storage.submission import Submissions
from armada_server.storage.sync import ExecutorSync

log = logging.getLogger("armada_server")
T = TypeVar("T")
Servicer = TypeVar("Servicer")
# An error's message travels in gRPC trailing metadata, which clients cap at a few KB: a
# longer one would reach them only as "received metadata size exceeds hard limit".
MAX_ERROR_MESSAGE = 2000


def bounded(message: str) -> str:
    """`message`, cut to MAX_ERROR_MESSAGE characters."""
    return (
        message
        if len(message) <= MAX_ERROR_MESSAGE
        else (message[:MAX_ERROR_MESSAGE] + "... (truncated)")
    )


@dataclass
class Context:
    """Shared by the services of one server, with the parts of storage they use."""

    config: ServerConfig
    hub: EventHub
    pool: ThreadPoolExecutor
    authorizer: Authorizer
    metrics: Metrics
    queues: Queues
    retry_policies: RetryPolicies
    submissions: Submissions
    events: EventLog
    job_reads: JobReads
    places: Places
    nodes: Nodes
    executors: ExecutorSync
    scheduling_reads: SchedulingReads
    # The kept scheduling cycles and jobs' reason histories (the scheduling reports).
    cycle_reports: CycleReports
    # The database and its commit hook (capability checks, the web UI's live feed).
    transactions: Transactions
    # Asks the scheduling loop for a cycle now (new work arrived).
    wake_scheduler: Callable[[], None] = lambda: None
    # Each queue's read in flight for `authorize`, which every caller of it meanwhile shares.
    _queue_reads: dict[str, asyncio.Future[submit_pb2.Queue]] = field(
        default_factory=dict, init=False, repr=False
    )

    async def authorize(self, queue: str, verb: str) -> None:
        """PERMISSION_DENIED unless the caller may `verb` on `queue` (NOT_FOUND if missing)."""
        queue_spec = await self._stored_queue(queue)
        self.authorizer.require(current_principal(), queue_spec, verb)

    async def _stored_queue(self, queue: str) -> submit_pb2.Queue:
        """The queue as stored. A caller shares a read of the queue already in flight when
        it arrives, else starts one: a thousand watchers starting at once made a thousand
        reads, queued behind submissions for the same threads. No result outlives its read."""
        reading = self._queue_reads.get(queue)
        if reading is None:
            reading = asyncio.ensure_future(self.run(self.queues.get_queue, queue))
            self._queue_reads[queue] = reading

            def done(read: asyncio.Future[submit_pb2.Queue], queue: str = queue) -> None:
                if self._queue_reads.get(queue) is read:
                    del self._queue_reads[queue]
                if not read.cancelled():
                    read.exception()  # retrieved, even when every caller went away

            reading.add_done_callback(done)
        # Shielded: a caller that goes away does not cancel the others' read.
        return await asyncio.shield(reading)

    def require_admin(self, action: str) -> None:
        self.authorizer.require_admin(current_principal(), action)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking storage work off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


def principal_of(context: RpcContext) -> Principal:
    """The authenticated caller (anonymous when authentication is off)."""
    return current_principal()


def rpc(
    method: Callable[[Servicer, Request, RpcContext], Awaitable[Response]],
) -> Callable[[Servicer, Request, RpcContext], Coroutine[Any, Any, Response]]:
    """Answer ApiError and SubmissionError with their status codes, log anything else."""

    @functools.wraps(method)
    async def unary(self: Servicer, request: Request, context: RpcContext) -> Response:
        try:
            return await method(self, request, context)
        except ApiError as e:
            await context.abort(e.code, bounded(str(e)), trailing_metadata=e.trailing_metadata)
        except SubmissionError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bounded(str(e)))

    return unary


def streaming_rpc(
    method: Callable[[Servicer, Request, RpcContext], AsyncIterator[Response]],
) -> Callable[[Servicer, Request, RpcContext], AsyncIterator[Response]]:
    """Answer ApiError with its status code (the messages sent before it stay sent)."""

    @functools.wraps(method)
    async def stream(
        self: Servicer, request: Request, context: RpcContext
    ) -> AsyncIterator[Response]:
        try:
            async for item in method(self, request, context):
                yield item
        except ApiError as e:
            await context.abort(e.code, bounded(str(e)))

    return stream
