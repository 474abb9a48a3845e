"""A simulated cluster: nodes from the configuration, runs that only take time.

For tests, demos and whole-system benchmarks. A run lasts the seconds given in the annotation
`armadaproject.io/simulatedDuration` (default: the executor's `default_duration`), then
succeeds, or fails as `armadaproject.io/simulatedFailure` says: `exit:<code>` or a condition
(`OOMKilled`, `Evicted`, `DeadlineExceeded`).

Time is real unless the backend is handed a `clock` and a `later` (the what-if simulator's
virtual clock): its runs then last virtual seconds and their news is stamped virtual times.

It keeps nothing across restarts: a restarted simulated executor holds no runs, so the server
fails the runs it had as `pod_missing` and retries them. Like every executor it never starts a
run on a node without room for it (room.py): such a lease waits, reported pending.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Any, Protocol

from armada_core.api import executor_pb2, submit_pb2
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


class Timer(Protocol):
    def cancel(self) -> object: ...


Later = Callable[[float, Callable[[], None]], Timer]


def _call_later(seconds: float, callback: Callable[[], None]) -> Timer:
    return asyncio.get_running_loop().call_later(seconds, callback)


class SimulatedBackend:
    """A run is a timer, not a task: an executor starts tens of thousands of runs from one
    sync, and a task each cost more than everything else it does for them."""

    def __init__(
        self,
        nodes: Sequence[executor_pb2.Node],
        *,
        default_duration: float = 1.0,
        clock: Callable[[], datetime] = _real_time,
        later: Later = _call_later,
    ) -> None:
        self._nodes = list(nodes)
        self.default_duration = default_duration
        self._clock = clock
        self._later = later
        self._runs: dict[str, tuple[executor_pb2.Lease, Report, Timer]] = {}
        self._waiting: dict[str, tuple[executor_pb2.Lease, Report]] = {}
        # The runs of both, kept as they change: a simulated cluster's thousands of runs
        # had been put together again at every sync.
        self._held: set[str] = set()
        self._room = Room(self._nodes)

    def nodes(self) -> Sequence[executor_pb2.Node]:
        return self._nodes

    @property
    def capabilities(self) -> Capabilities:
        return SIMULATED

    async def open(self, report: Report) -> int:
        """Nothing to adopt: its runs end with it."""
        return 0

    def held(self) -> AbstractSet[str]:
        return self._held

    def start(self, lease: executor_pb2.Lease, report: Report) -> None:
        run = sys.intern(lease.run_id)  # as storage keeps it (executor_runs.ActiveRuns)
        if run in self._runs or run in self._waiting:
            return
        duration = self._duration(lease.job)
        if duration is None:  # the run fails at once: nothing later can stumble on it
            reason = (
                f"annotation {DURATION} must be a number of seconds (0 or more), "
                f"got {lease.job.annotations[DURATION]!r}"
            )
            report(self._news(lease, failed=executor_pb2.RunUpdate.Failed(reason=reason)))
            return

        def go() -> None:
            self._waiting.pop(run, None)
            self._begin(lease, duration, report)

        self._waiting[run] = (lease, report)
        self._held.add(run)
        if not self._room.offer(run, lease.node, lease_requests(lease), go):
            report(self._news(lease, pending=executor_pb2.RunUpdate.Pending(kubernetes_id=run)))

    def _duration(self, job: submit_pb2.Job) -> float | None:
        """How long the job's runs last (None: its annotation says no number of seconds)."""
        text = job.annotations.get(DURATION)
        if text is None:
            return self.default_duration
        try:
            seconds = float(text)
        except ValueError:
            return None
        return seconds if math.isfinite(seconds) and seconds >= 0 else None

    def _begin(self, lease: executor_pb2.Lease, duration: float, report: Report) -> None:
        """The run is running from now until `duration` seconds have passed."""
        run = lease.run_id
        running = executor_pb2.RunUpdate.Running(node=lease.node, kubernetes_id=run)
        report(self._news(lease, running=running))
        self._runs[run] = (lease, report, self._later(duration, lambda: self._end(run)))

    def _end(self, run: str) -> None:
        """The run's time is up: it succeeds, or fails as its job says."""
        lease, report, _ = self._runs.pop(run)
        self._held.discard(run)
        self._room.release(run)
        job = lease.job
        failure = job.annotations.get(FAILURE)
        if failure:
            container = job.pod_specs[0].containers[0].name if job.pod_specs else "main"
            report(self._news(lease, failed=_failure(failure, container)))
        else:
            report(self._news(lease, succeeded=executor_pb2.RunUpdate.Succeeded()))

    def stop(self, run_id: str, *, preempt: bool) -> None:
        if self._room.withdraw(run_id):
            lease, report = self._waiting.pop(run_id)
            self._held.discard(run_id)
            report(self._news(lease, stopped=executor_pb2.RunUpdate.Stopped()))
            return
        running = self._runs.pop(run_id, None)
        if running is not None:
            lease, report, timer = running
            self._held.discard(run_id)
            timer.cancel()
            report(self._news(lease, stopped=executor_pb2.RunUpdate.Stopped()))
            self._room.release(run_id)  # which may start a lease waiting for the room

    def _news(self, lease: executor_pb2.Lease, **kind: Any) -> executor_pb2.RunUpdate:
        """The leased run's news of `kind` (running=..., stopped=...), stamped now."""
        return stamped(lease.run_id, lease.job.id, at=self._clock(), **kind)

    def synced(self, lease_timeout: float, elapsed: float) -> None:
        """Nothing to renew: its runs end with it."""

    async def container_log(self, query: LogQuery) -> list[LogLine]:
        """It writes no logs."""
        return []

    async def close(self) -> None:
        for run in list(self._waiting):  # nothing starts any more
            self._room.withdraw(run, admit=False)
        self._waiting.clear()
        for _, _, timer in self._runs.values():
            timer.cancel()
        self._runs.clear()
        self._held.clear()
