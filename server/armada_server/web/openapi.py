"""The gateway's OpenAPI 3.0 document, served at /api/v1/openapi.json.

Written by hand beside the routes in gateway.py; tests/web checks the two agree by testing
the running gateway against this document with schemathesis.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from armada_core.jobs import JobState
from armada_server import __version__
from armada_server.web.queries import GROUPS

STATES = [s.name for s in JobState]
JOB_SET_STATES = ["QUEUED", "LEASED", "PENDING", "RUNNING"]
LIST_STATES = [s.name.lower() for s in JobState if s is not JobState.UNKNOWN]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _map(values: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": values}


def _obj(
    properties: dict[str, Any], required: tuple[str, ...] = (), *, extra: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": extra,
    }
    if required:
        out["required"] = list(required)
    return out


STR = {"type": "string"}
NSTR = {"type": "string", "nullable": True}
NUM = {"type": "number"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
TIME = {"type": "string", "format": "date-time", "nullable": True}
STRINGS = _array(STR)
STR_MAP = _map(STR)

SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": _obj({"code": STR, "message": STR}, ("code", "message"))}, ("error",)),
    "Queue": _obj(
        {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,63}$"},
            "priorityFactor": {
                "type": "number",
                "minimum": 0,
                "description": "0 (or absent) means 1; weight is 1 / factor",
            },
            "userOwners": STRINGS,
            "groupOwners": STRINGS,
            "permissions": _array(
                _obj(
                    {
                        "subjects": _array(
                            _obj(
                                {"kind": {"type": "string", "enum": ["User", "Group"]}, "name": STR}
                            )
                        ),
                        "verbs": _array(
                            {
                                "type": "string",
                                "enum": ["submit", "cancel", "preempt", "reprioritize", "watch"],
                            }
                        ),
                    }
                )
            ),
            "cordoned": BOOL,
            "labels": STR_MAP,
            "retryPolicies": STRINGS,
            "resourceLimitsByPriorityClassName": {"type": "object"},
        },
        extra=True,
    ),
    "QueueList": _obj({"queues": _array(_ref("Queue"))}, ("queues",)),
    "JobItem": _obj(
        {
            "priority": NUM,
            "namespace": STR,
            "clientId": STR,
            "labels": STR_MAP,
            "annotations": STR_MAP,
            "podSpec": {"type": "object", "description": "a Kubernetes core/v1 PodSpec"},
            "podSpecs": _array({"type": "object"}),
            "ingress": _array({"type": "object"}),
            "services": _array({"type": "object"}),
            "scheduler": STR,
            "externalJobUri": STR,
        },
        extra=True,
    ),
    "SubmitRequest": _obj(
        {"queue": STR, "jobSetId": STR, "jobs": _array(_ref("JobItem"))},
        ("queue", "jobSetId", "jobs"),
    ),
    "SubmitResponse": _obj({"jobIds": STRINGS}, ("jobIds",)),
    "JobRow": _obj(
        {
            "id": STR,
            "queue": STR,
            "jobSet": STR,
            "state": {"type": "string", "enum": STATES},
            "priority": NUM,
            "priorityClass": STR,
            "gangId": NSTR,
            "submitted": TIME,
            "lastTransition": TIME,
            "reason": STR,
            "clientId": STR,
            "annotations": _map(STR),
            "gangRole": STR,
        },
        ("id", "queue", "jobSet", "state"),
    ),
    "JobList": _obj(
        {"jobs": _array(_ref("JobRow")), "next": NSTR, "prev": NSTR}, ("jobs", "next", "prev")
    ),
    "JobGroups": _obj(
        {
            "groupBy": STR,
            "groups": _array(_obj({"value": STR, "count": INT, "queue": STR}, ("value", "count"))),
            "more": BOOL,
        },
        ("groupBy", "groups", "more"),
    ),
    "JobStates": _obj({"jobStates": _map({"type": "string", "enum": STATES})}, ("jobStates",)),
    "Container": _obj(
        {"name": STR, "exitCode": INT, "message": STR, "reason": STR, "initContainer": BOOL}
    ),
    "Run": _obj(
        {
            "id": STR,
            "index": INT,
            "state": STR,
            "executor": STR,
            "node": STR,
            "pool": STR,
            "leased": TIME,
            "pending": TIME,
            "started": TIME,
            "finished": TIME,
            "condition": STR,
            "category": STR,
            "subcategory": STR,
            "reason": STR,
            "containers": _array(_ref("Container")),
        }
    ),
    "Job": _obj(
        {
            "id": STR,
            "queue": STR,
            "jobSet": STR,
            "state": {"type": "string", "enum": STATES},
            "priority": NUM,
            "priorityClass": STR,
            "owner": STR,
            "submitted": TIME,
            "lastTransition": TIME,
            "schedulingReason": STR,
            "error": STR,
            "cancelReason": STR,
            "cancelUser": STR,
            "annotations": STR_MAP,
            "gangId": NSTR,
            "runs": _array(_ref("Run")),
            "spec": {"type": "object"},
        },
        ("id", "queue", "jobSet", "state", "runs", "spec"),
    ),
    "CancelRequest": _obj(
        {"queue": STR, "jobSetId": STR, "jobId": STR, "jobIds": STRINGS, "reason": STR},
        ("queue", "jobSetId"),
    ),
    "CancelResponse": _obj({"cancelledIds": STRINGS}, ("cancelledIds",)),
    "BulkCancelRequest": _obj(
        {
            "queue": STR,
            "jobSet": STR,
            "state": _array({"type": "string", "enum": LIST_STATES}),
            "reason": STR,
            "dryRun": BOOL,
        }
    ),
    "BulkReprioritizeRequest": _obj(
        {
            "queue": STR,
            "jobSet": STR,
            "state": _array({"type": "string", "enum": LIST_STATES}),
            "newPriority": {"type": "number", "minimum": 0},
            "dryRun": BOOL,
        },
        ("newPriority",),
    ),
    "BulkResult": _obj({"count": INT, "excluded": INT, "jobIds": STRINGS}, ("count", "excluded")),
    "ReprioritizeRequest": _obj(
        {"queue": STR, "jobSetId": STR, "jobIds": STRINGS, "newPriority": NUM},
        ("queue", "jobSetId", "newPriority"),
    ),
    "PreemptRequest": _obj(
        {"queue": STR, "jobSetId": STR, "jobIds": STRINGS, "reason": STR}, ("queue", "jobSetId")
    ),
    "Results": _obj({"results": STR_MAP}, ("results",)),
    "JobSetCancelRequest": _obj(
        {
            "queue": STR,
            "jobSetId": STR,
            "reason": STR,
            "filter": _obj({"states": _array({"type": "string", "enum": JOB_SET_STATES})}),
        },
        ("queue", "jobSetId"),
    ),
    "Empty": _obj({}),
    "NodeRequest": _obj(
        {
            "node": {
                "type": "string",
                "minLength": 1,
                "description": "NODE, or EXECUTOR/NODE when executors share names",
            }
        },
        ("node",),
    ),
    "Node": _obj(
        {
            "id": STR,
            "executor": STR,
            "pool": STR,
            "name": STR,
            "allocatable": STR_MAP,
            "labels": STR_MAP,
            "taints": _array(_obj({"key": STR, "value": STR, "effect": STR})),
            "unschedulable": BOOL,
            "cordoned": BOOL,
            "cordonedAt": TIME,
            "cordonedBy": STR,
            "lastSeen": TIME,
        },
        ("id", "executor", "name", "cordoned"),
    ),
    "NodeList": _obj({"nodes": _array(_ref("Node"))}, ("nodes",)),
    "LogLines": _obj({"lines": _array(_obj({"timestamp": STR, "line": STR}))}, ("lines",)),
    "JobSets": _obj(
        {
            "jobSets": _array(
                _obj(
                    {
                        "queue": STR,
                        "jobSet": STR,
                        "created": TIME,
                        "lastMessageId": STR,
                        "counts": _map(INT),
                    }
                )
            ),
            "more": BOOL,
        },
        ("jobSets", "more"),
    ),
    "Shares": _obj(
        {
            "period": NUM,
            "samples": _array(
                _obj(
                    {
                        "time": TIME,
                        "capacity": _map(INT),
                        "queues": _array(
                            _obj(
                                {
                                    "name": STR,
                                    "weight": NUM,
                                    "cordoned": BOOL,
                                    "active": BOOL,
                                    "fairShare": NUM,
                                    "adjustedFairShare": NUM,
                                    "share": NUM,
                                    "demand": NUM,
                                    "shares": _map(NUM),
                                    "running": INT,
                                    "queued": INT,
                                }
                            )
                        ),
                    }
                )
            ),
        },
        ("period", "samples"),
    ),
}

_ERRORS = {
    "400": "invalid request (the message names the field)",
    "401": "credentials missing or wrong (authentication is on)",
    "403": "the caller may not do this",
    "404": "no such queue, job or job set",
    "409": "already exists",
    "503": "the executor holding the logs cannot be reached",
    "415": "the body is not sent as application/json",
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _op(
    op_id: str,
    summary: str,
    ok: dict[str, Any],
    *,
    status: str = "200",
    errors: tuple[str, ...] = ("400", "401", "403", "404"),
    body: str | None = None,
    params: list[dict[str, Any]] | None = None,
    tag: str = "jobs",
) -> dict[str, Any]:
    responses = {status: ok}
    if body is not None:
        errors = (*errors, "415")
    for code in errors:
        responses[code] = _json(_ref("Error"), _ERRORS[code])
    op: dict[str, Any] = {
        "operationId": op_id,
        "summary": summary,
        "tags": [tag],
        "responses": responses,
    }
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(body)}},
        }
    if params:
        op["parameters"] = params
    return op


def _q(
    name: str,
    schema: dict[str, Any],
    description: str = "",
    *,
    required: bool = False,
    where: str = "query",
    **extra: Any,
) -> dict[str, Any]:
    out = {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "schema": schema,
        **extra,
    }
    if description:
        out["description"] = description
    return out


QUEUE_NAME = _q("name", STR, where="path")
JOB_ID = _q("id", STR, where="path")


def _info() -> dict[str, Any]:
    return {
        "title": "armada-server REST gateway",
        "version": __version__,
        "description": (
            "The public API over HTTP/JSON. Each call runs the gRPC service's own "
            "logic; errors carry the gRPC code name. With authentication on, send "
            "the same Basic or Bearer credentials as over gRPC."
        ),
    }


def _components() -> dict[str, Any]:
    return {
        "schemas": SCHEMAS,
        "securitySchemes": {
            "basicAuth": {"type": "http", "scheme": "basic"},
            "bearerAuth": {"type": "http", "scheme": "bearer"},
        },
    }


def _job_filters() -> list[dict[str, Any]]:
    """The filters the job list and its group counts share."""
    return [
        _q("queue", STR),
        _q("jobSet", STR, "needs queue"),
        _q(
            "state",
            _array({"type": "string", "enum": [*LIST_STATES, ""]}),
            "any of these states (empty: any state)",
            style="form",
            explode=True,
        ),
    ]


def _queue_paths() -> dict[str, Any]:
    """The queues, their cordons and the fair-share samples."""
    return {
        "/api/v1/queues": {
            "get": _op(
                "listQueues",
                "Every queue",
                _json(_ref("QueueList"), "queues"),
                errors=("401",),
                tag="queues",
            ),
            "post": _op(
                "createQueue",
                "Create a queue (administrators)",
                _json(_ref("Queue"), "the queue created"),
                status="201",
                errors=("400", "401", "403", "409"),
                body="Queue",
                tag="queues",
            ),
        },
        "/api/v1/queues/{name}": {
            "get": _op(
                "getQueue",
                "One queue",
                _json(_ref("Queue"), "the queue"),
                params=[QUEUE_NAME],
                errors=("400", "401", "404"),
                tag="queues",
            ),
            "put": _op(
                "updateQueue",
                "Replace a queue's settings (administrators)",
                _json(_ref("Queue"), "the queue as stored"),
                body="Queue",
                params=[QUEUE_NAME],
                tag="queues",
            ),
            "delete": _op(
                "deleteQueue",
                "Delete a queue (administrators)",
                _json(_ref("Empty"), "deleted"),
                params=[QUEUE_NAME],
                tag="queues",
            ),
        },
        "/api/v1/queues/{name}/cordon": {
            "post": _op(
                "cordonQueue",
                "Stop scheduling the queue's jobs (administrators)",
                _json(_ref("Queue"), "the queue"),
                params=[QUEUE_NAME],
                tag="queues",
            ),
        },
        "/api/v1/queues/{name}/uncordon": {
            "post": _op(
                "uncordonQueue",
                "Schedule the queue's jobs again",
                _json(_ref("Queue"), "the queue"),
                params=[QUEUE_NAME],
                tag="queues",
            ),
        },
        "/api/v1/shares": {
            "get": _op(
                "getShares",
                "Fair share, adjusted fair share and actual share per "
                "queue, sampled over the last hour",
                _json(_ref("Shares"), "samples"),
                errors=("401",),
                tag="queues",
            ),
        },
    }


def _node_paths() -> dict[str, Any]:
    """The executors' nodes and their cordons."""
    return {
        "/api/v1/nodes": {
            "get": _op(
                "listNodes",
                "Every executor's nodes, with their cordons",
                _json(_ref("NodeList"), "nodes"),
                errors=("401",),
                tag="nodes",
            ),
        },
        "/api/v1/nodes/cordon": {
            "post": _op(
                "cordonNode",
                "Place no new jobs on a node (administrators)",
                _json(_ref("Node"), "the node"),
                body="NodeRequest",
                tag="nodes",
            ),
        },
        "/api/v1/nodes/uncordon": {
            "post": _op(
                "uncordonNode",
                "Place jobs on a node again (administrators)",
                _json(_ref("Node"), "the node"),
                body="NodeRequest",
                tag="nodes",
            ),
        },
    }


