"""Submit: submit, cancel, reprioritize and preempt jobs (and the legacy queue calls)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from google.protobuf import empty_pb2
from google.protobuf.message import Message

from armada_core.api import health_pb2, submit_pb2, submit_pb2_grpc, wire
from armada_core.jobs import SubmissionConfig, validate_request
from armada_core.jobs.submission import MAX_JOB_SET_ID, check_text
from armada_server.auth import Principal
from armada_server.config import ServerConfig
from armada_server.errors import InvalidArgument, ResourceExhausted
from armada_server.executors.kinds import server_kind
from armada_server.guarded import RpcContext
from armada_server.services.capabilities import CapabilityIndex, ExecutorCapabilities
from armada_server.services.common import Context, principal_of, rpc
from armada_server.services.node_fit import NodeFit
from armada_server.services.queues import QueueService, states_from_filter


def _require(field: str, value: str) -> None:
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    check_text(field, value, MAX_JOB_SET_ID)


def validate_submission(
    request: submit_pb2.JobSubmitRequest, config: SubmissionConfig
) -> list[submit_pb2.JobSubmitRequestItem]:
    try:
        return validate_request(request, config)
    except (UnicodeDecodeError, TypeError):
        # protobuf checks UTF-8 lazily: text in a nested message that is not UTF-8 comes back
        # as bytes (or fails) only when read, deep inside validation.
        where = invalid_text(request)
        if where is None:
            raise
        raise InvalidArgument(f"{where}: not valid UTF-8") from None


def invalid_text(message: Message, path: str = "") -> str | None:
    """The path of the first string field (or map key) of `message` that is not UTF-8."""
    for field, value in message.ListFields():
        name = f"{path}.{field.name}" if path else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            try:
                entries = list(value.items())
            except UnicodeDecodeError:
                return name
            for key, item in entries:
                if not isinstance(key, str | int | bool):
                    return f"{name}[{key!r}]"
                if value_field.message_type is not None:
                    found = invalid_text(item, f"{name}[{key}]")
                    if found:
                        return found
                elif value_field.type == value_field.TYPE_STRING and not isinstance(item, str):
                    return f"{name}[{key}]"
            continue
        repeated = field.is_repeated
        values = value if repeated else [value]
        for i, v in enumerate(values):
            where = f"{name}[{i}]" if repeated else name
            if field.message_type is not None:
                found = invalid_text(v, where)
                if found:
                    return found
            elif field.type == field.TYPE_STRING and not isinstance(v, str):
                return where
    return None


def refuse_oversized(request: submit_pb2.JobSubmitRequest, config: ServerConfig) -> int:
    """Refuse a request over the server's per-request limits, naming the limit: a client
    splits it into smaller ones. Returns the request's size in bytes."""
    items = len(request.job_request_items)
    if config.max_request_items is not None and items > config.max_request_items:
        raise ResourceExhausted(
            f"job_request_items: {items} items are more than the server's max_request_items "
            f"limit of {config.max_request_items}; submit them in smaller requests"
        )
    size = request.ByteSize()
    if config.max_request_bytes is not None and size > config.max_request_bytes:
        raise ResourceExhausted(
            f"the request is {size} bytes, more than the server's max_request_bytes limit of "
            f"{config.max_request_bytes}; submit its jobs in smaller requests"
        )
    return size


def builtin_capabilities(config: ServerConfig) -> ExecutorCapabilities | None:
    """What the server's own executor honours, known before its first sync."""
    kind = server_kind(config.executor)
    if kind is None:
        return None
    return ExecutorCapabilities(
        config.executor_id, config.pool, kind.capabilities.unsupported_pod_fields
    )


# Requests of up to this many items and bytes are checked on the event loop (about 60 us for
# eight items of a few KB): handing the check to a thread cost such a request more than the
# check itself. Larger ones go to a thread, as watchers wait while the loop is busy.
ITEMS_CHECKED_ON_THE_LOOP = 8
BYTES_CHECKED_ON_THE_LOOP = 64 * 1024


_ITEM = wire.tag(submit_pb2.JobSubmitResponse, "job_response_items")
_ITEM_JOB_ID = wire.tag(submit_pb2.JobSubmitResponseItem, "job_id")
_NOTE = wire.tag(submit_pb2.JobSubmitResponse, "notes")


def submit_response(ids: Sequence[str], notes: Sequence[str]) -> bytes:
    """SubmitJobs' JobSubmitResponse, encoded: a message per job id cost a 1,000-job request
    as much as a tenth of its store."""
    items = [wire.field(_ITEM, wire.field(_ITEM_JOB_ID, i.encode())) for i in ids]
    return b"".join([*items, *(wire.field(_NOTE, note.encode()) for note in notes)])


