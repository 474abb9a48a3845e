"""Deterministic job identities from Prefect's run identity, so a crashed and re-executed
submitter finds its job instead of submitting a second one.

The key names the flow run, the task inside it and the attempt. A task run's id (and, in
Prefect 3.7, its dynamic key) is new each time Prefect executes the flow run again, so the
task is named by what stays the same: its task key, a hash of its parameters, and which call
with those parameters it is within the flow run (identical calls are interchangeable).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prefect.context import FlowRunContext, TaskRunContext
from pydantic import BaseModel

#: Fixed namespace of the uuid5 client ids (any constant would do; it must never change).
_NAMESPACE = uuid.UUID("5f0c4a52-53a9-4d8e-9a8c-3c1f6e2b7d41")

_counters: dict[str, itertools.count[int]] = {}
_occurrences: dict[str, int] = {}  # task run id -> which identical call of its task it is
_lock = threading.Lock()


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return repr(value)


def parameters_hash(parameters: Mapping[str, Any]) -> str:
    """A digest of a task's parameters that is the same in every process."""
    text = json.dumps(dict(parameters), sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunIdentity:
    """Where a job was started from: `key` is stable across re-executions of the same
    attempt; `flow_run_id` and `task_run_id` are the Prefect ids, when known."""

    key: str
    flow_run_id: str | None = None
    task_run_id: str | None = None
    attempt: int = 1
    #: A client id chosen by the user, used instead of the derived one.
    explicit_client_id: str | None = None

    @classmethod
    def explicit(cls, client_id: str) -> RunIdentity:
        return cls(f"client-id/{client_id}", explicit_client_id=client_id)

    def client_id(self, generation: int = 0) -> str:
        """The submission's client id; generation > 0 when earlier ones ended badly."""
        base = self.explicit_client_id or "prefect-" + uuid.uuid5(_NAMESPACE, self.key).hex
        return base if generation == 0 else f"{base}-g{generation}"

    def external_job_uri(self, generation: int = 0) -> str:
        """Stored on the jobs so a re-execution can find them with
        GetJobStatusUsingExternalJobUri."""
        return f"prefect://{self.key}" + (f"#g{generation}" if generation else "")


def _next(counter_key: str) -> int:
    with _lock:
        return next(_counters.setdefault(counter_key, itertools.count(1)))


def current_identity(name: str = "armada-job") -> RunIdentity:
    """The identity of the code calling it: the task run (flow run, task key, dynamic key,
    attempt), else the flow run (a counter of jobs started by the flow run in this
    process), else a random one (no idempotency outside Prefect runs)."""
    task_ctx = TaskRunContext.get()
    if task_ctx is not None:
        run = task_ctx.task_run
        attempt = max(run.run_count, 1)
        if run.flow_run_id is not None:
            call = f"{run.flow_run_id}/{run.task_key}/{parameters_hash(task_ctx.parameters)}"
            with _lock:
                if str(run.id) not in _occurrences:
                    _occurrences[str(run.id)] = next(
                        _counters.setdefault(call, itertools.count(1)))
                occurrence = _occurrences[str(run.id)]
            key = (f"flow-run/{call}/{occurrence}/{name}/"
                   f"{_next(f'{run.id}/{attempt}/{name}')}/try/{attempt}")
        else:
            key = f"task-run/{run.id}/{name}/{_next(f'{run.id}/{attempt}/{name}')}/try/{attempt}"
        return RunIdentity(key, str(run.flow_run_id) if run.flow_run_id else None,
                           str(run.id), attempt)
    flow_ctx = FlowRunContext.get()
    if flow_ctx is not None and flow_ctx.flow_run is not None:
        flow_run_id = str(flow_ctx.flow_run.id)
        key = f"flow-run/{flow_run_id}/{name}/{_next(f'{flow_run_id}/{name}')}"
        return RunIdentity(key, flow_run_id)
    return RunIdentity(f"adhoc/{uuid.uuid4()}")


def flow_run_identity(flow_run_id: str) -> RunIdentity:
    """The worker's identity for the job that runs a whole flow run."""
    return RunIdentity(f"flow-run/{flow_run_id}/infrastructure", flow_run_id)