def _job_paths() -> dict[str, Any]:
    """Submitting jobs, finding them and reading one: its state, details and logs."""
    return {
        "/api/v1/jobs": {
            "post": _op(
                "submitJobs",
                "Submit jobs to a job set (the `armada` job-file format); one id per job, in order",
                _json(_ref("SubmitResponse"), "the jobs' ids"),
                body="SubmitRequest",
            ),
            "get": _op(
                "listJobs",
                "Jobs of the queues the caller may watch, filtered and sorted, a page at a time "
                "(a queue filter naming a queue the caller may not watch: 403)",
                _json(_ref("JobList"), "one page"),
                errors=("400", "401", "403", "404"),
                params=[
                    *_job_filters(),
                    _q("annotation", STR, "key or key=value"),
                    _q(
                        "sort",
                        {
                            "type": "string",
                            "enum": ["submitted", "updated", "priority", "state"],
                        },
                    ),
                    _q("order", {"type": "string", "enum": ["asc", "desc"]}),
                    _q("limit", {"type": "integer", "minimum": 1, "maximum": 500}),
                    _q("cursor", STR, "`next` or `prev` of the previous page"),
                ],
            ),
        },
        "/api/v1/jobs/status": {
            "get": _op(
                "getJobStatus",
                "States of jobs (UNKNOWN for ids never seen)",
                _json(_ref("JobStates"), "states"),
                errors=("400", "401"),
                params=[_q("id", STRINGS, style="form", explode=True)],
            ),
        },
        "/api/v1/jobs/{id}": {
            "get": _op(
                "getJob",
                "A job: spec, state, runs, why it is not scheduled",
                _json(_ref("Job"), "the job"),
                params=[JOB_ID],
                errors=("401", "404"),
            ),
        },
        "/api/v1/jobs/{id}/logs": {
            "get": _op(
                "getJobLogs",
                "Log lines of the job's latest run, from the executor that ran it",
                _json(_ref("LogLines"), "lines"),
                params=[
                    JOB_ID,
                    _q("container", STR),
                    _q("sinceTime", STR, "RFC 3339: lines after this time"),
                    _q("tailLines", {"type": "integer", "minimum": 0, "maximum": 1000000}),
                ],
                errors=("400", "401", "403", "404", "503"),
            ),
        },
    }


