"""The web UI: server-rendered pages, each with a live region the browser refreshes when the
job sets it shows change (live.py), and actions that call the REST gateway after a
confirmation. Stable URLs: /queues, /queues/<name>, /jobsets/<queue>/<job set>, /jobs,
/jobs/<id>, /nodes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import grpc
import yaml
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from armada_core.api import event_pb2, submit_pb2
from armada_core.jobs import Job, JobState
from armada_server import __version__
from armada_server.auth import current_principal
from armada_server.errors import ApiError, InvalidArgument
from armada_server.services.jobs import job_error
from armada_server.shares import Sample
from armada_server.storage.nodes import NodeInfo, NodeLoad
from armada_server.web import queries, units
from armada_server.web.calls import CallError, call, stream
from armada_server.web.context import Handler, Web, web_of
from armada_server.web.gateway import job_filter, load_job, watched
from armada_server.web.jsonpb import to_json
from armada_server.web.live import SSE_HEADERS, JobSetKey
from armada_server.web.shares import WINDOW

HERE = Path(__file__).parent
ACTIVE = (JobState.QUEUED, JobState.LEASED, JobState.PENDING, JobState.RUNNING)
CHART_BARS = 60


def _ago(when: datetime | None) -> str:
    if when is None:
        return ""
    seconds = (datetime.now(UTC) - when).total_seconds()
    if seconds < 60:
        return f"{max(0, int(seconds))}s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    return f"{int(seconds // 86400)}d ago"


def _when(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pct(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 100:.1f}%"


def _seconds(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return ""
    total = ((end or datetime.now(UTC)) - start).total_seconds()
    if total < 60:
        return f"{total:.1f}s"
    if total < 3600:
        return f"{int(total // 60)}m{int(total % 60):02d}s"
    return f"{int(total // 3600)}h{int(total % 3600 // 60):02d}m"


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"])
    )
    env.filters.update(
        ago=_ago,
        when=_when,
        pct=_pct,
        urlq=lambda s: quote(str(s), safe=""),
        tojson_attr=lambda v: json.dumps(v, separators=(",", ":")),
    )
    env.globals.update(version=__version__, duration=_seconds)
    return env


templates = Jinja2Templates(env=_env())


def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
    web = web_of(request)
    who = current_principal()
    context.update(user=who.name if web.auth_enabled else "", path=request.url.path)
    return templates.TemplateResponse(
        request, name, context, status_code=status, headers={"Cache-Control": "no-store"}
    )


def error_page(request: Request, e: Exception) -> Response:
    if isinstance(e, ApiError):
        e = CallError(e.code, str(e))
    assert isinstance(e, CallError)
    return render(request, "error.html", status=e.http_status, code=e.code_name, message=e.message)


def page(fn: Handler) -> Handler:
    """Answers refusals with the error page."""

    async def handler(request: Request) -> Response:
        try:
            return await fn(request)
        except (CallError, ApiError) as e:
            return error_page(request, e)

    handler.__name__ = fn.__name__
    return handler


def job_set_url(queue: str, job_set: str) -> str:
    return f"/jobsets/{quote(queue, safe='')}/{quote(job_set, safe='')}"


templates.env.globals.update(job_set_url=job_set_url)


async def _queues(web: Web) -> list[submit_pb2.Queue]:
    return [
        m.queue
        async for m in stream(web.services.queues.GetQueues, submit_pb2.StreamingQueueGetRequest())
        if m.WhichOneof("event") == "queue"
    ]


async def _sample(web: Web) -> Sample:
    latest = web.sampler.latest
    if latest is None or time.time() - latest.time > 2 * web.sampler.period:
        latest = await web.ctx.run(web.sampler.sample)
    return latest


def chart(web: Web, queue: str, bars: int = CHART_BARS) -> list[dict[str, float]]:
    """The last hour in `bars` buckets: mean actual and adjusted fair share of each."""
    now = time.time()
    width = WINDOW / bars
    sums: list[list[float]] = [[0.0, 0.0, 0] for _ in range(bars)]
    for sample in web.sampler.history(now - WINDOW):
        found = sample.queues.get(queue)
        if found is None:
            continue
        i = min(bars - 1, int((sample.time - (now - WINDOW)) // width))
        sums[i][0] += found.share
        sums[i][1] += found.adjusted_fair_share
        sums[i][2] += 1
    return [
        {"share": s / n, "fair": f / n, "n": n} if n else {"share": 0.0, "fair": 0.0, "n": 0}
        for s, f, n in sums
    ]


@page
async def index(request: Request) -> Response:
    return RedirectResponse("/queues", status_code=307)


@page
async def queues_page(request: Request) -> Response:
    web = web_of(request)
    queues = await _queues(web)
    counts = await web.ctx.run(queries.queue_counts, web.ctx.job_reads)
    sample = await _sample(web)
    resources = list(sample.capacity)
    rows = []
    for q in queues:
        c = counts.get(q.name, {})
        rows.append(
            {
                "queue": q,
                "share": sample.queues.get(q.name),
                "counts": c,
                "queued": c.get(JobState.QUEUED, 0) + c.get(JobState.SUBMITTED, 0),
                "running": sum(
                    c.get(s, 0) for s in (JobState.LEASED, JobState.PENDING, JobState.RUNNING)
                ),
                "failed": c.get(JobState.FAILED, 0),
                "succeeded": c.get(JobState.SUCCEEDED, 0),
                "cancelled": c.get(JobState.CANCELLED, 0),
                "chart": chart(web, q.name),
            }
        )
    return render(
        request,
        "queues.html",
        rows=rows,
        resources=resources,
        sample=sample,
        period=web.sampler.period,
        is_admin=web.is_admin(),
        sampled=datetime.fromtimestamp(sample.time, UTC),
    )


@page
async def queue_page(request: Request) -> Response:
    web = web_of(request)
    name = request.path_params["name"]
    queue = await call(web.services.queues.GetQueue, submit_pb2.QueueGetRequest(name=name))
    try:
        offset = max(0, int(request.query_params.get("offset", "0") or 0))
    except ValueError:
        raise InvalidArgument("offset: not an integer") from None
    job_sets, more = await web.ctx.run(
        queries.list_job_sets, web.ctx.job_reads, name, limit=50, offset=offset
    )
    counts = (await web.ctx.run(queries.queue_counts, web.ctx.job_reads)).get(name, {})
    sample = await _sample(web)
    watch = web.may(queue, "watch")
    report = await web.services.reporting.queue_report(name) if watch else None
    return render(
        request,
        "queue.html",
        queue=queue,
        queue_json=to_json(queue),
        job_sets=job_sets,
        more=more,
        offset=offset,
        counts=counts,
        share=sample.queues.get(name),
        resources=list(sample.capacity),
        bars=chart(web, name),
        is_admin=web.is_admin(),
        may_cancel=web.may(queue, "cancel"),
        states=list(JobState),
        report=report,
    )


@page
async def job_set_page(request: Request) -> Response:
    web = web_of(request)
    queue_name, job_set = request.path_params["queue"], request.path_params["jobset"]
    queue = await call(web.services.queues.GetQueue, submit_pb2.QueueGetRequest(name=queue_name))
    counts = await web.ctx.run(queries.job_set_counts, web.ctx.job_reads, queue_name, job_set)
    last = await web.ctx.run(web.ctx.events.last_seq, queue_name, job_set)
    if last is None and not counts:
        raise CallError(
            grpc.StatusCode.NOT_FOUND, f"job set {job_set!r} in queue {queue_name!r} not found"
        )
    where, limit, cursor = job_filter(
        QueryParams(
            [
                *(
                    (k, v)
                    for k, v in request.query_params.multi_items()
                    if k not in ("queue", "jobSet")
                ),
                ("queue", queue_name),
                ("jobSet", job_set),
            ]
        )
    )
    # Its jobs are listed to those who may watch the queue, as in the jobs list.
    may_watch = web.may(queue, "watch")
    jobs = None
    if may_watch:
        jobs = await web.ctx.run(
            queries.list_jobs, web.ctx.job_reads, where, limit=limit, cursor=cursor
        )
    return render(
        request,
        "jobset.html",
        queue=queue,
        job_set=job_set,
        counts=counts,
        last_seq=last,
        page=jobs,
        where=where,
        limit=limit,
        params=_params(request, ("queue", "jobSet")),
        may_watch=may_watch,
        may_cancel=web.may(queue, "cancel"),
        may_reprioritize=web.may(queue, "reprioritize"),
        active=sum(counts.get(s, 0) for s in (*ACTIVE, JobState.SUBMITTED)),
        states=list(JobState),
        job_states=queries.STATE_NAMES,
    )


def _params(request: Request, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The query without paging, for links that change the sort or the filter."""
    out: dict[str, Any] = {}
    for key, value in request.query_params.multi_items():
        if key in ("cursor", *drop):
            continue
        out.setdefault(key, []).append(value)
    return out


