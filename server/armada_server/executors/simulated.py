"""A simulated cluster: nodes from the configuration, runs that only take time.

For tests, demos and whole-system benchmarks. A run lasts the seconds given in the annotation
`armadaproject.io/simulatedDuration` (default: the executor's `default_duration`), then
succeeds, or fails as `armadaproject.io/simulatedFailure` says: `exit:<code>` or a condition
(`OOMKilled`, `Evicted`, `DeadlineExceeded`).

Time is real unless the backend is handed a `clock` and a `sleep` (the what-if simulator's
virtual clock): its runs then last virtual seconds and their news is stamped virtual times.

It keeps nothing across restarts: a restarted simulated executor holds no runs, so the server
fails the runs it had as `pod_missing` and retries them. Like every executor it never starts a
run on a node without room for it (room.py): such a lease waits, reported pending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from armada_core.api import executor_pb2
from armada_core.jobs.annotations import PREFIX
from armada_server.executors.backend import Report
from armada_server.executors.backend import update as stamped
from armada_server.executors.capabilities import SIMULATED, Capabilities
from armada_server.executors.logs import LogLine, LogQuery
from armada_server.executors.room import Room, lease_requests

DURATION = PREFIX + "simulatedDuration"
FAILURE = PREFIX + "simulatedFailure"


def _failure(spec: str, container: str) -> executor_pb2.RunUpdate.Failed:
    if spec.startswith("exit:"):
        code = int(spec.split(":", 1)[1])
        return executor_pb2.RunUpdate.Failed(
            reason="Error",
            containers=[
                executor_pb2.ContainerResult(
                    name=container,
                    exit_code=code,
                    reason="Error",
                    message=f"simulated exit code {code}",
                )
            ],
        )
    code = 137 if spec == "OOMKilled" else 143
    return executor_pb2.RunUpdate.Failed(
        reason=spec,
        condition=spec,
        containers=[
            executor_pb2.ContainerResult(
                name=container, exit_code=code, reason=spec, message=f"simulated {spec}"
            )
        ],
    )


def _real_time() -> datetime:
    return datetime.now(UTC)


class SimulatedBackend:
    def __init__(
        self,
        nodes: Sequence[executor_pb2.Node],
        *,
        default_duration: float = 1.0,
        clock: Callable[[], datetime] = _real_time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._nodes = list(nodes)
        self.default_duration = default_duration
        self._clock = clock
        self._sleep = sleep
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._reports: dict[str, tuple[str, Report]] = {}
        self._waiting: dict[str, tuple[executor_pb2.Lease, Report]] = {}
        self._room = Room(self._nodes)

    def nodes(self) -> Sequence[executor_pb2.Node]:
        return self._nodes

    @property
    def capabilities(self) -> Capabilities:
        return SIMULATED

    async def open(self, report: Report) -> int:
        """Nothing to adopt: its runs end with it."""
        return 0

    def held(self) -> set[str]:
        return self._runs.keys() | self._waiting.keys()

    def start(self, lease: executor_pb2.Lease, report: Report) -> None:
        run = lease.run_id
        if run in self._runs or run in self._waiting:
            return
        loop = asyncio.get_running_loop()

        def go() -> None:
            self._waiting.pop(run, None)
            self._reports[run] = (lease.job.id, report)
            self._runs[run] = loop.create_task(self._run(lease, report))

        self._waiting[run] = (lease, report)
        if not self._room.offer(run, lease.node, lease_requests(lease), go):
            report(
                stamped(
                    run,
                    lease.job.id,
                    at=self._clock(),
                    pending=executor_pb2.RunUpdate.Pending(kubernetes_id=run),
                )
            )

    async def _run(self, lease: executor_pb2.Lease, report: Report) -> None:
        job = lease.job
        duration = float(job.annotations.get(DURATION, self.default_duration))
        try:
            report(
                stamped(
                    lease.run_id,
                    job.id,
                    at=self._clock(),
                    running=executor_pb2.RunUpdate.Running(
                        node=lease.node, kubernetes_id=lease.run_id
                    ),
                )
            )
            await self._sleep(duration)
        except asyncio.CancelledError:
            self._runs.pop(lease.run_id, None)
            report(
                stamped(
                    lease.run_id, job.id, at=self._clock(), stopped=executor_pb2.RunUpdate.Stopped()
                )
            )
            self._room.release(lease.run_id)
            raise
        self._runs.pop(lease.run_id, None)
        self._room.release(lease.run_id)
        failure = job.annotations.get(FAILURE)
        if failure:
            container = job.pod_specs[0].containers[0].name if job.pod_specs else "main"
            report(
                stamped(lease.run_id, job.id, at=self._clock(), failed=_failure(failure, container))
            )
        else:
            report(
                stamped(
                    lease.run_id,
                    job.id,
                    at=self._clock(),
                    succeeded=executor_pb2.RunUpdate.Succeeded(),
                )
            )

    def stop(self, run_id: str, *, preempt: bool) -> None:
        if self._room.withdraw(run_id):
            lease, report = self._waiting.pop(run_id)
            report(
                stamped(
                    run_id, lease.job.id, at=self._clock(), stopped=executor_pb2.RunUpdate.Stopped()
                )
            )
            return
        task = self._runs.get(run_id)
        if task is not None:
            task.cancel()

    def synced(self, lease_timeout: float, elapsed: float) -> None:
        """Nothing to renew: its runs end with it."""

    async def container_log(self, query: LogQuery) -> list[LogLine]:
        """It writes no logs."""
        return []

    async def close(self) -> None:
        for run in list(self._waiting):  # nothing starts any more
            self._room.withdraw(run)
        self._waiting.clear()
        tasks = list(self._runs.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
