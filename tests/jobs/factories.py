"""Small builders for job-domain tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format

from armada_core.api import submit_pb2

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def container(
    name: str = "main", cpu: str = "1", memory: str = "1Gi", **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "command": ["sleep", "1"],
        "resources": {
            "requests": {"cpu": {"string": cpu}, "memory": {"string": memory}},
            "limits": {"cpu": {"string": cpu}, "memory": {"string": memory}},
        },
        **extra,
    }


def item(pod: dict[str, Any] | None = None, **fields: Any) -> submit_pb2.JobSubmitRequestItem:
    value = {
        "priority": 1.0,
        "namespace": "default",
        "pod_specs": [pod if pod is not None else {"containers": [container()]}],
        **fields,
    }
    return json_format.ParseDict(value, submit_pb2.JobSubmitRequestItem())


def request(
    *items: submit_pb2.JobSubmitRequestItem, queue: str = "q", job_set: str = "set"
) -> submit_pb2.JobSubmitRequest:
    return submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id=job_set, job_request_items=list(items) or [item()]
    )
