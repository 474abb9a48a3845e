"""Submit: submit, cancel, reprioritize and preempt jobs (and the legacy queue calls)."""

from __future__ import annotations

import math
import re

from google.protobuf import empty_pb2

from armada_core.api import health_pb2, submit_pb2, submit_pb2_grpc
from armada_core.jobs import annotations as ann
from armada_core.jobs import job_requests, validate_request
from armada_core.scheduling.model import MAX_EXPONENT, parse_quantity
from armada_server.errors import InvalidArgument
from armada_server.executors.local.support import ignored_fields
from armada_server.services.common import Context, principal_of, rpc
from armada_server.services.queues import QueueService, states_from_filter

# Lengths of the columns these values are stored in (storage/schema.py). Both backends must
# accept and refuse the same requests: SQLite would store a longer value, PostgreSQL would not.
MAX_JOB_SET_ID = 1024
MAX_CLIENT_ID = 1024
MAX_EXTERNAL_JOB_URI = 2048
MAX_GANG_ID = 1024
# Kubernetes caps a quantity at 2^63-1 (in thousandths for cpu); the scheduler counts in int64.
MAX_QUANTITY = 2**63 - 1
# A quantity's text is screened before it is parsed: "1e99999999" would take minutes to expand.
MAX_QUANTITY_TEXT = 64
_EXPONENT = re.compile(r"[eE][+-]?([0-9]+)")


def check_text(field: str, value: str, limit: int) -> None:
    """A string the database stores in a column: no NUL characters, at most `limit` long."""
    if "\x00" in value:
        raise InvalidArgument(f"{field}: must not contain NUL characters")
    if len(value) > limit:
        raise InvalidArgument(f"{field}: must be at most {limit} characters, got {len(value)}")


def _require(field: str, value: str, limit: int = MAX_JOB_SET_ID) -> None:
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    check_text(field, value, limit)


def _pod_specs(item: submit_pb2.JobSubmitRequestItem):  # type: ignore[no-untyped-def]
    if item.HasField("pod_spec"):
        yield "pod_spec", item.pod_spec
    for k, spec in enumerate(item.pod_specs):
        yield f"pod_specs[{k}]", spec


def _quantities(spec, prefix: str = ""):  # type: ignore[no-untyped-def]
    """(path, resource name, text) of every container quantity in a pod spec."""
    for kind in ("initContainers", "containers"):
        for j, c in enumerate(getattr(spec, kind)):
            for which in ("requests", "limits"):
                for name, q in sorted(getattr(c.resources, which).items()):
                    path = f"{kind}[{j}].resources.{which}[{name}]"
                    if not isinstance(q.string, str):  # invalid UTF-8 comes back as bytes
                        raise InvalidArgument(f"{prefix}{path}: not valid UTF-8")
                    yield path, name, q.string


def screen_quantities(request: submit_pb2.JobSubmitRequest) -> None:
    """Refuse quantities too long or with exponents too large to parse cheaply."""
    for i, item in enumerate(request.job_request_items):
        for spec_path, spec in _pod_specs(item):
            for path, _, text in _quantities(spec, f"job_request_items[{i}].{spec_path}."):
                exponent = _EXPONENT.search(text)
                if len(text) > MAX_QUANTITY_TEXT or (
                        exponent and int(exponent.group(1)) > MAX_EXPONENT):
                    raise InvalidArgument(
                        f"job_request_items[{i}].{spec_path}.{path}: {text[:80]!r} is not a "
                        f"quantity this server accepts (at most {MAX_QUANTITY_TEXT} "
                        f"characters, exponents up to {MAX_EXPONENT})")


def check_storable(request: submit_pb2.JobSubmitRequest,
                   items: list[submit_pb2.JobSubmitRequestItem]) -> None:
    """What validation leaves to storage: column lengths, NUL characters, quantity range."""
    _require("job_set_id", request.job_set_id)
    for i, item in enumerate(items):
        path = f"job_request_items[{i}]"
        check_text(f"{path}.client_id", item.client_id, MAX_CLIENT_ID)
        check_text(f"{path}.external_job_uri", item.external_job_uri, MAX_EXTERNAL_JOB_URI)
        for key, limit in ((ann.EXTERNAL_JOB_URI, MAX_EXTERNAL_JOB_URI),
                           (ann.GANG_ID, MAX_GANG_ID)):
            if key in item.annotations:
                check_text(f"{path}.annotations[{key}]", item.annotations[key], limit)
        spec = item.pod_specs[0]
        for where, name, text in _quantities(spec):
            if parse_quantity(text, milli=(name == "cpu")) > MAX_QUANTITY:
                raise InvalidArgument(f"{path}.pod_specs[0].{where}: {text!r} is out of range "
                                      "(a quantity is at most 2^63-1)")
        for name, total in job_requests(spec).items():
            if total > MAX_QUANTITY:
                raise InvalidArgument(f"{path}.pod_specs[0]: the pod requests more {name} than "
                                      "2^63-1 in total")