def query_string(params: dict[str, Any], **changes: Any) -> str:
    merged = {k: v for k, v in params.items()}
    for k, v in changes.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    return "?" + urlencode(merged, doseq=True)


templates.env.globals.update(query_string=query_string)


@page
async def jobs_page(request: Request) -> Response:
    web = web_of(request)
    where, limit, cursor = job_filter(request.query_params)
    where = await watched(web, where)
    jobs = await web.ctx.run(
        queries.list_jobs, web.ctx.job_reads, where, limit=limit, cursor=cursor
    )
    queues = [q.name for q in await _queues(web) if web.may(q, "watch")]
    by = request.query_params.get("groupBy", "")
    groups = None
    if by:
        groups = await web.ctx.run(queries.group_counts, web.ctx.job_reads, where, by)
    return render(
        request,
        "jobs.html",
        page=jobs,
        where=where,
        limit=limit,
        params=_params(request),
        queues=queues,
        states=queries.STATE_NAMES,
        group_by=by,
        group_names=queries.GROUPS,
        groups=groups,
    )


@page
async def job_page(request: Request) -> Response:
    web = web_of(request)
    job, reason = await load_job(web, request.path_params["id"])
    queue = await call(web.services.queues.GetQueue, submit_pb2.QueueGetRequest(name=job.queue))
    may_watch = web.may(queue, "watch")
    events = []
    messages = []
    if may_watch:
        messages = await web.ctx.run(
            queries.job_events, web.ctx.job_reads, job.queue, job.job_set, job.id
        )
        for seq, message in messages:
            kind = message.WhichOneof("events")
            assert kind is not None  # every stored message carries an event
            body = to_json(getattr(message, kind))
            created = body.pop("created", "")
            for key in ("jobId", "jobSetId", "queue", "job"):  # the spec is shown below
                body.pop(key, None)
            events.append({"seq": seq, "kind": kind, "created": created, "detail": _summary(body)})
    gang = []
    if job.gang is not None:
        gang = await web.ctx.run(
            queries.gang_members, web.ctx.job_reads, job.queue, job.job_set, job.gang.id
        )
    preempted = await web.ctx.run(web.ctx.job_reads.run_preemptions, job.id) if job.runs else {}
    containers = [c.name for c in job.pod_spec.containers]
    report = await web.services.reporting.job_report(job.id) if may_watch else None
    spec_yaml = yaml.safe_dump(to_json(job.spec), sort_keys=False, width=100)
    return render(
        request,
        "job.html",
        job=job,
        reason=reason,
        error=job_error(job),
        events=events,
        gang=gang,
        containers=containers,
        spec_yaml=spec_yaml,
        report=report,
        preemptions=_preemptions(job, preempted, messages),
        may_watch=may_watch,
        may_cancel=web.may(queue, "cancel"),
        may_reprioritize=web.may(queue, "reprioritize"),
        may_preempt=web.may(queue, "preempt"),
        active=job.state in ACTIVE or job.state is JobState.SUBMITTED,
        running=job.state in (JobState.LEASED, JobState.PENDING, JobState.RUNNING),
    )