def _job_group_paths() -> dict[str, Any]:
    """The job list's group counts."""
    return {
        "/api/v1/jobs/groups": {
            "get": _op(
                "groupJobs",
                "The filtered jobs of the queues the caller may watch counted per value of "
                "groupBy, largest groups first (a queue filter naming a queue the caller may "
                "not watch: 403)",
                _json(_ref("JobGroups"), "the groups"),
                errors=("400", "401", "403", "404"),
                params=[
                    _q(
                        "groupBy",
                        {"type": "string", "enum": list(GROUPS)},
                        "a job's node is that of its latest run",
                        required=True,
                    ),
                    *_job_filters(),
                ],
            ),
        },
    }


def _job_action_paths() -> dict[str, Any]:
    """Cancelling, reprioritising and preempting a job set's jobs."""
    return {
        "/api/v1/bulk/cancel": {
            "post": _op(
                "bulkCancel",
                "Cancel every live job the filter matches in queues the caller may cancel in "
                "(one transaction, at most 10,000; dryRun: only count them)",
                _json(_ref("BulkResult"), "how many (and which) jobs, and how many left out"),
                body="BulkCancelRequest",
            ),
        },
        "/api/v1/bulk/reprioritize": {
            "post": _op(
                "bulkReprioritize",
                "Give every live job the filter matches, in queues the caller may reprioritize "
                "in, a new priority (one transaction, at most 10,000; dryRun: only count them)",
                _json(_ref("BulkResult"), "how many (and which) jobs, and how many left out"),
                body="BulkReprioritizeRequest",
            ),
        },
        "/api/v1/jobs/cancel": {
            "post": _op(
                "cancelJobs",
                "Cancel jobs of a job set",
                _json(_ref("CancelResponse"), "the ids cancelled"),
                body="CancelRequest",
            ),
        },
        "/api/v1/jobs/reprioritize": {
            "post": _op(
                "reprioritizeJobs",
                "New priority for jobs of a job set (all of them when jobIds is empty)",
                _json(_ref("Results"), "per job: an error, or empty"),
                body="ReprioritizeRequest",
            ),
        },
        "/api/v1/jobs/preempt": {
            "post": _op(
                "preemptJobs",
                "Preempt running jobs of a job set",
                _json(_ref("Results"), "per job: an error, or empty"),
                body="PreemptRequest",
            ),
        },
    }


