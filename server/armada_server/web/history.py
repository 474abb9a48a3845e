"""GET /api/v1/history?since=SECONDS: the jobs submitted in the last SECONDS, as the what-if
simulator replays them (`armada-server simulate --from URL --since 7d`).

Read-only. A caller gets the jobs of the queues it may watch (every queue for an
administrator; without authentication, every queue), and only what the server still keeps:
`kept_since` says since when it keeps any job, so a window reaching further back was cut by
retention. Each job comes with what it asked (requests, priority class, gang annotations,
lifetime) and how long its last run ran (null if it never ran; up to now if still running).
The cluster is the nodes the executors report.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from armada_core.jobs import Job
from armada_core.jobs import annotations as ann
from armada_core.jobs.submission import job_requests
from armada_server.storage.history import JobHistory
from armada_server.web.context import web_of
from armada_server.web.jsonpb import iso

GANG_FIELDS = {
    "id": ann.GANG_ID,
    "cardinality": ann.GANG_CARDINALITY,
    "minimum": ann.GANG_MINIMUM_CARDINALITY,
    "uniformity_label": ann.GANG_NODE_UNIFORMITY_LABEL,
    "max_hops": ann.GANG_MAX_HOPS,
    "role": ann.GANG_ROLE,
    "role_minimum": ann.GANG_ROLE_MINIMUM,
}
MAX_SINCE = 366 * 86400.0


def runtime(job: Job, now: datetime) -> float | None:
    """Seconds its last started run ran (until now while it runs); None if none started."""
    for run in reversed(job.runs):
        if run.started_at is not None:
            end = run.finished_at or now
            return max(0.0, (end - run.started_at).total_seconds())
    return None


def exported(job: Job, now: datetime) -> dict[str, Any]:
    requests = job_requests(job.pod_spec)
    annotations = job.annotations
    gang = {k: annotations[a] for k, a in GANG_FIELDS.items() if a in annotations}
    lifetime = annotations.get(ann.LIFETIME)
    return {
        "id": job.id,
        "queue": job.queue,
        "job_set": job.job_set,
        "submitted": iso(job.submitted_at),
        "state": job.state.name,
        "priority_class": job.priority_class,
        "requests": {k: f"{v}m" if k == "cpu" else str(v) for k, v in sorted(requests.items())},
        "runtime": runtime(job, now),
        "gang": gang or None,
        "lifetime": lifetime,
    }


def _since(request: Request) -> float | JSONResponse:
    text = request.query_params.get("since", "604800")
    try:
        since = float(text)
    except ValueError:
        since = math.nan
    if not 0 < since <= MAX_SINCE:
        return JSONResponse(
            {
                "error": {
                    "code": "INVALID_ARGUMENT",
                    "message": f"since: expected seconds between 1 and {MAX_SINCE:.0f} "
                    f"(a year), got {text!r}",
                }
            },
            status_code=400,
        )
    return since


async def history(request: Request) -> Response:
    since = _since(request)
    if isinstance(since, JSONResponse):
        return since
    web = web_of(request)
    ctx = web.ctx
    now = ctx.transactions.clock()
    queues = [q for q in await ctx.run(ctx.queues.list_queues) if web.may(q, "watch")]
    kept = await ctx.run(
        JobHistory(ctx.transactions).submitted_since,
        now - timedelta(seconds=since),
        [q.name for q in queues],
    )
    nodes = await ctx.run(ctx.nodes.nodes_with_cordons)
    return JSONResponse(
        {
            "now": iso(now),
            "since": iso(now - timedelta(seconds=since)),
            "kept_since": iso(kept.kept_since),
            "queues": [{"name": q.name, "priority_factor": q.priority_factor} for q in queues],
            "nodes": [
                {
                    "name": n.node.name,
                    "allocatable": dict(n.node.allocatable),
                    "labels": dict(n.node.labels),
                    "taints": [
                        {"key": t.key, "value": t.value, "effect": t.effect} for t in n.node.taints
                    ],
                }
                for n in nodes
            ],
            "jobs": [exported(j, now) for j in kept.jobs],
        }
    )


routes = [Route("/api/v1/history", history, methods=["GET"])]
