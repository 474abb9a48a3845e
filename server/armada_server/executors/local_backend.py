"""The local executor: each run's pod as local processes (see executors/local/).

Pods outlive the executor (each container has a shim process of its own), so a restarted
executor reconciles before its first sync (`open`): it adopts every run it left in its sandbox
root whose outcome the server has not acknowledged, reports them as held, re-reports the
outcomes of those that ended meanwhile, and then follows the ones the server still leases to
it; the server answers the others with a stop, and they are killed.

Fencing: after every successful sync the executor writes a heartbeat file with a deadline of
three quarters of the server's lease timeout after the sync was sent. A pod's shim kills the
pod once the deadline has passed, so that when the executor stays away (dead, or cut off from
the server), its pods are gone before the server can expire their leases and run the jobs
elsewhere.

The room rule (room.py): a lease waits, reported pending, until its node has room for it next
to the pods still running or terminating there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from armada_core.api import executor_pb2
from armada_server.executors.backend import Report, update
from armada_server.executors.capabilities import LOCAL, Capabilities
from armada_server.executors.local.logs import LogLine
from armada_server.executors.local.pod import FENCED, PodHandle
from armada_server.executors.local.runner import LocalPodRunner
from armada_server.executors.local.sandbox import Sandbox
from armada_server.executors.local.shim import boottime
from armada_server.executors.local.status import PodPhase, PodStatus
from armada_server.executors.logs import LogQuery
from armada_server.executors.room import Room, lease_requests

log = logging.getLogger("armada_server.executor.local")

# Pods kill themselves when the executor has not synced for this share of the lease timeout:
# well before the server can expire the lease (the kill takes a tenth of a second), late
# enough that a busy executor whose syncs take a second does not kill healthy pods.
FENCE_FRACTION = 0.75
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _report_status(report: Report, node: str, status: PodStatus) -> None:
    """The pod's transition, stamped when it happened (a pod adopted after a restart tells
    how it ended long ago; a busy executor sees a container start late)."""
    run, job, at = status.run_id, status.job_id, status.time
    if status.phase is PodPhase.PENDING:
        report(update(run, job, pending=executor_pb2.RunUpdate.Pending(kubernetes_id=run), at=at))
    elif status.phase is PodPhase.RUNNING:
        running = executor_pb2.RunUpdate.Running(node=node, kubernetes_id=run)
        report(update(run, job, running=running, at=at))
    elif status.phase is PodPhase.SUCCEEDED:
        report(update(run, job, succeeded=executor_pb2.RunUpdate.Succeeded(), at=at))
    elif status.phase is PodPhase.KILLED:
        report(update(run, job, stopped=executor_pb2.RunUpdate.Stopped(), at=at))
    elif status.phase is PodPhase.FAILED and status.reason == FENCED:
        # Not the job's fault: the executor lost the server. The lease goes back.
        report(
            update(
                run,
                job,
                returned=executor_pb2.RunUpdate.Returned(
                    reason=f"{FENCED}: {status.message}", run_attempted=True
                ),
                at=at,
            )
        )
    elif status.phase is PodPhase.FAILED:
        failure = status.failure()
        assert failure is not None
        report(
            update(
                run,
                job,
                failed=executor_pb2.RunUpdate.Failed(
                    reason=failure.reason,
                    condition=failure.condition,
                    containers=[
                        executor_pb2.ContainerResult(
                            name=c.name,
                            exit_code=c.exit_code,
                            message=c.message,
                            reason=c.reason,
                            init_container=c.init_container,
                        )
                        for c in failure.containers
                    ],
                ),
                at=at,
            )
        )


class LocalBackend:
    """`owner` names this executor's heartbeat file, so that executors sharing a sandbox root
    fence their own pods only. Call `await open(agent.report)` before the agent runs."""

    def __init__(
        self, nodes: Sequence[executor_pb2.Node], sandbox_root: Path, *, owner: str = "executor"
    ) -> None:
        self._nodes = list(nodes)
        root = Path(sandbox_root).absolute()
        self.heartbeat = root / f".heartbeat-{_UNSAFE.sub('_', owner) or 'executor'}"
        self.runner = LocalPodRunner(root, heartbeat=self.heartbeat)
        self._pods: dict[str, PodHandle] = {}
        self._waiting: dict[str, tuple[executor_pb2.Lease, Report]] = {}
        self._room = Room(self._nodes)
        self._gate = asyncio.Event()  # the first sync after open() has succeeded
        self._ended: list[Sandbox] = []  # outcomes reported since the last sync
        self._unacknowledged: list[Sandbox] = []  # ... before it: sent with the last sync

    def nodes(self) -> Sequence[executor_pb2.Node]:
        return self._nodes

    @property
    def capabilities(self) -> Capabilities:
        return LOCAL

    def held(self) -> set[str]:
        return {run for run, pod in self._pods.items() if not pod.done} | set(self._waiting)

    async def open(self, report: Report) -> int:
        """Adopt the runs an earlier start of this executor left behind; returns how many."""
        names = {n.name for n in self._nodes}
        adopted = 0
        for path in sorted(self.runner.sandbox_root.glob("*/*/lease.pb")):
            sandbox = Sandbox(path.parent)
            if sandbox.reported_path.exists():
                continue
            try:
                lease = executor_pb2.Lease.FromString(path.read_bytes())
            except Exception:  # a damaged file must not stop the executor
                log.warning("cannot read %s: not adopted", path)
                continue
            if lease.node not in names:
                continue  # another executor's
            adopted += 1
            try:
                final = PodStatus.from_json(json.loads(sandbox.final_path.read_text()))
            except FileNotFoundError:
                final = None
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("cannot read %s: adopting the pod instead", sandbox.final_path)
                final = None
            if final is not None:  # it ended while nobody listened: tell the server
                _report_status(report, lease.node, final)
                self._ended.append(sandbox)
                continue
            self._room.claim(lease.run_id, lease.node, lease_requests(lease))
            self._launch(lease, report, resume=True)
        if adopted:
            log.info("local executor: adopted %d runs from %s", adopted, self.runner.sandbox_root)
        return adopted

    def start(self, lease: executor_pb2.Lease, report: Report) -> None:
        run = lease.run_id
        if run in self._pods or run in self._waiting:
            return
        self.runner.sandbox(lease.pod_name, run)  # refuses unusable names before anything

        def go() -> None:
            self._waiting.pop(run, None)
            self._launch(lease, report, resume=False)

        self._waiting[run] = (lease, report)
        if not self._room.offer(run, lease.node, lease_requests(lease), go):
            report(
                update(run, lease.job.id, pending=executor_pb2.RunUpdate.Pending(kubernetes_id=run))
            )

    def _launch(self, lease: executor_pb2.Lease, report: Report, *, resume: bool) -> None:
        job = lease.job
        run = lease.run_id
        node = next((n for n in self._nodes if n.name == lease.node), None)

        def on_status(status: PodStatus) -> None:
            _report_status(report, lease.node, status)
            if status.phase.final:
                self._pods.pop(run, None)
                self._ended.append(self.runner.sandbox(lease.pod_name, run))
                self._room.release(run)

        try:
            if not resume:
                sandbox = self.runner.sandbox(lease.pod_name, run)
                sandbox.path.mkdir(parents=True, exist_ok=True)
                sandbox.lease_path.write_bytes(lease.SerializeToString())
            self._pods[run] = self.runner.start(
                job.id,
                run,
                lease.pod_name,
                job.namespace or "default",
                lease.node,
                job.pod_specs[0],
                on_status=on_status,
                labels=dict(job.labels),
                annotations=dict(job.annotations),
                allocatable=dict(node.allocatable) if node is not None else None,
                resume=resume,
                gate=self._gate if resume else None,
            )
        except Exception as e:  # one bad lease must not stop the executor
            log.exception("local executor could not start run %s", run)
            self._room.release(run)
            report(
                update(
                    run,
                    job.id,
                    returned=executor_pb2.RunUpdate.Returned(
                        reason=f"the executor could not start it: {e}"
                    ),
                )
            )

    def stop(self, run_id: str, *, preempt: bool) -> None:
        if self._room.withdraw(run_id):
            lease, report = self._waiting.pop(run_id)
            report(update(run_id, lease.job.id, stopped=executor_pb2.RunUpdate.Stopped()))
            return
        pod = self._pods.get(run_id)
        if pod is not None:
            pod.terminate()

    def synced(self, lease_timeout: float, elapsed: float) -> None:
        """A sync succeeded (`elapsed` seconds after it was sent): renew the heartbeat that
        keeps the pods alive, let adopted pods go on, and mark the outcomes the server has
        certainly received (those reported before the previous sync) as acknowledged."""
        self._gate.set()
        try:
            if lease_timeout > 0:
                deadline = boottime() - elapsed + lease_timeout * FENCE_FRACTION
                self.heartbeat.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.heartbeat.with_name(self.heartbeat.name + ".tmp")
                tmp.write_text(f"{deadline:.3f}\n")
                os.replace(tmp, self.heartbeat)
            else:  # the server does not say: no fencing
                self.heartbeat.unlink(missing_ok=True)
        except OSError as e:
            log.warning("cannot write the heartbeat %s: %s", self.heartbeat, e)
        for sandbox in self._unacknowledged:
            with contextlib.suppress(OSError):
                sandbox.reported_path.touch()
        self._unacknowledged, self._ended = self._ended, []

    def logs(
        self,
        pod_name: str,
        run_id: str,
        container: str,
        *,
        since: datetime | None = None,
        tail: int | None = None,
    ) -> list[LogLine]:
        """A run's container log lines, also after the run has ended."""
        return self.runner.read_logs(pod_name, run_id, container, since=since, tail=tail)

    async def container_log(self, query: LogQuery) -> list[LogLine]:
        """`logs`, read from disk off the event loop."""
        return await asyncio.to_thread(
            self.logs,
            query.pod_name,
            query.run_id,
            query.container,
            since=query.since,
            tail=query.tail,
        )

    async def close(self) -> None:
        for run in list(self._waiting):  # nothing starts any more
            self._room.withdraw(run, admit=False)
        self._waiting.clear()
        await self.runner.shutdown()
