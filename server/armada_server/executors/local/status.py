"""What a local pod reports: its phase, and how each container ended once it has."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from armada_core.jobs.lifecycle import Failure
from armada_core.jobs.model import ContainerResult


class PodPhase(StrEnum):
    """Where a pod is; the last three are final."""

    PENDING = "pending"  # sandbox ready; init containers may be running
    RUNNING = "running"  # every regular container has started
    SUCCEEDED = "succeeded"  # every regular container exited 0
    FAILED = "failed"  # a container failed, the deadline passed, or the pod could not start
    KILLED = "killed"  # stopped by terminate(): the caller reports it cancelled or preempted

    @property
    def final(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.KILLED)


@dataclass(frozen=True)
class PodStatus:
    """One transition of a pod.

    `reason` is Kubernetes-style and short (Completed, Error, Init:Error, OOMKilled,
    DeadlineExceeded, StartError, CreateContainerConfigError, Killed, ...); `message` explains
    it to a person; `condition` is what retry policies match (OOMKilled, DeadlineExceeded or
    ''). `containers` lists the containers that have finished (or failed to start), init
    containers first, each in pod-spec order.
    """

    job_id: str
    run_id: str
    pod_name: str
    phase: PodPhase
    time: datetime
    containers: tuple[ContainerResult, ...] = ()
    condition: str = ""
    reason: str = ""
    message: str = ""

    def failure(self) -> Failure | None:
        """What to report for a failed run (None unless the phase is FAILED)."""
        if self.phase is not PodPhase.FAILED:
            return None
        reason = f"{self.reason}: {self.message}" if self.message else self.reason
        return Failure(reason=reason, containers=self.containers, condition=self.condition)

    def to_json(self) -> dict[str, Any]:
        """A final status as it is kept in the sandbox (see `from_json`)."""
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "pod_name": self.pod_name,
            "phase": self.phase.value,
            "time": self.time.isoformat(),
            "condition": self.condition,
            "reason": self.reason,
            "message": self.message,
            "containers": [
                [c.name, c.exit_code, c.message, c.reason, c.init_container]
                for c in self.containers
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PodStatus:
        return cls(
            job_id=data["job_id"],
            run_id=data["run_id"],
            pod_name=data["pod_name"],
            phase=PodPhase(data["phase"]),
            time=datetime.fromisoformat(data["time"]),
            condition=data["condition"],
            reason=data["reason"],
            message=data["message"],
            containers=tuple(
                ContainerResult(name, code, message, reason, init)
                for name, code, message, reason, init in data["containers"]
            ),
        )
