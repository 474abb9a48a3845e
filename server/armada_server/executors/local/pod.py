"""One pod run locally: init containers in turn, then the rest together, until it ends.

A pod ends in one of three ways: every container exits 0 (succeeded); something makes it fail
(a container exits non-zero or exceeds its memory, the deadline passes, a container cannot
start); or terminate() is called (killed). Whatever ends it first decides the outcome; the
containers still running then get SIGTERM, and SIGKILL once the grace period is over. When the
pod ends, every process it started is gone, and its outcome is recorded in the sandbox.

A pod can also be resumed after the executor restarted (`resume=True`): containers whose shim
already ran or runs them are adopted, the others are started once `gate` is set (the server
has confirmed the run is still ours); the deadline counts from the pod's original start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from armada_core.jobs.model import ContainerResult

from . import procfs
from .container import START_ERROR, ContainerProcess
from .logs import LogLine, read_logs
from .monitor import ProcessMonitor
from .plan import SANDBOX_VARIABLE, ContainerPlan, PodPlan, UnrunnablePod
from .sandbox import Sandbox
from .status import PodPhase, PodStatus

FENCED = "Fenced"

_log = logging.getLogger(__name__)

REAP_SECONDS = 2.0

StatusCallback = Callable[[PodStatus], None]


@dataclass(frozen=True)
class _Ending:
    phase: PodPhase
    reason: str
    message: str
    condition: str = ""


class PodHandle:
    """A pod started by LocalPodRunner.start; runs on the event loop that started it."""

    def __init__(
        self,
        *,
        job_id: str,
        run_id: str,
        pod_name: str,
        sandbox: Sandbox,
        plan: PodPlan | UnrunnablePod,
        monitor: ProcessMonitor,
        on_status: StatusCallback | None,
        on_done: Callable[[], object] | None = None,
        resume: bool = False,
        gate: asyncio.Event | None = None,
        started_at: float | None = None,
        heartbeat: Path | None = None,
    ) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.pod_name = pod_name
        self._sandbox = sandbox
        self._monitor = monitor
        self._on_status = on_status
        self._on_done = on_done
        self._resume = resume
        self._gate = gate
        self._started_at = time.time() if started_at is None else started_at
        self._heartbeat = heartbeat
        self._loop = asyncio.get_running_loop()
        self._containers: list[ContainerProcess] = []
        self._ending: _Ending | None = None
        self._kill_at: float | None = None
        self._termed: set[ContainerProcess] = set()
        self._killed: set[ContainerProcess] = set()
        self._settled = False
        self._wake = asyncio.Event()
        self._deadline: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[PodStatus] = self._loop.create_future()
        if isinstance(plan, UnrunnablePod):
            self._plan: PodPlan | None = None
            self._ending = _Ending(PodPhase.FAILED, plan.reason, plan.message)
            self._status = self._make_status(PodPhase.FAILED)
        else:
            self._plan = plan
            self._status = self._make_status(PodPhase.PENDING)
        self._task = self._loop.create_task(self._run(), name=f"local pod {pod_name}")

    # --- what callers use ----------------------------------------------------------------------

    @property
    def status(self) -> PodStatus:
        """The latest transition."""
        return self._status

    @property
    def done(self) -> bool:
        return self._done.done()

    @property
    def sandbox(self) -> Path:
        return self._sandbox.path

    def log_path(self, container: str) -> Path:
        return self._sandbox.log_path(container)

    def read_logs(
        self, container: str, *, since: datetime | None = None, tail: int | None = None
    ) -> list[LogLine]:
        return read_logs(self._sandbox.log_path(container), since=since, tail=tail)

    async def wait(self) -> PodStatus:
        """The final status, once every process of the pod is gone."""
        return await asyncio.shield(self._done)

    def terminate(self, grace_seconds: float | None = None) -> None:
        """Stop the pod (cancel, preempt): SIGTERM now, SIGKILL after the grace period.

        `None` means the pod's terminationGracePeriodSeconds. The pod ends KILLED unless it
        had already ended otherwise. Calling again may shorten the grace period, never extend
        it; after the pod has ended it does nothing.
        """
        if self._plan is None:
            return
        grace = self._plan.grace_seconds if grace_seconds is None else max(grace_seconds, 0.0)
        self._end(PodPhase.KILLED, "Killed", "terminated on request", grace=grace)

    def kill_now(self) -> None:
        """SIGKILL every process of the pod at once, without waiting (for emergency exits)."""
        for container in self._containers:
            container.signal(signal.SIGKILL)
        self._kill_stragglers()

    # --- running -------------------------------------------------------------------------------

    async def _run(self) -> None:
        cancelled = False
        try:
            if self._plan is not None:
                if not self._resume:
                    self._emit()
                if self._plan.deadline_seconds is not None:
                    left = self._plan.deadline_seconds - (time.time() - self._started_at)
                    self._deadline = self._loop.call_later(max(left, 0.0), self._deadline_passed)
                await self._run_init_containers(self._plan)
                if self._ending is None:
                    await self._run_containers(self._plan)
        except asyncio.CancelledError:  # the executor itself is going away
            cancelled = True
            self._end(PodPhase.FAILED, "ExecutorStopped", "the executor stopped", grace=0)
        except Exception as e:
            _log.exception("local pod %s failed in the executor", self.pod_name)
            self._end(PodPhase.FAILED, "InternalError", f"executor error: {e}", grace=0)
        self._settled = True
        try:
            self._stop_containers()
            if cancelled:
                self._kill_remaining_blocking()
            else:
                await self._kill_remaining()
        finally:
            self._publish_final()
        if cancelled:
            raise asyncio.CancelledError

    async def _run_init_containers(self, plan: PodPlan) -> None:
        for spec in plan.init_containers:
            container = await self._launch(spec)
            if container is None:
                return
            await self._supervise([container], fail_fast=False)
            if self._ending is not None:
                return
            if container.fenced:
                self._fenced(container)
                return
            if container.exit_code != 0:
                why = "OOMKilled" if container.oom_killed else "Error"
                self._end(
                    PodPhase.FAILED,
                    f"Init:{why}",
                    f"init container {spec.name} exited with code {container.exit_code}",
                    condition="OOMKilled" if container.oom_killed else "",
                    grace=0,
                )
                return

    async def _run_containers(self, plan: PodPlan) -> None:
        # Together, as a kubelet starts them; results keep the pod spec's order.
        launched = await asyncio.gather(*(self._launch(spec) for spec in plan.containers))
        started = [c for c in launched if c is not None]
        order = {c: i for i, c in enumerate(launched)}
        self._containers.sort(key=lambda c: order.get(c, -1))
        if self._ending is None:
            # Running since its last container started, however late that was seen.
            starts = [c.started_at for c in started if c.started_at is not None]
            self._status = self._make_status(PodPhase.RUNNING, at=max(starts, default=None))
            self._emit()
        await self._supervise(started, fail_fast=True)

    async def _launch(self, spec: ContainerPlan) -> ContainerProcess | None:
        """Start (or, resuming, adopt) a container unless the pod is already ending; None if
        it did not start."""
        if self._ending is not None:
            return None
        container = ContainerProcess(
            spec,
            on_exit=self._wake.set,
            state=self._sandbox.state_path(spec.name),
            heartbeat=self._heartbeat,
        )
        if self._resume:
            found = await container.adopt()
            if found != "absent":
                self._containers.append(container)
                if container.start_error:
                    self._start_failed(container)
                    return None
                if not container.exited:
                    self._monitor.watch(container)
                return container
            await self._wait_for_gate()
            if self._ending is not None:
                return None
        self._containers.append(container)
        if not await container.start():
            self._start_failed(container)
            return None
        self._monitor.watch(container)
        return container

    def _start_failed(self, container: ContainerProcess) -> None:
        assert self._plan is not None
        self._end(
            PodPhase.FAILED, START_ERROR, container.start_error, grace=self._plan.grace_seconds
        )

    async def _wait_for_gate(self) -> None:
        """Until the gate opens or the pod is ending."""
        gate = self._gate
        while gate is not None and not gate.is_set() and self._ending is None:
            self._wake.clear()
            waiters = {asyncio.ensure_future(gate.wait()), asyncio.ensure_future(self._wake.wait())}
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()

    def _fenced(self, container: ContainerProcess) -> None:
        self._end(
            PodPhase.FAILED,
            FENCED,
            f"container {container.name} was killed because the executor had not "
            "synced with the server for half the lease timeout",
            grace=0,
        )

    async def _supervise(self, containers: list[ContainerProcess], *, fail_fast: bool) -> None:
        """Wait until all `containers` have exited, stopping them once the pod is ending."""
        while True:
            self._wake.clear()
            if fail_fast and self._ending is None:
                self._check_failures(containers)
            running = [c for c in containers if not c.exited]
            if not running:
                break
            timeout = None
            if self._ending is not None and self._kill_at is not None:
                for c in running:
                    if c not in self._termed:
                        self._termed.add(c)
                        c.signal(signal.SIGTERM)
                left = self._kill_at - self._loop.time()
                if left <= 0:
                    for c in running:
                        if c not in self._killed:
                            self._killed.add(c)
                            c.signal(signal.SIGKILL)
                else:
                    timeout = left
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
        for c in containers:
            self._monitor.unwatch(c)
            await c.finished()

    def _check_failures(self, containers: list[ContainerProcess]) -> None:
        assert self._plan is not None
        for c in containers:
            if c.exited and c.fenced:
                self._fenced(c)
                return
            if c.exited and c.exit_code != 0:
                oom = c.oom_killed
                self._end(
                    PodPhase.FAILED,
                    "OOMKilled" if oom else "Error",
                    f"container {c.name} exited with code {c.exit_code}",
                    condition="OOMKilled" if oom else "",
                    grace=self._plan.grace_seconds,
                )
                return

    def _deadline_passed(self) -> None:
        assert self._plan is not None
        self._end(
            PodPhase.FAILED,
            "DeadlineExceeded",
            f"the pod ran longer than its activeDeadlineSeconds "
            f"({self._plan.deadline_seconds:g} s)",
            condition="DeadlineExceeded",
            grace=self._plan.grace_seconds,
        )

    def _end(
        self, phase: PodPhase, reason: str, message: str, *, condition: str = "", grace: float
    ) -> None:
        """The first call decides the outcome; any call may bring the SIGKILL forward."""
        if self._settled:
            return
        if self._ending is None:
            self._ending = _Ending(phase, reason, message, condition)
        kill_at = self._loop.time() + grace
        if self._kill_at is None or kill_at < self._kill_at:
            self._kill_at = kill_at
        self._wake.set()

    def _stop_containers(self) -> None:
        """SIGKILL containers still running (only after an error) and close their logs."""
        if self._deadline is not None:
            self._deadline.cancel()
        for container in self._containers:
            self._monitor.unwatch(container)
            if not container.exited:
                container.signal(signal.SIGKILL)
                container.reap(REAP_SECONDS)
            container.close()

    def _kill_stragglers(self) -> bool:
        """SIGKILL the pod's processes still alive; False once there are none.

        Every process a container starts inherits ARMADA_SANDBOX, so this also finds those
        that left their container's process tree (double forks, new sessions).
        """
        if self._plan is None:
            return False
        found = procfs.processes_with_env({SANDBOX_VARIABLE: str(self._sandbox.path)})
        for info in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(info.pid, signal.SIGKILL)
        return bool(found)

    async def _kill_remaining(self) -> None:
        end = self._loop.time() + REAP_SECONDS
        while self._kill_stragglers() and self._loop.time() < end:
            await asyncio.sleep(0.01)

    def _kill_remaining_blocking(self) -> None:
        end = time.monotonic() + REAP_SECONDS
        while self._kill_stragglers() and time.monotonic() < end:
            time.sleep(0.01)

    def _publish_final(self) -> None:
        phase = self._ending.phase if self._ending is not None else PodPhase.SUCCEEDED
        try:
            results = tuple(c.result() for c in self._containers if c.exited)
        except Exception:  # waiters must get an answer whatever happened
            _log.exception("collecting the results of local pod %s failed", self.pod_name)
            results = ()
        self._status = self._make_status(phase, results)
        self._record_final()
        self._emit()
        if self._on_done is not None:
            self._on_done()
        if not self._done.done():
            self._done.set_result(self._status)

    def _record_final(self) -> None:
        """Keep the outcome in the sandbox, for an executor that restarts before reporting
        it."""
        try:
            tmp = self._sandbox.final_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._status.to_json()))
            tmp.replace(self._sandbox.final_path)
        except OSError as e:
            _log.warning("local pod %s: cannot record its outcome: %s", self.pod_name, e)

    def _make_status(
        self,
        phase: PodPhase,
        containers: tuple[ContainerResult, ...] = (),
        at: datetime | None = None,
    ) -> PodStatus:
        ending = self._ending if phase.final else None
        if phase is PodPhase.SUCCEEDED:
            ending = _Ending(phase, "Completed", "")
        return PodStatus(
            job_id=self.job_id,
            run_id=self.run_id,
            pod_name=self.pod_name,
            phase=phase,
            time=at or datetime.now(UTC),
            containers=containers,
            condition=ending.condition if ending else "",
            reason=ending.reason if ending else "",
            message=ending.message if ending else "",
        )

    def _emit(self) -> None:
        if self._on_status is None:
            return
        try:
            self._on_status(self._status)
        except Exception:  # the caller's bug must not leave processes behind
            _log.exception("status callback of local pod %s failed", self.pod_name)
