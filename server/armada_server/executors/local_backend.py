"""The local executor: each run's pod as local processes (see executors/local/)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from armada_core.api import executor_pb2
from armada_server.executors.agent import Report, update
from armada_server.executors.local.logs import LogLine
from armada_server.executors.local.pod import PodHandle
from armada_server.executors.local.runner import LocalPodRunner
from armada_server.executors.local.status import PodPhase, PodStatus


def _report_status(report: Report, node: str, status: PodStatus) -> None:
    run, job = status.run_id, status.job_id
    if status.phase is PodPhase.PENDING:
        report(update(run, job, pending=executor_pb2.RunUpdate.Pending(kubernetes_id=run)))
    elif status.phase is PodPhase.RUNNING:
        report(update(run, job, running=executor_pb2.RunUpdate.Running(
            node=node, kubernetes_id=run)))
    elif status.phase is PodPhase.SUCCEEDED:
        report(update(run, job, succeeded=executor_pb2.RunUpdate.Succeeded()))
    elif status.phase is PodPhase.KILLED:
        report(update(run, job, stopped=executor_pb2.RunUpdate.Stopped()))
    elif status.phase is PodPhase.FAILED:
        failure = status.failure()
        assert failure is not None
        report(update(run, job, failed=executor_pb2.RunUpdate.Failed(
            reason=failure.reason, condition=failure.condition, containers=[
                executor_pb2.ContainerResult(name=c.name, exit_code=c.exit_code,
                                             message=c.message, reason=c.reason,
                                             init_container=c.init_container)
                for c in failure.containers])))


class LocalBackend:
    def __init__(self, nodes: Sequence[executor_pb2.Node], sandbox_root: Path) -> None:
        self._nodes = list(nodes)
        self.runner = LocalPodRunner(sandbox_root)
        self._pods: dict[str, PodHandle] = {}

    def nodes(self) -> Sequence[executor_pb2.Node]:
        return self._nodes

    def held(self) -> set[str]:
        return {run for run, pod in self._pods.items() if not pod.done}

    def start(self, lease: executor_pb2.Lease, report: Report) -> None:
        job = lease.job
        node = next((n for n in self._nodes if n.name == lease.node), None)

        def on_status(status: PodStatus) -> None:
            _report_status(report, lease.node, status)
            if status.phase.final:
                self._pods.pop(status.run_id, None)

        pod = self.runner.start(
            job.id, lease.run_id, lease.pod_name, job.namespace or "default", lease.node,
            job.pod_specs[0], on_status=on_status, labels=dict(job.labels),
            annotations=dict(job.annotations),
            allocatable=dict(node.allocatable) if node is not None else None)
        self._pods[lease.run_id] = pod

    def stop(self, run_id: str, *, preempt: bool) -> None:
        pod = self._pods.get(run_id)
        if pod is not None:
            pod.terminate()

    def logs(self, pod_name: str, run_id: str, container: str, *,
             since: datetime | None = None, tail: int | None = None) -> list[LogLine]:
        """A run's container log lines, also after the run has ended."""
        return self.runner.read_logs(pod_name, run_id, container, since=since, tail=tail)

    async def close(self) -> None:
        await self.runner.shutdown()
