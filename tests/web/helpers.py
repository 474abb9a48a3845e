"""Talking to the web server in tests: JSON over HTTP, jobs as job-file dicts."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def pod(
    command: str, *, cpu: str = "100m", memory: str = "64Mi", name: str = "main"
) -> dict[str, Any]:
    return {
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": name,
                "image": "busybox",
                "command": ["sh", "-c", command],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ],
    }


def job(command: str = "true", **fields: Any) -> dict[str, Any]:
    return {"podSpec": pod(command), **fields}


class Http:
    def __init__(self, base: str, auth: str | None = None) -> None:
        self.base = base
        self.auth = auth  # an Authorization header value

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        data = None
        sent = dict(headers or {})
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        if self.auth:
            sent.setdefault("Authorization", self.auth)
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(
        self, method: str, path: str, body: Any = None, *, expect: int = 200, **kw: Any
    ) -> Any:
        status, _, raw = self.request(method, path, body, **kw)
        assert status == expect, (status, raw[:2000])
        return json.loads(raw)

    def get(self, path: str, **kw: Any) -> Any:
        return self.json("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Any:
        return self.json("POST", path, body, **kw)

    def submit(self, queue: str, job_set: str, *jobs: dict[str, Any]) -> list[str]:
        return self.post("/api/v1/jobs", {"queue": queue, "jobSetId": job_set, "jobs": list(jobs)})[
            "jobIds"
        ]

    def state(self, job_id: str) -> str:
        return self.get(f"/api/v1/jobs/status?id={job_id}")["jobStates"][job_id]

    def wait_state(self, job_id: str, *states: str, timeout: float = 60) -> str:
        return eventually(
            lambda: s if (s := self.state(job_id)) in states else None,
            timeout=timeout,
            what=f"job {job_id} in {states}",
        )


def eventually(
    probe: Callable[[], T | None],
    *,
    timeout: float = 60,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
