"""The REST/JSON gateway: the public API over HTTP at /api/v1 (see openapi.py).

Every call goes through the gRPC servicers' own methods (calls.py): the same validation,
authorisation and store calls as the gRPC API. Bodies are JSON in the shapes the `armada`
CLI's job files use (camelCase field names, quantities as strings); errors are
`{"error": {"code": <gRPC code name>, "message": ...}}` with the matching HTTP status.
State-changing calls need `Content-Type: application/json`, which a cross-site form cannot
send: a browser's remembered credentials cannot be used to act from another site.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from armada_core.api import binoculars_pb2, event_pb2, job_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.client.connection import MAX_MESSAGE_BYTES
from armada_core.client.jobfile import parse_job_request
from armada_core.client.k8s_convert import SpecError, to_message
from armada_core.jobs import Job
from armada_server.errors import ApiError, InvalidArgument
from armada_server.reporting.compose import DEFAULT_CYCLES, MAX_CYCLES
from armada_server.services.events import HEARTBEAT_METADATA, check_job_set, parse_message_id
from armada_server.services.jobs import job_error, storable
from armada_server.storage.nodes import NodeInfo
from armada_server.web import queries
from armada_server.web.calls import CallError, call, stream
from armada_server.web.context import Handler, Web, web_of
from armada_server.web.jsonpb import iso, to_json
from armada_server.web.live import SSE_HEADERS, sse
from armada_server.web.openapi import document

MAX_BODY = MAX_MESSAGE_BYTES  # as the gRPC port's largest message


M = TypeVar("M", bound=Message)


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def refusal(e: Exception) -> JSONResponse:
    if isinstance(e, CallError):
        return error_response(e.http_status, e.code_name, e.message)
    if isinstance(e, ApiError):
        return refusal(CallError(e.code, str(e)))
    raise e


async def body_of(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise _Unsupported()
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise InvalidArgument(f"the request body is larger than {MAX_BODY} bytes")
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"the request body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise InvalidArgument("the request body must be a JSON object")
    return data


class _Unsupported(Exception):
    pass


def message_of(data: Any, cls: type[M], path: str = "") -> M:
    """A protobuf request from JSON; INVALID_ARGUMENT naming the field otherwise."""
    try:
        return to_message(data, cls, path)
    except SpecError as e:
        raise InvalidArgument(str(e)) from None
    except (ValueError, TypeError, OverflowError) as e:  # e.g. an int32 out of range
        raise InvalidArgument(f"{path or 'body'}: {e}") from None


def endpoint(fn: Handler) -> Handler:
    """Answers refusals as JSON errors."""

    async def handler(request: Request) -> Response:
        try:
            return await fn(request)
        except (CallError, ApiError) as e:
            return refusal(e)
        except _Unsupported:
            return error_response(
                415,
                "UNSUPPORTED_MEDIA_TYPE",
                "send the body as JSON with Content-Type: application/json",
            )

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


def _one(request: Request | QueryParams, name: str, default: str = "") -> str:
    params = request if isinstance(request, QueryParams) else request.query_params
    return params.get(name, default)


def _int(request: Request | QueryParams, name: str, default: int, low: int, high: int) -> int:
    params = request if isinstance(request, QueryParams) else request.query_params
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name}: {text!r} is not an integer") from None
    if not low <= value <= high:
        raise InvalidArgument(f"{name}: must be between {low} and {high}, got {value}")
    return value


def _bool(request: Request, name: str) -> bool:
    text = request.query_params.get(name, "false").lower()
    if text not in ("true", "false", "1", "0", ""):
        raise InvalidArgument(f"{name}: {text!r} is not true or false")
    return text in ("true", "1")


# --- queues ------------------------------------------------------------------------------


@endpoint
async def list_queues(request: Request) -> Response:
    services = web_of(request).services
    queues = [
        to_json(m.queue)
        async for m in stream(services.queues.GetQueues, submit_pb2.StreamingQueueGetRequest())
        if m.WhichOneof("event") == "queue"
    ]
    return JSONResponse({"queues": queues})


@endpoint
async def get_queue(request: Request) -> Response:
    services = web_of(request).services
    queue = await call(
        services.queues.GetQueue, submit_pb2.QueueGetRequest(name=request.path_params["name"])
    )
    return JSONResponse(to_json(queue))


@endpoint
async def create_queue(request: Request) -> Response:
    services = web_of(request).services
    queue = message_of(await body_of(request), submit_pb2.Queue)
    await call(services.queues.CreateQueue, queue)
    created = await call(services.queues.GetQueue, submit_pb2.QueueGetRequest(name=queue.name))
    return JSONResponse(to_json(created), status_code=201)


@endpoint
async def update_queue(request: Request) -> Response:
    services = web_of(request).services
    name = request.path_params["name"]
    queue = message_of(await body_of(request), submit_pb2.Queue)
    if queue.name and queue.name != name:
        raise InvalidArgument(f"name: {queue.name!r} differs from the queue in the path ({name!r})")
    queue.name = name
    await call(services.queues.UpdateQueue, queue)
    updated = await call(services.queues.GetQueue, submit_pb2.QueueGetRequest(name=name))
    return JSONResponse(to_json(updated))


@endpoint
async def delete_queue(request: Request) -> Response:
    services = web_of(request).services
    await call(
        services.queues.DeleteQueue, submit_pb2.QueueDeleteRequest(name=request.path_params["name"])
    )
    return JSONResponse({})


@endpoint
async def cordon_queue(request: Request) -> Response:
    services = web_of(request).services
    name = request.path_params["name"]
    await call(services.queues.CordonQueue, submit_pb2.QueueCordonRequest(name=name))
    queue = await call(services.queues.GetQueue, submit_pb2.QueueGetRequest(name=name))
    return JSONResponse(to_json(queue))


@endpoint
async def uncordon_queue(request: Request) -> Response:
    services = web_of(request).services
    name = request.path_params["name"]
    await call(services.queues.UncordonQueue, submit_pb2.QueueUncordonRequest(name=name))
    queue = await call(services.queues.GetQueue, submit_pb2.QueueGetRequest(name=name))
    return JSONResponse(to_json(queue))


@endpoint
async def shares(request: Request) -> Response:
    sampler = web_of(request).sampler
    return JSONResponse(
        {"period": sampler.period, "samples": [sample_json(s) for s in sampler.history()]}
    )


def sample_json(sample: Any) -> dict[str, Any]:
    return {
        "time": iso(datetime.fromtimestamp(sample.time).astimezone()),
        "capacity": dict(sample.capacity),
        "queues": [
            {
                "name": q.name,
                "weight": q.weight,
                "cordoned": q.cordoned,
                "active": q.active,
                "fairShare": q.fair_share,
                "adjustedFairShare": q.adjusted_fair_share,
                "share": q.share,
                "demand": q.demand,
                "shares": dict(q.shares),
                "running": q.running,
                "queued": q.queued,
            }
            for q in sample.queues.values()
        ],
    }


# --- jobs ----------------------------------------------------------------------------------


@endpoint
async def submit_jobs(request: Request) -> Response:
    services = web_of(request).services
    data = await body_of(request)
    try:
        parsed = parse_job_request(data, check=False)
    except SpecError as e:
        raise InvalidArgument(str(e)) from None
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidArgument(f"jobs: {e}") from None
    encoded = await call(services.submit.SubmitJobs, parsed.to_proto())  # as gRPC sends it
    answer = submit_pb2.JobSubmitResponse.FromString(encoded)
    return JSONResponse({"jobIds": [item.job_id for item in answer.job_response_items]})


@endpoint
async def list_jobs(request: Request) -> Response:
    web = web_of(request)
    where, limit, cursor = job_filter(request.query_params)
    where = await watched(web, where)
    page = await web.ctx.run(
        queries.list_jobs, web.ctx.job_reads, where, limit=limit, cursor=cursor
    )
    return JSONResponse(
        {"jobs": [job_row_json(r) for r in page.rows], "next": page.next, "prev": page.prev}
    )


@endpoint
async def job_groups(request: Request) -> Response:
    """The filtered jobs counted per queue, job set, state, reason, node or priority class."""
    web = web_of(request)
    where, _, _ = job_filter(request.query_params)
    where = await watched(web, where)
    by = _one(request.query_params, "groupBy")
    groups, more = await web.ctx.run(queries.group_counts, web.ctx.job_reads, where, by)
    return JSONResponse(
        {
            "groupBy": by,
            "groups": [
                {"value": g.value, "count": g.count, **({"queue": g.queue} if g.queue else {})}
                for g in groups
            ],
            "more": more,
        }
    )


def job_filter(params: QueryParams) -> tuple[queries.JobFilter, int, str | None]:
    """The list's filter, size and cursor from a query string (the API's and the pages')."""
    order = _one(params, "order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidArgument(f"order: {order!r} is not asc or desc")
    where = queries.JobFilter(
        queue=_one(params, "queue"),
        job_set=_one(params, "jobSet"),
        states=queries.parse_states(params.getlist("state")),
        annotation=_one(params, "annotation"),
        sort=_one(params, "sort", "submitted"),
        descending=order == "desc",
    ).check()
    limit = _int(params, "limit", 50, 1, queries.MAX_PAGE)
    return where, limit, _one(params, "cursor") or None


async def watched(web: Web, where: queries.JobFilter) -> queries.JobFilter:
    """The filter kept to the queues the caller may watch: job lists and their counts show
    only those queues' jobs. Naming a queue the caller may not watch is refused
    (PERMISSION_DENIED; NOT_FOUND if there is no such queue), as its job sets' events are.
    Administrators, and everyone when authentication is off, see every queue."""
    if web.is_admin():
        return where
    if where.queue:
        await web.ctx.authorize(where.queue, "watch")
        return where
    every = await web.ctx.run(web.ctx.queues.list_queues)
    return replace(where, queues=frozenset(q.name for q in every if web.may(q, "watch")))


def job_row_json(row: queries.JobRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "queue": row.queue,
        "jobSet": row.job_set,
        "state": row.state.name,
        "priority": row.priority,
        "priorityClass": row.priority_class,
        "gangId": row.gang_id,
        "submitted": iso(row.submitted_at),
        "lastTransition": iso(row.last_transition_at),
        "reason": row.reason,
        "clientId": row.client_id,
        "annotations": row.annotations or {},
        "gangRole": row.role,
    }


@endpoint
async def job_status(request: Request) -> Response:
    services = web_of(request).services
    ids = request.query_params.getlist("id")
    answer = await call(services.jobs.GetJobStatus, job_pb2.JobStatusRequest(job_ids=ids))
    return JSONResponse(
        {"jobStates": {k: submit_pb2.JobState.Name(v) for k, v in answer.job_states.items()}}
    )


@endpoint
async def get_job(request: Request) -> Response:
    web = web_of(request)
    job_id = request.path_params["id"]
    job, reason = await load_job(web, job_id)
    return JSONResponse(job_json(job, reason))


async def load_job(web: Web, job_id: str) -> tuple[Job, str]:
    jobs = await web.ctx.run(web.ctx.job_reads.jobs, storable([job_id]))
    if not jobs:
        raise CallError(grpc.StatusCode.NOT_FOUND, f"job {job_id!r} not found")
    reasons = await web.services.jobs.waiting_reasons(jobs)
    return jobs[0], reasons.get(job_id, "")


def job_json(job: Job, reason: str) -> dict[str, Any]:
    return {
        "id": job.id,
        "queue": job.queue,
        "jobSet": job.job_set,
        "state": job.state.name,
        "priority": job.priority,
        "priorityClass": job.priority_class,
        "owner": job.spec.owner,
        "submitted": iso(job.submitted_at),
        "lastTransition": iso(job.last_transition_at),
        "schedulingReason": reason,
        "error": job_error(job),
        "cancelReason": job.cancel_reason,
        "cancelUser": job.cancel_user,
        "annotations": dict(job.spec.annotations),
        "gangId": job.gang.id if job.gang else None,
        "runs": [run_json(r) for r in job.runs],
        "spec": to_json(job.spec),
    }


def run_json(run: Any) -> dict[str, Any]:
    return {
        "id": run.id,
        "index": run.index,
        "state": run.state.name,
        "executor": run.cluster_id,
        "node": run.node,
        "pool": run.pool,
        "leased": iso(run.leased_at),
        "pending": iso(run.pending_at),
        "started": iso(run.started_at),
        "finished": iso(run.finished_at),
        "condition": run.condition,
        "category": run.category,
        "subcategory": run.subcategory,
        "reason": run.reason,
        "containers": [
            {
                "name": c.name,
                "exitCode": c.exit_code,
                "message": c.message,
                "reason": c.reason,
                "initContainer": c.init_container,
            }
            for c in run.containers
        ],
    }


@endpoint
async def cancel_jobs(request: Request) -> Response:
    services = web_of(request).services
    message = message_of(await body_of(request), submit_pb2.JobCancelRequest)
    answer = await call(services.submit.CancelJobs, message)
    return JSONResponse({"cancelledIds": list(answer.cancelled_ids)})


@endpoint
async def reprioritize_jobs(request: Request) -> Response:
    services = web_of(request).services
    message = message_of(await body_of(request), submit_pb2.JobReprioritizeRequest)
    answer = await call(services.submit.ReprioritizeJobs, message)
    return JSONResponse({"results": dict(answer.reprioritization_results)})


@endpoint
async def preempt_jobs(request: Request) -> Response:
    services = web_of(request).services
    message = message_of(await body_of(request), submit_pb2.JobPreemptRequest)
    answer = await call(services.submit.PreemptJobs, message)
    return JSONResponse({"results": dict(answer.preemption_results)})


@endpoint
async def cancel_job_set(request: Request) -> Response:
    services = web_of(request).services
    message = message_of(await body_of(request), submit_pb2.JobSetCancelRequest)
    await call(services.submit.CancelJobSet, message)
    return JSONResponse({})


@endpoint
async def job_logs(request: Request) -> Response:
    services = web_of(request).services
    options = core_v1_pb2.PodLogOptions()
    container = _one(request, "container")
    if container:
        options.container = container
    if request.query_params.get("tailLines"):
        options.tailLines = _int(request, "tailLines", 0, 0, 1_000_000)
    answer = await call(
        services.binoculars.Logs,
        binoculars_pb2.LogRequest(
            job_id=request.path_params["id"],
            since_time=_one(request, "sinceTime"),
            log_options=options,
        ),
    )
    return JSONResponse(
        {"lines": [{"timestamp": line.timestamp, "line": line.line} for line in answer.log]}
    )


# --- nodes -------------------------------------------------------------------------------


def node_json(node: NodeInfo) -> dict[str, Any]:
    return {
        "id": f"{node.executor}/{node.name}",
        "executor": node.executor,
        "pool": node.pool,
        "name": node.name,
        "allocatable": dict(node.node.allocatable),
        "labels": dict(node.node.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.node.taints],
        "unschedulable": node.node.unschedulable,
        "cordoned": node.cordoned,
        "cordonedAt": iso(node.cordoned_at) if node.cordoned_at else None,
        "cordonedBy": node.cordoned_by,
        "lastSeen": iso(node.last_seen),
    }


@endpoint
async def list_nodes(request: Request) -> Response:
    web = web_of(request)
    nodes = await web.ctx.run(web.ctx.nodes.nodes_with_cordons)
    return JSONResponse({"nodes": [node_json(n) for n in nodes]})


async def _set_cordon(request: Request, cordon: bool) -> Response:
    web = web_of(request)
    body = await body_of(request)
    name = body.get("node")
    if not isinstance(name, str) or not name:
        raise InvalidArgument("node: a node name (NODE or EXECUTOR/NODE) is required")
    message = (
        binoculars_pb2.CordonRequest(node_name=name)
        if cordon
        else binoculars_pb2.CordonRequest(uncordon_node_name=name)
    )
    await call(web.services.binoculars.Cordon, message)
    executor, _, node = name.rpartition("/")
    nodes = await web.ctx.run(web.ctx.nodes.nodes_with_cordons)
    found = next(n for n in nodes if n.name == node and executor in ("", n.executor))
    return JSONResponse(node_json(found))


@endpoint
async def cordon_node(request: Request) -> Response:
    return await _set_cordon(request, True)


@endpoint
async def uncordon_node(request: Request) -> Response:
    return await _set_cordon(request, False)


@endpoint
async def list_job_sets(request: Request) -> Response:
    web = web_of(request)
    queue = _one(request, "queue")
    if not queue:
        raise InvalidArgument("queue: required")
    await call(web.services.queues.GetQueue, submit_pb2.QueueGetRequest(name=queue))
    rows, more = await web.ctx.run(
        queries.list_job_sets,
        web.ctx.job_reads,
        queue,
        limit=_int(request, "limit", 50, 1, queries.MAX_PAGE),
        offset=_int(request, "offset", 0, 0, 10**9),
    )
    return JSONResponse(
        {
            "jobSets": [
                {
                    "queue": r.queue,
                    "jobSet": r.name,
                    "created": iso(r.created_at),
                    "lastMessageId": str(r.last_seq),
                    "counts": {s.name: n for s, n in sorted(r.counts.items())},
                }
                for r in rows
            ],
            "more": more,
        }
    )


# --- scheduling reports ----------------------------------------------------------------------


@endpoint
async def scheduling_report(request: Request) -> Response:
    reporting = web_of(request).services.reporting
    cycles = _int(request, "cycles", DEFAULT_CYCLES, 1, MAX_CYCLES)
    return JSONResponse(await reporting.scheduling_report(_one(request, "pool"), cycles))


@endpoint
async def queue_report(request: Request) -> Response:
    reporting = web_of(request).services.reporting
    return JSONResponse(await reporting.queue_report(request.path_params["name"]))


@endpoint
async def job_report(request: Request) -> Response:
    reporting = web_of(request).services.reporting
    return JSONResponse(await reporting.job_report(request.path_params["id"]))


# --- job-set events as server-sent events ----------------------------------------------------


@endpoint
async def job_set_events(request: Request) -> Response:
    """A job set's events as server-sent events: `id` is the message id (resume with
    `fromMessageId` or the Last-Event-ID header), `event` the event type, `data` the event."""
    web = web_of(request)
    queue, job_set = _one(request, "queue"), _one(request, "jobSetId")
    check_job_set(queue, job_set)
    start = request.headers.get("last-event-id") or _one(request, "fromMessageId")
    parse_message_id(start)
    watch = _bool(request, "watch")
    await web.ctx.authorize(queue, "watch")  # refused before the stream starts: a status
    request_message = event_pb2.JobSetRequest(
        id=job_set, queue=queue, from_message_id=start, watch=watch
    )
    messages = stream(
        web.services.events.GetJobSetEvents, request_message, [(HEARTBEAT_METADATA, "1")]
    )
    return StreamingResponse(
        event_stream(web, messages), media_type="text/event-stream", headers=SSE_HEADERS
    )


async def event_stream(web: Web, messages: AsyncIterator[Any]) -> AsyncIterator[str]:
    try:
        async for sent in messages:
            if web.feed.closing.is_set():
                return
            item = (  # a stored event comes encoded, as the gRPC stream sends it
                event_pb2.EventStreamMessage.FromString(sent) if type(sent) is bytes else sent
            )
            if not item.HasField("message"):
                yield ": heartbeat\n\n"
                continue
            kind = item.message.WhichOneof("events")
            if kind is None:  # never stored (every event has a body): nothing to show
                continue
            body = to_json(getattr(item.message, kind))
            yield sse(body, event=kind, id=item.id)
    except CallError as e:
        yield sse({"code": e.code_name, "message": e.message}, event="error")


# --- the document ------------------------------------------------------------------------------


async def openapi(request: Request) -> Response:
    return JSONResponse(document())


def resource(path: str, **handlers: Handler) -> Route:
    """One route per path, whatever its methods, so a 405's Allow header lists them all."""

    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method.lower()](request)

    return Route(path, dispatch, methods=[m.upper() for m in handlers])


