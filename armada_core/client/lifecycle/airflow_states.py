"""The reaper's Airflow adapter: task instance states through Airflow's REST API (v2, Airflow 3),
with the standard library's HTTP client so that `armada reap --airflow URL` needs no Airflow.

A job's task is `<dag>/<run>/<task>/<map index>` (airflow_armada's `task_identity`); its
attempt is the count of reported ends that the operator keeps in the task instance's state
store (`armada_attempt`). A task instance in a final state has ended; one that runs (or waits
to: scheduled, queued, deferred, up for retry...) is running at the attempt its state store
names, so a live job of an earlier attempt is over. A task instance Airflow does not know
(its run deleted, another Airflow's task) is unknown: its jobs are left alone.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from .reaping import OrchestratorUnreachable, TaskJob, TaskState, ended, running, unknown

#: Task instance states after which Airflow runs nothing more of the try.
FINAL_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: The operator's key in the task state store (airflow_armada.operators.armada.ATTEMPT_KEY).
ATTEMPT_KEY = "armada_attempt"


class HttpError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status = status


def split_task(task: str) -> tuple[str, str, str, int] | None:
    """(dag id, run id, task id, map index) of a task annotation; None if it is not one (a
    hashed long name). DAG and task ids have no "/", so the run id is what lies between."""
    parts = task.split("/")
    if len(parts) < 4 or "#" in parts[-1]:
        return None
    try:
        map_index = int(parts[-1])
    except ValueError:
        return None
    return parts[0], "/".join(parts[1:-2]), parts[-2], map_index


class AirflowTaskStates:
    """Airflow's answer per task attempt (`reaping.TaskStates`).

    Credentials as Airflow 3's API takes them: a JWT (`token`), or a user and password
    exchanged at `/auth/token` (and again when the token expires); with neither, a token is
    asked of `/auth/token` without credentials (the simple auth manager with
    `simple_auth_manager_all_admins`).
    """

    orchestrator = "airflow"

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self._fixed_token = token
        self._token = token

    # --- HTTP ------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if auth and self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            raise HttpError(e.code, e.read().decode(errors="replace")) from None
        except (OSError, ValueError) as e:  # refused, timed out, not JSON
            raise OrchestratorUnreachable(f"Airflow API at {self.url}: {e}") from None

    def _login(self) -> None:
        if self._fixed_token:
            raise OrchestratorUnreachable(f"Airflow API at {self.url} refused the token")
        try:
            if self.username:
                creds = {"username": self.username, "password": self.password or ""}
                answer = self._request("POST", "/auth/token", creds, auth=False)
            else:
                answer = self._request("GET", "/auth/token", auth=False)
        except HttpError as e:
            raise OrchestratorUnreachable(
                f"Airflow API at {self.url}: no token from /auth/token ({e})"
            ) from None
        self._token = str(answer["access_token"])

    def get(self, path: str) -> Any:
        """GET `path` (logging in first, and again once if the token is refused)."""
        if self._token is None:
            self._login()
        try:
            return self._request("GET", path)
        except HttpError as e:
            if e.status not in (401, 403):
                raise
        self._token = self._fixed_token
        self._login()
        try:
            return self._request("GET", path)
        except HttpError as e:
            if e.status in (401, 403):
                raise OrchestratorUnreachable(f"Airflow API at {self.url}: {e}") from None
            raise

    # --- states ----------------------------------------------------------------------------

    def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:
        by_task: dict[str, TaskState] = {}
        for task in dict.fromkeys(j.task for j in jobs):
            by_task[task] = self.task_state(task)
        return {job.key: by_task[job.task] for job in jobs}

    def task_state(self, task: str) -> TaskState:
        subject = f"airflow task {task}"
        parts = split_task(task)
        if parts is None:
            return unknown(subject, "not an Airflow task instance name")
        dag, run, task_id, map_index = parts
        path = "/api/v2/dags/{}/dagRuns/{}/taskInstances/{}".format(
            *(urllib.parse.quote(p, safe="") for p in (dag, run, task_id))
        )
        try:
            ti = self.get(path + (f"/{map_index}" if map_index >= 0 else ""))
        except HttpError as e:
            if e.status == 404:
                return unknown(subject, "not found")
            raise OrchestratorUnreachable(f"Airflow API at {self.url}: {e}") from None
        state = ti.get("state") or "none"
        if state in FINAL_STATES:
            return ended(subject, state)
        try:
            stored = self.get(f"{path}/state-store/{ATTEMPT_KEY}?map_index={map_index}")
            attempt = str(int(stored["value"]))
        except HttpError as e:
            if e.status != 404:
                raise OrchestratorUnreachable(f"Airflow API at {self.url}: {e}") from None
            attempt = "0"  # no try has reported an end yet
        except (KeyError, TypeError, ValueError):
            return running(subject, state)  # not the operator's count: no attempt to compare
        return running(subject, state, attempt)