def _job_set_paths() -> dict[str, Any]:
    """Job sets: listing, cancelling, and their event streams."""
    return {
        "/api/v1/jobsets": {
            "get": _op(
                "listJobSets",
                "A queue's job sets, newest first, with counts",
                _json(_ref("JobSets"), "job sets"),
                params=[
                    _q("queue", STR, required=True),
                    _q("limit", {"type": "integer", "minimum": 1, "maximum": 500}),
                    _q("offset", {"type": "integer", "minimum": 0}),
                ],
                tag="jobsets",
            ),
        },
        "/api/v1/jobsets/cancel": {
            "post": _op(
                "cancelJobSet",
                "Cancel a job set's jobs (those in the filter's states)",
                _json(_ref("Empty"), "cancelled"),
                body="JobSetCancelRequest",
                tag="jobsets",
            ),
        },
        "/api/v1/events": {
            "get": _op(
                "jobSetEvents",
                "A job set's events as server-sent events: `id` "
                "is the message id, `event` the type, `data` the event as JSON. "
                "Resume with fromMessageId or the Last-Event-ID header.",
                {
                    "description": "the event stream",
                    "content": {"text/event-stream": {"schema": STR}},
                },
                params=[
                    _q("queue", STR, required=True),
                    _q("jobSetId", STR, required=True),
                    _q("fromMessageId", STR),
                    _q("watch", BOOL, "keep the stream open for new events"),
                ],
                tag="jobsets",
            ),
        },
    }


