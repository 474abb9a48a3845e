"""The local executor's pod runtime: runs pods as local processes in per-run sandboxes.

    runner = LocalPodRunner("/var/lib/armada/pods")
    handle = runner.start(job_id, run_id, pod_name, namespace, node_name, pod_spec,
                          on_status=report)
    ...
    handle.terminate()            # cancel or preempt
    final = await handle.wait()   # PodStatus: succeeded, failed or killed

Everything runs on the asyncio event loop that calls start(), without a thread per process.
Each container is supervised by a shim process of its own (shim.py), so pods outlive the
executor; `start(..., resume=True)` adopts a pod an earlier executor started in the same
sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from armada_core.api.k8s import core_v1_pb2

from .environment import PodIdentity
from .logs import LogLine, read_logs
from .monitor import DEFAULT_INTERVAL, ProcessMonitor
from .plan import PodPlan, UnrunnablePod, plan_pod
from .pod import PodHandle, StatusCallback
from .sandbox import Sandbox

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def node_allocatable() -> dict[str, str]:
    """This machine's CPUs and memory, what an unset limit means to the downward API."""
    memory = "0"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory = str(int(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    return {"cpu": str(os.cpu_count() or 1), "memory": memory}


class LocalPodRunner:
    """Starts pods and keeps track of the ones still running.

    `base_env` is the environment every container starts from (an image's, in Kubernetes
    terms); by default only this process's PATH, so no server secret leaks into jobs.
    `allocatable` is the default node size for `resourceFieldRef` of unset limits.
    `heartbeat` is the executor's heartbeat file, which the pods' shims watch to fence
    themselves (see shim.py); None: pods never fence themselves.
    """

    def __init__(
        self,
        sandbox_root: Path | str,
        *,
        base_env: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
        monitor_interval: float = DEFAULT_INTERVAL,
        heartbeat: Path | None = None,
    ) -> None:
        self.sandbox_root = Path(sandbox_root).absolute()
        self.heartbeat = heartbeat
        self.base_env = (
            dict(base_env)
            if base_env is not None
            else {"PATH": os.environ.get("PATH") or DEFAULT_PATH}
        )
        self.allocatable = dict(allocatable) if allocatable is not None else node_allocatable()
        self._monitor = ProcessMonitor(monitor_interval)
        self._active: dict[str, PodHandle] = {}

    @property
    def active(self) -> tuple[PodHandle, ...]:
        """The pods that have not ended yet."""
        return tuple(self._active.values())

    def start(
        self,
        job_id: str,
        run_id: str,
        pod_name: str,
        namespace: str,
        node_name: str,
        pod_spec: core_v1_pb2.PodSpec,
        *,
        on_status: StatusCallback | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
        resume: bool = False,
        gate: asyncio.Event | None = None,
    ) -> PodHandle:
        """Start a pod; call from the event loop. Never raises for a bad pod spec: such a pod
        ends FAILED at once with the reason. Raises ValueError for a pod name or run id
        unusable as a file name, or a run id that is already running.

        `resume` adopts the pod from its sandbox instead (same arguments as when it was first
        started): running containers are followed, finished ones' results read, and those
        not started yet are started once `gate` is set.
        """
        if run_id in self._active:
            raise ValueError(f"run {run_id} is already running here")
        sandbox = Sandbox.locate(self.sandbox_root, pod_name, run_id)
        identity = PodIdentity(
            pod_name=pod_name,
            namespace=namespace,
            node_name=node_name,
            uid=run_id,
            service_account=pod_spec.serviceAccountName,
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
        )
        plan = self._plan(
            pod_spec, sandbox, identity, job_id, allocatable=allocatable, resume=resume
        )
        started_at = _started_at(sandbox, resume=resume)
        handle = PodHandle(
            job_id=job_id,
            run_id=run_id,
            pod_name=pod_name,
            sandbox=sandbox,
            plan=plan,
            monitor=self._monitor,
            on_status=on_status,
            on_done=lambda: self._active.pop(run_id, None),
            resume=resume,
            gate=gate,
            started_at=started_at,
            heartbeat=self.heartbeat,
        )
        self._active[run_id] = handle
        return handle

    def _plan(
        self,
        pod_spec: core_v1_pb2.PodSpec,
        sandbox: Sandbox,
        identity: PodIdentity,
        job_id: str,
        *,
        allocatable: Mapping[str, str] | None,
        resume: bool,
    ) -> PodPlan | UnrunnablePod:
        """The pod's plan, its sandbox ready; or why it cannot run here."""
        fixed_env = {
            "ARMADA_JOB_ID": job_id,
            "ARMADA_RUN_ID": identity.uid,
            "ARMADA_POD_NAME": identity.pod_name,
            "ARMADA_NAMESPACE": identity.namespace,
            "ARMADA_NODE_NAME": identity.node_name,
        }
        base_env = {
            **self.base_env,
            "HOSTNAME": identity.pod_name,
            "HOME": str(sandbox.work_dir),
            "TMPDIR": str(sandbox.tmp_dir),
        }
        try:
            plan = plan_pod(
                pod_spec,
                sandbox,
                identity,
                base_env=base_env,
                fixed_env=fixed_env,
                allocatable=allocatable or self.allocatable,
            )
            sandbox.create(
                (c.name for c in (*plan.init_containers, *plan.containers)), resume=resume
            )
        except UnrunnablePod as e:
            return e
        except (OSError, ValueError) as e:
            return UnrunnablePod("SandboxError", f"cannot prepare the pod's sandbox: {e}")
        return plan

    def get(self, run_id: str) -> PodHandle | None:
        return self._active.get(run_id)

    def sandbox(self, pod_name: str, run_id: str) -> Sandbox:
        """Where a run's files are, whether or not it is still running."""
        return Sandbox.locate(self.sandbox_root, pod_name, run_id)

    def read_logs(
        self,
        pod_name: str,
        run_id: str,
        container: str,
        *,
        since: datetime | None = None,
        tail: int | None = None,
    ) -> list[LogLine]:
        """A container's log lines after `since`, the last `tail` of them if set."""
        return read_logs(self.sandbox(pod_name, run_id).log_path(container), since=since, tail=tail)

    async def shutdown(self, grace_seconds: float | None = None) -> None:
        """Terminate every running pod and wait until all their processes are gone.

        `None` gives each pod its own terminationGracePeriodSeconds.
        """
        handles = self.active
        for handle in handles:
            handle.terminate(grace_seconds)
        await asyncio.gather(*(handle.wait() for handle in handles))

    def kill_all(self) -> None:
        """SIGKILL every process of every running pod now; for exits that cannot await."""
        for handle in self.active:
            handle.kill_now()


def _started_at(sandbox: Sandbox, *, resume: bool) -> float | None:
    """When the pod started: now, recorded in its sandbox; or, resumed, as recorded then."""
    if resume:
        with contextlib.suppress(OSError, ValueError):
            return float(sandbox.started_path.read_text())
        return None
    started_at = time.time()
    with contextlib.suppress(OSError):
        sandbox.started_path.write_text(repr(started_at))
    return started_at