def _preemptions(
    job: Job,
    preempted: Mapping[str, tuple[str, str]],
    messages: Sequence[tuple[int, event_pb2.EventMessage]],
) -> list[dict[str, str]]:
    """Why each of the job's runs was preempted: its kind, the job it made room for, and for
    a manual preemption who asked (the preempting event after the run's lease names them;
    unknown without the events, which only watchers read)."""
    asked_by: dict[str, str] = {}
    run_id = ""
    for _, message in messages:
        which = message.WhichOneof("events")
        if which == "leased":
            run_id = message.leased.run_id
        elif which == "preempting" and run_id:
            asked_by.setdefault(run_id, message.preempting.requestor)
    out = []
    for run in job.runs:
        if run.id in preempted:
            kind, preempting = preempted[run.id]
            out.append(
                {
                    "run": str(run.index),
                    "kind": kind.replace("_", " "),
                    "preempting": preempting,
                    "by": asked_by.get(run.id, ""),
                }
            )
    return out


@page
async def nodes_page(request: Request) -> Response:
    web = web_of(request)
    nodes = await web.ctx.run(web.ctx.nodes.nodes_with_cordons)
    now = datetime.now(UTC)
    live = {
        n.executor
        for n in nodes
        if (now - n.last_seen).total_seconds() <= web.ctx.config.lease_timeout
    }
    loads = await web.ctx.run(web.ctx.nodes.node_loads)
    on_nodes = await web.ctx.run(queries.jobs_on_nodes, web.ctx.job_reads)
    watched = {q.name for q in await _queues(web) if web.may(q, "watch")}
    rows = [
        _node_row(
            n, loads.get((n.executor, n.name)), on_nodes.get((n.executor, n.name), []), watched
        )
        for n in nodes
    ]
    return render(request, "nodes.html", rows=rows, live=live, is_admin=web.is_admin())


