"""Which task a job works for, and the server's answer when that task already has a live
generation.

A job stamped by the task lifecycle names its task, the attempt and the generation within the
attempt (annotations `TASK`, `TASK_ATTEMPT`, `TASK_GENERATION`). The jobs of one submission of
one attempt and generation (a single job, a gang's or pod group's members) are one generation.
The server keeps at most one live generation per task and queue: a submission that would start
a second one is refused with ALREADY_EXISTS, and the refusal carries the live generation's jobs
(`LiveGeneration`, in the trailing metadata `LIVE_GENERATION_METADATA`) so that the submitter
can reattach to them. A job is live until it ended and its last run's processes are confirmed
gone (a cancelled run still terminating on its node keeps its task's generation live).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from armada_core.jobs import annotations as ann

#: Longest task identity the server indexes (characters; the lifecycle keeps its own to 400).
MAX_TASK = 512

#: Trailing metadata of an ALREADY_EXISTS refusal: the live generation, as JSON.
LIVE_GENERATION_METADATA = "armada-live-generation-bin"


def task_of(annotations: Mapping[str, str]) -> str | None:
    """The task a job works for (None: no task)."""
    return annotations.get(ann.TASK) or None


def generation_of(annotations: Mapping[str, str]) -> tuple[str, str]:
    """The attempt and generation a task's job belongs to, as stamped (both "" when absent):
    jobs with the same pair are one generation, never rivals."""
    return annotations.get(ann.TASK_ATTEMPT, ""), annotations.get(ann.TASK_GENERATION, "")


@dataclass(frozen=True)
class LiveGeneration:
    """A task's live jobs, which a refused submission names for the submitter to reattach to."""

    task: str
    job_set_id: str
    job_ids: tuple[str, ...]
    attempt: str = ""
    generation: str = ""

    def encode(self) -> bytes:
        return json.dumps(
            {
                "task": self.task,
                "job_set_id": self.job_set_id,
                "job_ids": list(self.job_ids),
                "attempt": self.attempt,
                "generation": self.generation,
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> LiveGeneration | None:
        """The generation `encode` wrote (None for anything else)."""
        try:
            found = json.loads(data)
            ids: Sequence[object] = found["job_ids"]
            return cls(
                str(found["task"]),
                str(found["job_set_id"]),
                tuple(str(i) for i in ids),
                str(found.get("attempt", "")),
                str(found.get("generation", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        """For the refusal's message (what clients without the metadata read)."""
        which = f" (attempt {self.attempt}, generation {self.generation})" if self.attempt else ""
        return (
            f"task {self.task!r} already has a live generation{which}: job(s) "
            f"{', '.join(self.job_ids)} in job set {self.job_set_id!r}; reattach to them, or "
            "cancel them and wait for their end before submitting another"
        )
