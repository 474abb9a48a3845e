"""What the Kubernetes executor knows of each run it holds: its pod, and where it stands.

A run is held from the moment its lease arrives until its pod has ended (and the end was
reported) or, when stopped, until the pod object is gone. Pods are `V1Pod` objects of the
untyped client library (api.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from armada_core.api import executor_pb2
from armada_server.executors.backend import Report, update
from armada_server.executors.kubernetes.status import Observation


@dataclass
class Run:
    run_id: str
    job_id: str
    namespace: str
    pod_name: str
    report: Report
    node: str = ""  # the node it was leased on
    lease: executor_pb2.Lease | None = None  # None: adopted after a restart
    grace: int | None = None  # seconds; None: the pod's own
    uid: str = ""
    created: bool = False  # the pod exists (or existed)
    last: Any = None  # the pod (V1Pod) as last seen
    reported: str = ""  # "", "pending" or "running"
    stopping: bool = False
    deleting: bool = False  # a delete request is under way or was accepted
    done: bool = False  # the end was reported: no longer held
    stuck: Observation | None = None
    stuck_since: float = 0.0
    cleanup_at: float | None = None  # when to delete the finished pod
    addresses: dict[int, str] = field(default_factory=dict)

    def send(self, **kind: Any) -> None:
        """Report news of the run: one RunUpdate kind (pending=..., failed=..., ...)."""
        self.report(update(self.run_id, self.job_id, **kind))