NODE_JOBS = 20  # jobs named per node; the rest are counted


def _node_row(
    node: NodeInfo, load: NodeLoad | None, jobs: list[queries.NodeJob], watched: set[str]
) -> dict[str, Any]:
    """A node's capacity, what its runs request and what is left, in units people read, and
    the jobs on it that the caller may watch (the others are only counted)."""
    used = load.requests if load else {}
    resources: list[dict[str, Any]] = []
    for name, text in sorted(node.node.allocatable.items()):
        total = units.parsed(name, text)
        if total is None:
            resources.append({"name": name, "total": text, "used": "", "free": "", "pct": None})
            continue
        taken = used.get(name, 0)
        resources.append(
            {
                "name": name,
                "total": units.readable(name, total),
                "used": units.readable(name, taken),
                "free": units.readable(name, max(0, total - taken)),
                "pct": min(1.0, taken / total) if total else None,
            }
        )
    visible = [j for j in jobs if j.queue in watched]
    return {
        "node": node,
        "resources": resources,
        "jobs": visible[:NODE_JOBS],
        "more": len(visible) - len(visible[:NODE_JOBS]),
        "hidden": len(jobs) - len(visible),
    }


def _summary(body: dict[str, Any]) -> str:
    parts = []
    for key, value in body.items():
        if value in ("", None, [], {}):
            continue
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        parts.append(f"{key}={text}")
    out = "  ".join(parts)
    return out if len(out) <= 400 else out[:400] + "…"


async def live(request: Request) -> Response:
    """Server-sent `change` events naming the job sets that changed (see live.py): only
    those of queues the caller may watch, as every other list shows."""
    web = web_of(request)
    who = current_principal()  # the stream outlives the request's context
    authorizer = web.ctx.authorizer

    async def watchable(changed: set[JobSetKey]) -> set[JobSetKey]:
        if authorizer.is_admin(who):
            return changed
        queues = {q.name: q for q in await _queues(web)}
        return {
            key
            for key in changed
            if (queue := queues.get(key[0])) is not None and authorizer.may(who, queue, "watch")
        }

    return StreamingResponse(
        web.feed.follow(watchable), media_type="text/event-stream", headers=SSE_HEADERS
    )


routes = [
    Route("/", index, methods=["GET"]),
    Route("/queues", queues_page, methods=["GET"]),
    Route("/queues/{name}", queue_page, methods=["GET"]),
    Route("/jobsets/{queue}/{jobset:path}", job_set_page, methods=["GET"]),
    Route("/jobs", jobs_page, methods=["GET"]),
    Route("/jobs/{id}", job_page, methods=["GET"]),
    Route("/nodes", nodes_page, methods=["GET"]),
    Route("/ui/live", live, methods=["GET"]),
]
