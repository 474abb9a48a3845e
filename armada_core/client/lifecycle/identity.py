"""Who a job works for: the orchestrator's task, its attempt and its lineage, stamped on every job
the task submits."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from armada_core.jobs import annotations as ann

from .steps import Items

#: Annotations stamped on every job a task submits (the server keeps one live generation per
#: task and queue: armada_core.jobs.tasks).
TASK_ANNOTATION = ann.TASK


ATTEMPT_ANNOTATION = ann.TASK_ATTEMPT


GENERATION_ANNOTATION = ann.TASK_GENERATION


#: Longest task key kept readable in annotations and the external job URI; longer ones are
#: hashed (the server bounds both).
_READABLE = 400


def _digest(*parts: Any, size: int = 24) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:size]


def _short(text: str) -> str:
    return text if len(text) <= _READABLE else f"{text[:64]}#{_digest(text, size=32)}"


@dataclass(frozen=True)
class TaskIdentity:
    """A logical task and one attempt of it, as its orchestrator names them.

    `task` stays the same across attempts (Airflow: DAG, run, task, map index; Dagster: the
    root run and step; Prefect: the flow run and task call); `attempt` names this attempt in the
    orchestrator's terms. `job_sets` lists where earlier attempts may have left jobs besides
    the attempt's own job set (a Dagster re-execution's parent runs). `name` is the readable
    part of client ids.
    """

    orchestrator: str
    task: str
    attempt: str
    name: str = "task"
    job_sets: tuple[str, ...] = ()

    @property
    def external_job_uri(self) -> str:
        """Shared by every attempt's jobs: how any attempt finds them."""
        return f"{self.orchestrator}://{_short(self.task)}"

    def client_id(self, generation: int = 0) -> str:
        """Deterministic per attempt and generation: a resubmission (two processes of one
        attempt, a retried call) is deduplicated by the server."""
        readable = "".join(c if c.isalnum() or c in "-_." else "-" for c in self.name[:40])
        suffix = f".{generation}" if generation else ""
        return (
            f"{self.orchestrator}-{readable}{suffix}-"
            f"{_digest(self.orchestrator, self.task, self.attempt, generation)}"
        )

    def annotations(self, generation: int = 0) -> dict[str, str]:
        return {
            TASK_ANNOTATION: _short(self.task),
            ATTEMPT_ANNOTATION: _short(self.attempt),
            GENERATION_ANNOTATION: str(generation),
        }

    def stamp(self, items: Items, generation: int) -> Items:
        """The items with the task's external job URI and annotations set."""
        for item in items:
            item.external_job_uri = self.external_job_uri
            item.annotations.update(self.annotations(generation))
        return items