routes = [
    resource("/api/v1/openapi.json", get=openapi),
    resource("/api/v1/queues", get=list_queues, post=create_queue),
    resource("/api/v1/queues/{name}", get=get_queue, put=update_queue, delete=delete_queue),
    resource("/api/v1/queues/{name}/cordon", post=cordon_queue),
    resource("/api/v1/queues/{name}/uncordon", post=uncordon_queue),
    resource("/api/v1/queues/{name}/report", get=queue_report),
    resource("/api/v1/shares", get=shares),
    resource("/api/v1/reports/scheduling", get=scheduling_report),
    resource("/api/v1/nodes", get=list_nodes),
    resource("/api/v1/nodes/cordon", post=cordon_node),
    resource("/api/v1/nodes/uncordon", post=uncordon_node),
    resource("/api/v1/jobs", get=list_jobs, post=submit_jobs),
    resource("/api/v1/jobs/status", get=job_status),
    resource("/api/v1/jobs/groups", get=job_groups),
    resource("/api/v1/jobs/cancel", post=cancel_jobs),
    resource("/api/v1/jobs/reprioritize", post=reprioritize_jobs),
    resource("/api/v1/jobs/preempt", post=preempt_jobs),
    resource("/api/v1/jobs/{id}", get=get_job),
    resource("/api/v1/jobs/{id}/logs", get=job_logs),
    resource("/api/v1/jobs/{id}/report", get=job_report),
    resource("/api/v1/jobsets", get=list_job_sets),
    resource("/api/v1/jobsets/cancel", post=cancel_job_set),
    resource("/api/v1/events", get=job_set_events),
]
