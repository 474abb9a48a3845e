"""Prefect context -> `TaskIdentity` (armada_core.client.lifecycle), the only part of the
task lifecycle that is Prefect's own.

- A flow run's job (the `armada` worker): task and attempt are both the flow run id, so any
  worker that submits or watches the flow run finds the same job.
- A job started from a task run: the task is named by what stays the same when Prefect
  executes the flow run again (the flow run, the task key, a hash of the parameters, which
  identical call it is, which job of the task run); the attempt is the task run's
  `run_count`. A re-executed flow run (new task run ids, `run_count` from 1 again) finds and
  reattaches to its jobs; a Prefect retry of the task (a higher `run_count`) cancels a job of
  the previous try that is still live before submitting its own.
- A job started from a flow outside any task: the flow run and which job of the flow run it
  is; the attempt is the flow run, so a re-executed flow run reattaches.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from prefect.context import FlowRunContext, TaskRunContext
from pydantic import BaseModel

from armada_core.client.lifecycle import TaskIdentity

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

ORCHESTRATOR = "prefect"

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


def _next(counter_key: str) -> int:
    with _lock:
        return next(_counters.setdefault(counter_key, itertools.count(1)))


def current_identity() -> TaskIdentity:
    """The identity of the code calling it: the task run, else the flow run, else a random
    one (no reattaching outside Prefect runs)."""
    task_ctx = TaskRunContext.get()
    if task_ctx is not None:
        run = task_ctx.task_run
        attempt = str(max(run.run_count, 1))
        job = _next(f"{run.id}/{attempt}")  # which job of this try of the task run
        if run.flow_run_id is not None:
            call = f"{run.flow_run_id}/{run.task_key}/{parameters_hash(task_ctx.parameters)}"
            with _lock:
                if str(run.id) not in _occurrences:
                    _occurrences[str(run.id)] = next(_counters.setdefault(call, itertools.count(1)))
                occurrence = _occurrences[str(run.id)]
            task = f"flow-run/{call}/{occurrence}/{job}"
        else:
            task = f"task-run/{run.id}/{job}"
        return TaskIdentity(ORCHESTRATOR, task, attempt, name=task_ctx.task.name)
    flow_ctx = FlowRunContext.get()
    if flow_ctx is not None and flow_ctx.flow_run is not None:
        flow_run_id = str(flow_ctx.flow_run.id)
        task = f"flow-run/{flow_run_id}/{_next(flow_run_id)}"
        name = flow_ctx.flow.name if flow_ctx.flow is not None else "flow"
        return TaskIdentity(ORCHESTRATOR, task, flow_run_id, name=name)
    return TaskIdentity(ORCHESTRATOR, f"adhoc/{uuid.uuid4()}", "1", name="armada-job")


def explicit_identity(client_id: str) -> TaskIdentity:
    """A job whose idempotency key the user chose: one attempt, reattached to while its jobs
    live or succeeded, submitted again (as a new generation) once they ended otherwise."""
    return TaskIdentity(ORCHESTRATOR, f"client-id/{client_id}", "explicit", name=client_id)


def flow_run_identity(flow_run: FlowRun) -> TaskIdentity:
    """The identity of the job that runs a whole flow run (the worker's)."""
    flow_run_id = str(flow_run.id)
    return TaskIdentity(ORCHESTRATOR, flow_run_id, flow_run_id, name=flow_run.name or "flow-run")
