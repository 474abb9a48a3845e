"""Event: stream a job set's log from any message id, and keep streaming while watching.

Message ids are the job set's sequence numbers as decimal strings. New events reach watchers
as soon as the event hub has read them, which it does once for all watchers right after each
commit (see eventhub.py); there is no polling delay.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from google.protobuf import empty_pb2

from armada_core.api import event_pb2, event_pb2_grpc, health_pb2
from armada_core.client.watching import HEARTBEAT_METADATA as HEARTBEAT_REQUEST
from armada_core.waiting import wait_event
from armada_server.errors import InvalidArgument, NotFound
from armada_server.eventhub import Delivery, delivery
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc, streaming_rpc

# Clients that understand heartbeats (armada_core.client) ask for them with this metadata key;
# a heartbeat is an EventStreamMessage with the last id and no event. The official client
# would reject such a message, so it never gets one.
HEARTBEAT_METADATA = HEARTBEAT_REQUEST[0]
BATCH = 1000
# What a stream sends: a heartbeat message, or a stored event as encoded once for all its
# watchers (`eventhub.delivery`; the server's handlers send bytes as they are, guarded.py).
Streamed = event_pb2.EventStreamMessage | bytes
MAX_MESSAGE_ID = 2**63 - 1  # sequence numbers are 64-bit integers in the database


def parse_message_id(text: str) -> int:
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(
            f"from_message_id: {text!r} is not a message id of this server"
        ) from None
    if value < 0 or value > MAX_MESSAGE_ID:
        raise InvalidArgument(f"from_message_id: {text!r} is not a message id of this server")
    return value


def check_job_set(queue: str, job_set: str) -> None:
    if not queue or not job_set:
        raise InvalidArgument("queue and id (the job set) are required")
    if "\x00" in queue or "\x00" in job_set:
        raise InvalidArgument("queue and id (the job set) must not contain NUL characters")


class EventService(event_pb2_grpc.EventServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @streaming_rpc
    async def GetJobSetEvents(  # type: ignore[override]  # sends encoded messages too
        self, request: event_pb2.JobSetRequest, context: RpcContext
    ) -> AsyncIterator[Streamed]:
        check_job_set(request.queue, request.id)
        after = parse_message_id(request.from_message_id)
        await self.ctx.authorize(request.queue, "watch")
        async for message in self._stream(
            request.queue,
            request.id,
            after,
            watch=request.watch,
            error_if_missing=request.errorIfMissing,
            context=context,
        ):
            yield message

    @streaming_rpc
    async def Watch(  # type: ignore[override]  # sends encoded messages too
        self, request: event_pb2.WatchRequest, context: RpcContext
    ) -> AsyncIterator[Streamed]:
        if not request.queue or not request.job_set_id:
            raise InvalidArgument("queue and job_set_id are required")
        check_job_set(request.queue, request.job_set_id)
        await self.ctx.authorize(request.queue, "watch")
        async for message in self._stream(
            request.queue,
            request.job_set_id,
            parse_message_id(request.from_id),
            watch=True,
            error_if_missing=False,
            context=context,
        ):
            yield message

    @rpc
    async def Health(
        self, request: empty_pb2.Empty, context: RpcContext
    ) -> health_pb2.HealthCheckResponse:
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    async def _stream(
        self,
        queue: str,
        job_set: str,
        after: int,
        *,
        watch: bool,
        error_if_missing: bool,
        context: RpcContext,
    ) -> AsyncIterator[Streamed]:
        store = self.ctx.events
        if not watch:
            end = await self.ctx.run(store.last_seq, queue, job_set)
            if end is None and error_if_missing:
                raise NotFound(f"job set {job_set!r} in queue {queue!r} has no events")
            while end is not None and after < end:
                batch = await self._read_log(queue, job_set, after)
                for seq, data, _ in batch:
                    if seq > end:
                        return
                    yield data
                    after = seq
                if len(batch) < BATCH:
                    return
            return
        heartbeats = any(k == HEARTBEAT_METADATA for k, _ in (context.invocation_metadata() or ()))
        with self.ctx.hub.subscribe((queue, job_set)) as watcher:
            # From the hub, not a read per watcher: a thousand watchers starting at once each
            # read the log twice. A set the hub has seen no events of is looked up, if it must
            # exist: its first events may have committed since the hub's read.
            end = await watcher.newest()
            if not end and error_if_missing:
                end = await self.ctx.run(store.last_seq, queue, job_set)
                if end is None:
                    raise NotFound(f"job set {job_set!r} in queue {queue!r} has no events")
                self.ctx.hub.notify([(queue, job_set)])  # it has events the hub has not read
            # Events stored before the watch began are history: only the live tail is lag.
            live_after = end or 0
            lag = self.ctx.metrics.event_lag
            while True:
                watcher.woken.clear()
                # From the hub's memory when it reaches back to `after` (one read of the log
                # serves every watcher), else from the log itself: history, or a watcher that
                # fell more than the hub keeps behind.
                kept = watcher.since(after, BATCH)
                batch = await self._read_log(queue, job_set, after) if kept is None else kept
                for seq, data, created in batch:
                    yield data
                    if seq > live_after:
                        lag.observe(max(0.0, time.time() - created))
                    after = seq
                if len(batch) == BATCH:
                    continue
                woke = await wait_event(watcher.woken, self.ctx.config.heartbeat_seconds)
                if not woke and heartbeats:
                    yield event_pb2.EventStreamMessage(id=str(after))

    async def _read_log(self, queue: str, job_set: str, after: int) -> list[Delivery]:
        stored = await self.ctx.run(self.ctx.events.events_after, queue, job_set, after, BATCH)
        return [delivery(e) for e in stored]
