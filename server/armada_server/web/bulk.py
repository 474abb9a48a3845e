"""Bulk actions of the jobs list: cancel or reprioritize every live job a filter matches.

A caller acts only on queues they may cancel (or reprioritize) in: naming such a queue in the
filter is refused; without a queue filter, jobs of those queues are left out and counted as
excluded. A dry run answers the count the confirmation shows; the action itself runs in one
transaction, and refuses more than MAX_BULK jobs (narrow the filter).
"""

from __future__ import annotations

import math
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from armada_core.api import submit_pb2
from armada_server.auth import current_principal
from armada_server.errors import InvalidArgument
from armada_server.web import queries
from armada_server.web.calls import CallError, call, stream
from armada_server.web.context import Web, web_of
from armada_server.web.gateway import body_of, endpoint

MAX_BULK = 10_000
FIELDS = {"queue", "jobSet", "state", "reason", "newPriority", "dryRun"}


def _filter(body: dict[str, Any]) -> queries.JobFilter:
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise InvalidArgument(f"{unknown[0]}: not a field of a bulk action ({', '.join(FIELDS)})")
    for name in ("queue", "jobSet", "reason"):
        if not isinstance(body.get(name, ""), str):
            raise InvalidArgument(f"{name}: must be a string")
    states = body.get("state", [])
    if not isinstance(states, list) or not all(isinstance(s, str) for s in states):
        raise InvalidArgument("state: must be a list of job state names")
    if not isinstance(body.get("dryRun", False), bool):
        raise InvalidArgument("dryRun: must be true or false")
    return queries.JobFilter(
        queue=body.get("queue", ""),
        job_set=body.get("jobSet", ""),
        states=queries.parse_states(states),
    ).check()


async def _permitted(web: Web, where: queries.JobFilter, verb: str) -> list[str]:
    """The queues the caller may `verb` in, among those the filter names."""
    if where.queue:
        queue = await call(
            web.services.queues.GetQueue, submit_pb2.QueueGetRequest(name=where.queue)
        )
        if not web.may(queue, verb):
            raise CallError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"queue: {current_principal().name!r} may not {verb} jobs in queue {where.queue!r}",
            )
        return [where.queue]
    return [
        m.queue.name
        async for m in stream(web.services.queues.GetQueues, submit_pb2.StreamingQueueGetRequest())
        if m.WhichOneof("event") == "queue" and web.may(m.queue, verb)
    ]


async def _act(request: Request, verb: str) -> Response:
    web = web_of(request)
    body = await body_of(request)
    where = _filter(body)
    priority = body.get("newPriority")
    if verb == "reprioritize" and (
        isinstance(priority, bool)
        or not isinstance(priority, int | float)
        or not math.isfinite(priority)
        or priority < 0
    ):
        raise InvalidArgument("newPriority: must be a non-negative number")
    new_priority = float(priority or 0)
    queues = await _permitted(web, where, verb)
    counts = await web.ctx.run(queries.live_counts, web.ctx.job_reads, where)
    count = sum(n for q, n in counts.items() if q in queues)
    answer: dict[str, Any] = {"count": count, "excluded": sum(counts.values()) - count}
    if body.get("dryRun", False):
        return JSONResponse(answer)
    if count > MAX_BULK:
        raise InvalidArgument(
            f"filter: matches {count} jobs, more than the {MAX_BULK} one action may change; "
            "narrow it (a queue, a job set, a state)"
        )
    condition = queries.live_condition(where, queues)
    who = current_principal().name
    submissions = web.ctx.submissions
    if verb == "cancel":
        reason = body.get("reason", "") or "cancelled from the jobs list"
        ids = await web.ctx.run(
            submissions.cancel_matching, condition, reason=reason, requestor=who
        )
    else:
        ids = await web.ctx.run(
            submissions.reprioritize_matching, condition, new_priority, requestor=who
        )
    answer.update(count=len(ids), jobIds=ids)
    return JSONResponse(answer)


@endpoint
async def bulk_cancel(request: Request) -> Response:
    return await _act(request, "cancel")


@endpoint
async def bulk_reprioritize(request: Request) -> Response:
    return await _act(request, "reprioritize")


routes = [
    Route("/api/v1/bulk/cancel", bulk_cancel, methods=["POST"]),
    Route("/api/v1/bulk/reprioritize", bulk_reprioritize, methods=["POST"]),
]