class SubmitService(submit_pb2_grpc.SubmitServicer):
    def __init__(self, ctx: Context, queues: QueueService) -> None:
        self.ctx = ctx
        self.queues = queues
        self.submission = ctx.config.submission()
        self.capabilities = CapabilityIndex(
            ctx.transactions.engine, builtin=builtin_capabilities(ctx.config)
        )
        self.node_fit = NodeFit(ctx.transactions, executor_timeout=ctx.config.lease_timeout)
        # Upstream kept the queue calls on Submit for older clients: same behaviour.
        for name in (
            "CreateQueue",
            "CreateQueues",
            "UpdateQueue",
            "UpdateQueues",
            "DeleteQueue",
            "GetQueue",
            "GetQueues",
        ):
            setattr(self, name, getattr(queues, name))

    @rpc
    async def SubmitJobs(  # type: ignore[override]  # answers encoded
        self, request: submit_pb2.JobSubmitRequest, context: RpcContext
    ) -> bytes:
        """The response comes encoded (guarded.py sends bytes as they are)."""
        who = principal_of(context)
        small = len(request.job_request_items) <= ITEMS_CHECKED_ON_THE_LOOP
        if small and refuse_oversized(request, self.ctx.config) <= BYTES_CHECKED_ON_THE_LOOP:
            items = self._validate(request)
            ids, notes = await self.ctx.run(self._store, request, items, who)
        else:
            ids, notes = await self.ctx.run(self._check_and_store, request, who)
        self.ctx.metrics.jobs_submitted.labels(request.queue).inc(len(ids))
        self.ctx.wake_scheduler()
        return submit_response(ids, notes)

    def _check_and_store(
        self, request: submit_pb2.JobSubmitRequest, who: Principal
    ) -> tuple[list[str], list[str]]:
        """A large request checked and stored on one thread: one hand-over, and the event
        loop free for watchers meanwhile."""
        refuse_oversized(request, self.ctx.config)
        return self._store(request, self._validate(request), who)

    def _store(
        self,
        request: submit_pb2.JobSubmitRequest,
        items: list[submit_pb2.JobSubmitRequestItem],
        who: Principal,
    ) -> tuple[list[str], list[str]]:
        """Store the jobs, unless no executor of their pool can honour one, their queue is
        missing, `who` may not submit to it, or some new one fits no node (node_fit.py); the
        ids, and the response's notes. The executors' declarations (cached) are read here, on
        the thread that stores, and the queue in the transaction that stores."""
        self.capabilities.check(items)  # refuse what no executor of the pool can honour
        notes: list[str] = []

        def authorise(queue: submit_pb2.Queue) -> None:
            self.ctx.authorizer.require(who, queue, "submit")

        def admit(specs: Sequence[tuple[int, submit_pb2.Job]]) -> None:
            accept = self.ctx.config.accept_jobs_that_fit_no_node
            notes[:] = self.node_fit.check(specs, accept=accept)  # the last call's

        ids = self.ctx.submissions.submit(
            request.queue,
            request.job_set_id,
            items,
            owner=who.name,
            groups=who.groups,
            admit=admit,
            max_queued=self.ctx.config.max_queued_jobs_per_queue,
            authorise=authorise,
        )
        return ids, notes

    def _validate(
        self, request: submit_pb2.JobSubmitRequest
    ) -> list[submit_pb2.JobSubmitRequestItem]:
        """The request's items as checked (reads nothing: small requests are checked on the
        event loop)."""
        return validate_submission(request, self.submission)

    @rpc
    async def CancelJobs(
        self, request: submit_pb2.JobCancelRequest, context: RpcContext
    ) -> submit_pb2.CancellationResult:
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        ids = list(request.job_ids) + ([request.job_id] if request.job_id else [])
        if not ids:
            raise InvalidArgument("job_ids: name at least one job (CancelJobSet cancels a set)")
        await self.ctx.authorize(request.queue, "cancel")
        cancelled = await self.ctx.run(
            self.ctx.submissions.cancel,
            request.queue,
            request.job_set_id,
            ids,
            reason=request.reason,
            requestor=principal_of(context).name,
        )
        return submit_pb2.CancellationResult(cancelled_ids=cancelled)

    @rpc
    async def CancelJobSet(
        self, request: submit_pb2.JobSetCancelRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        states = states_from_filter(request.filter.states)
        await self.ctx.authorize(request.queue, "cancel")
        await self.ctx.run(
            self.ctx.submissions.cancel,
            request.queue,
            request.job_set_id,
            None,
            states=states,
            reason=request.reason,
            requestor=principal_of(context).name,
        )
        return empty_pb2.Empty()

    @rpc
    async def ReprioritizeJobs(
        self, request: submit_pb2.JobReprioritizeRequest, context: RpcContext
    ) -> submit_pb2.JobReprioritizeResponse:
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        if not math.isfinite(request.new_priority) or request.new_priority < 0:
            raise InvalidArgument(
                f"new_priority: must be a non-negative number, got {request.new_priority}"
            )
        await self.ctx.authorize(request.queue, "reprioritize")
        results = await self.ctx.run(
            self.ctx.submissions.reprioritize,
            request.queue,
            request.job_set_id,
            list(request.job_ids),
            request.new_priority,
            requestor=principal_of(context).name,
        )
        return submit_pb2.JobReprioritizeResponse(reprioritization_results=results)

    @rpc
    async def PreemptJobs(
        self, request: submit_pb2.JobPreemptRequest, context: RpcContext
    ) -> submit_pb2.PreemptionResult:
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        await self.ctx.authorize(request.queue, "preempt")
        results = await self.ctx.run(
            self.ctx.submissions.request_preemption,
            request.queue,
            request.job_set_id,
            list(request.job_ids),
            reason=request.reason,
            requestor=principal_of(context).name,
        )
        self.ctx.metrics.count_manual_preemptions(request.queue, results.values())
        return submit_pb2.PreemptionResult(preemption_results=results)

    @rpc
    async def Health(
        self, request: empty_pb2.Empty, context: RpcContext
    ) -> health_pb2.HealthCheckResponse:
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