def validate_submission(request: submit_pb2.JobSubmitRequest,
                        config) -> list[submit_pb2.JobSubmitRequestItem]:  # type: ignore[no-untyped-def]
    try:
        screen_quantities(request)
        items = validate_request(request, config)
        check_storable(request, items)
    except (UnicodeDecodeError, TypeError):
        # protobuf checks UTF-8 lazily: text in a nested message that is not UTF-8 comes back
        # as bytes (or fails) only when read, deep inside validation.
        where = invalid_text(request)
        if where is None:
            raise
        raise InvalidArgument(f"{where}: not valid UTF-8") from None
    return items


def invalid_text(message, path: str = "") -> str | None:  # type: ignore[no-untyped-def]
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


def check_runs_locally(items: list[submit_pb2.JobSubmitRequestItem]) -> None:
    """Refuse what the local executor would silently ignore: a field is never dropped."""
    for i, item in enumerate(items):
        ignored = ignored_fields(item.pod_specs[0])
        if ignored:
            raise InvalidArgument(
                f"job_request_items[{i}].pod_specs[0]: the local executor cannot honour "
                f"{', '.join(ignored)}; remove them or use the kubernetes executor")


class SubmitService(submit_pb2_grpc.SubmitServicer):
    def __init__(self, ctx: Context, queues: QueueService) -> None:
        self.ctx = ctx
        self.queues = queues
        self.submission = ctx.config.submission()
        # Upstream kept the queue calls on Submit for older clients: same behaviour.
        for name in ("CreateQueue", "CreateQueues", "UpdateQueue", "UpdateQueues",
                     "DeleteQueue", "GetQueue", "GetQueues"):
            setattr(self, name, getattr(queues, name))

    @rpc
    async def SubmitJobs(self, request, context):  # type: ignore[no-untyped-def]
        # Off the event loop: a large request takes a while to check, and watchers wait.
        items = await self.ctx.run(validate_submission, request, self.submission)
        if self.ctx.config.executor == "local":
            check_runs_locally(items)
        await self.ctx.authorize(request.queue, "submit")
        who = principal_of(context)
        ids = await self.ctx.run(self.ctx.store.submit, request.queue, request.job_set_id,
                                 items, owner=who.name, groups=who.groups)
        self.ctx.metrics.jobs_submitted.labels(request.queue).inc(len(ids))
        self.ctx.wake_scheduler()
        return submit_pb2.JobSubmitResponse(
            job_response_items=[submit_pb2.JobSubmitResponseItem(job_id=i) for i in ids])

    @rpc
    async def CancelJobs(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        ids = list(request.job_ids) + ([request.job_id] if request.job_id else [])
        if not ids:
            raise InvalidArgument("job_ids: name at least one job (CancelJobSet cancels a set)")
        await self.ctx.authorize(request.queue, "cancel")
        cancelled = await self.ctx.run(self.ctx.store.cancel, request.queue,
                                       request.job_set_id, ids, reason=request.reason,
                                       requestor=principal_of(context).name)
        return submit_pb2.CancellationResult(cancelled_ids=cancelled)

    @rpc
    async def CancelJobSet(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        states = states_from_filter(request.filter.states)
        await self.ctx.authorize(request.queue, "cancel")
        await self.ctx.run(self.ctx.store.cancel, request.queue, request.job_set_id, None,
                           states=states, reason=request.reason,
                           requestor=principal_of(context).name)
        return empty_pb2.Empty()

    @rpc
    async def ReprioritizeJobs(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        if not math.isfinite(request.new_priority) or request.new_priority < 0:
            raise InvalidArgument(f"new_priority: must be a non-negative number, got "
                                  f"{request.new_priority}")
        await self.ctx.authorize(request.queue, "reprioritize")
        results = await self.ctx.run(self.ctx.store.reprioritize, request.queue,
                                     request.job_set_id, list(request.job_ids),
                                     request.new_priority,
                                     requestor=principal_of(context).name)
        return submit_pb2.JobReprioritizeResponse(reprioritization_results=results)

    @rpc
    async def PreemptJobs(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        await self.ctx.authorize(request.queue, "preempt")
        results = await self.ctx.run(self.ctx.store.request_preemption, request.queue,
                                     request.job_set_id, list(request.job_ids),
                                     reason=request.reason,
                                     requestor=principal_of(context).name)
        return submit_pb2.PreemptionResult(preemption_results=results)

    @rpc
    async def Health(self, request, context):  # type: ignore[no-untyped-def]
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