NINT = {"type": "integer", "nullable": True}
_CYCLE = _obj(
    {
        "cycle": INT,
        "started": STR,
        "seconds": NUM,
        "considered": _map(INT),
        "scheduled": INT,
        "preempted": INT,
        "failed": INT,
        "pools": _map(_map(INT)),
        "preemptions": _map(INT),
        "waiting": _map(INT),
        "limits": _obj({}, extra=True),
        "queues": _map(_obj({}, extra=True)),
    },
    ("cycle", "started", "seconds", "scheduled", "preempted", "queues"),
    extra=True,
)
SCHEMAS["SchedulingReport"] = _obj(
    {"pool": STR, "cycles": _array(_CYCLE), "limits": STR_MAP}, ("pool", "cycles", "limits")
)
SCHEMAS["QueueReport"] = _obj(
    {
        "queue": STR,
        "cycle": NINT,
        "standing": {"type": "object", "nullable": True, "additionalProperties": True},
        "waiting": _array(
            _obj(
                {
                    "reason": STR,
                    "count": INT,
                    "oldestJobId": STR,
                    "oldestSubmitted": STR,
                    "limit": NSTR,
                    "needs": STR,
                }
            )
        ),
        "heldBy": STR,
        "needs": STR,
    },
    ("queue", "cycle", "standing", "waiting", "heldBy", "needs"),
)
SCHEMAS["JobReport"] = _obj(
    {
        "jobId": STR,
        "queue": STR,
        "jobSet": STR,
        "state": STR,
        "reason": STR,
        "limit": NSTR,
        "needs": STR,
        "history": _array(_obj({"fromCycle": INT, "cycles": NINT, "reason": STR})),
        "placeInLine": NINT,
        "lineLength": NINT,
        "nearestNodes": _array(_obj({"executor": STR, "pool": STR, "node": STR, "lacks": STR_MAP})),
    },
    ("jobId", "queue", "state", "history", "placeInLine", "lineLength", "nearestNodes"),
)


