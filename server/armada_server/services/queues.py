"""QueueService: queue CRUD, cordoning, and cancel/preempt across a queue."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence

from google.protobuf import empty_pb2

from armada_core.api import submit_pb2, submit_pb2_grpc
from armada_core.jobs import JobState
from armada_server.errors import ApiError, InvalidArgument
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, principal_of, rpc, streaming_rpc
from armada_server.storage.submission import NON_TERMINAL

_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_VERBS = {"submit", "cancel", "preempt", "reprioritize", "watch"}
_KINDS = {"User", "Group"}


def check_queue(queue: submit_pb2.Queue) -> submit_pb2.Queue:
    """Validate a queue; a priority factor of 0 (unset) means 1."""
    if not queue.name or len(queue.name) > 63 or not set(queue.name) <= _NAME_OK:
        raise InvalidArgument(
            f"name: {queue.name!r} is not a valid queue name (letters, "
            "digits, '-', '_' and '.', at most 63 characters)"
        )
    out = submit_pb2.Queue()
    out.CopyFrom(queue)
    if out.priority_factor == 0:
        out.priority_factor = 1.0
    if not math.isfinite(out.priority_factor) or out.priority_factor < 0:
        raise InvalidArgument(f"priority_factor: must be positive, got {queue.priority_factor}")
    for i, p in enumerate(out.permissions):
        for j, s in enumerate(p.subjects):
            if s.kind not in _KINDS:
                raise InvalidArgument(
                    f"permissions[{i}].subjects[{j}].kind: must be User or Group, got {s.kind!r}"
                )
        for verb in p.verbs:
            if verb not in _VERBS:
                raise InvalidArgument(
                    f"permissions[{i}].verbs: unknown verb {verb!r} "
                    f"(known: {', '.join(sorted(_VERBS))})"
                )
    return out


def check_name(name: str) -> str:
    """A queue name to look up: text with NUL never names a queue (PostgreSQL refuses it)."""
    if "\x00" in name:
        raise InvalidArgument("name: must not contain NUL characters")
    return name


# Public job states a queue-wide cancel may name, and the stored states they cover.
_STATE_FILTER = {
    submit_pb2.QUEUED: (JobState.SUBMITTED, JobState.QUEUED),
    submit_pb2.LEASED: (JobState.LEASED,),
    submit_pb2.PENDING: (JobState.LEASED, JobState.PENDING),
    submit_pb2.RUNNING: (JobState.RUNNING,),
}


def states_from_filter(states: Sequence[submit_pb2.JobState.ValueType]) -> tuple[JobState, ...]:
    if not states:
        return NON_TERMINAL
    out: list[JobState] = []
    for s in states:
        if s not in _STATE_FILTER:
            name = (
                submit_pb2.JobState.Name(s)
                if s in submit_pb2.JobState.values()
                else f"{s} (not a job state)"
            )
            raise InvalidArgument(
                f"states: {name} is not a state jobs "
                "can be cancelled in (QUEUED, LEASED, PENDING, RUNNING)"
            )
        out.extend(_STATE_FILTER[s])
    return tuple(dict.fromkeys(out))


class QueueService(submit_pb2_grpc.QueueServiceServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @rpc
    async def CreateQueue(self, request: submit_pb2.Queue, context: RpcContext) -> empty_pb2.Empty:
        self.ctx.require_admin("create queues")
        await self.ctx.run(self.ctx.queues.create_queue, check_queue(request))
        return empty_pb2.Empty()

    @rpc
    async def CreateQueues(
        self, request: submit_pb2.QueueList, context: RpcContext
    ) -> submit_pb2.BatchQueueCreateResponse:
        self.ctx.require_admin("create queues")
        failed = []
        for queue in request.queues:
            try:
                await self.ctx.run(self.ctx.queues.create_queue, check_queue(queue))
            except ApiError as e:
                failed.append(submit_pb2.QueueCreateResponse(queue=queue, error=str(e)))
        return submit_pb2.BatchQueueCreateResponse(failed_queues=failed)

    @rpc
    async def UpdateQueue(self, request: submit_pb2.Queue, context: RpcContext) -> empty_pb2.Empty:
        self.ctx.require_admin("update queues")
        await self.ctx.run(self.ctx.queues.update_queue, check_queue(request))
        return empty_pb2.Empty()

    @rpc
    async def UpdateQueues(
        self, request: submit_pb2.QueueList, context: RpcContext
    ) -> submit_pb2.BatchQueueUpdateResponse:
        self.ctx.require_admin("update queues")
        failed = []
        for queue in request.queues:
            try:
                await self.ctx.run(self.ctx.queues.update_queue, check_queue(queue))
            except ApiError as e:
                failed.append(submit_pb2.QueueUpdateResponse(queue=queue, error=str(e)))
        return submit_pb2.BatchQueueUpdateResponse(failed_queues=failed)

    @rpc
    async def DeleteQueue(
        self, request: submit_pb2.QueueDeleteRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        self.ctx.require_admin("delete queues")
        await self.ctx.run(self.ctx.queues.delete_queue, check_name(request.name))
        return empty_pb2.Empty()

    @rpc
    async def GetQueue(
        self, request: submit_pb2.QueueGetRequest, context: RpcContext
    ) -> submit_pb2.Queue:
        return await self.ctx.run(self.ctx.queues.get_queue, check_name(request.name))

    @streaming_rpc
    async def GetQueues(
        self, request: submit_pb2.StreamingQueueGetRequest, context: RpcContext
    ) -> AsyncIterator[submit_pb2.StreamingQueueMessage]:
        queues = await self.ctx.run(self.ctx.queues.list_queues)
        if request.num:
            queues = queues[: request.num]
        for queue in queues:
            yield submit_pb2.StreamingQueueMessage(queue=queue)
        yield submit_pb2.StreamingQueueMessage(end=submit_pb2.EndMarker())

    @rpc
    async def CordonQueue(
        self, request: submit_pb2.QueueCordonRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        self.ctx.require_admin("cordon queues")
        await self.ctx.run(self.ctx.queues.set_cordoned, check_name(request.name), True)
        return empty_pb2.Empty()

    @rpc
    async def UncordonQueue(
        self, request: submit_pb2.QueueUncordonRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        self.ctx.require_admin("uncordon queues")
        await self.ctx.run(self.ctx.queues.set_cordoned, check_name(request.name), False)
        return empty_pb2.Empty()

    @rpc
    async def PreemptOnQueue(
        self, request: submit_pb2.QueuePreemptRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        await self.ctx.authorize(request.name, "preempt")
        results = await self.ctx.run(
            self.ctx.submissions.request_preemption,
            request.name,
            "",
            None,
            reason="preempted on queue",
            requestor=principal_of(context).name,
            priority_classes=list(request.priorityClasses),
        )
        self.ctx.metrics.count_manual_preemptions(request.name, results.values())
        return empty_pb2.Empty()

    @rpc
    async def CancelOnQueue(
        self, request: submit_pb2.QueueCancelRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        await self.ctx.authorize(request.name, "cancel")
        states = states_from_filter(request.jobStates)
        await self.ctx.run(
            self.ctx.submissions.cancel_on_queue,
            request.name,
            priority_classes=list(request.priorityClasses),
            states=states,
            requestor=principal_of(context).name,
        )
        return empty_pb2.Empty()