def _report_paths() -> dict[str, Any]:
    """The scheduling reports (SchedulerReporting over HTTP; docs/reports.md)."""
    return {
        "/api/v1/reports/scheduling": {
            "get": _op(
                "getSchedulingReport",
                "The latest scheduling cycles: what they decided and why, the limits that "
                "bound, each queue's fair share, adjusted fair share, actual share, decayed "
                "usage and demand (only queues the caller may watch)",
                _json(_ref("SchedulingReport"), "the report"),
                errors=("400", "401"),
                params=[
                    _q("pool", STR, "only this pool's counts"),
                    _q("cycles", {"type": "integer", "minimum": 1, "maximum": 1000}, "how many"),
                ],
                tag="reports",
            ),
        },
        "/api/v1/queues/{name}/report": {
            "get": _op(
                "getQueueReport",
                "A queue's standing, its waiting jobs by reason, what holds it back",
                _json(_ref("QueueReport"), "the report"),
                params=[QUEUE_NAME],
                tag="reports",
            ),
        },
        "/api/v1/jobs/{id}/report": {
            "get": _op(
                "getJobReport",
                "A job's reasons over the cycles, its place in line, the nearest nodes",
                _json(_ref("JobReport"), "the report"),
                params=[JOB_ID],
                tag="reports",
            ),
        },
    }


@cache
def document() -> dict[str, Any]:
    """The whole document, built once: the gateway serves it as it is."""
    return {
        "openapi": "3.0.3",
        "info": _info(),
        "servers": [{"url": "/"}],
        "security": [{"basicAuth": []}, {"bearerAuth": []}],
        "components": _components(),
        "paths": {
            **_queue_paths(),
            **_node_paths(),
            **_job_paths(),
            **_job_group_paths(),
            **_job_action_paths(),
            **_job_set_paths(),
            **_report_paths(),
        },
    }
