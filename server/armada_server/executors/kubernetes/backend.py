"""The Kubernetes executor: runs leases as pods in one cluster (a `Backend` for ExecutorAgent).

All bookkeeping happens on the agent's event loop; the synchronous `kubernetes` client runs
on a thread pool (api.py), and the pod watch on a thread of its own (watcher.py) whose events
are moved onto the loop and judged there (following.py). A run is held from the moment its
lease arrives until its pod has ended (and was reported) or, when stopped, until the pod
object is gone. Everything created carries the executor's labels, so that after a restart
`open()` re-adopts the pods the server still leases (they are reported as held; the server
answers with a stop for the others, which are then deleted) and removes auxiliary objects
whose pod is gone.

The room rule (room.py): the executor counts per node what its live pods request, pods being
deleted included until they are gone, and holds a new lease (reported pending) until its node
has room; kube-scheduler would keep the pod Pending anyway, but the server would hear of it
only as a pod that does not start.

The pieces: the cluster's nodes (nodes.py), pod creation (creation.py), the services and
ingresses of runs (auxiliary.py), container logs (logs.py), and following pods (following.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from armada_core.api import executor_pb2
from armada_core.jobs.grace import grace_period_seconds
from armada_server.executors.backend import Report, update
from armada_server.executors.capabilities import KUBERNETES, Capabilities
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.api import ApiException, ClusterApi, client, error_message
from armada_server.executors.kubernetes.auxiliary import AuxiliaryObjects
from armada_server.executors.kubernetes.creation import Refused, create_pod
from armada_server.executors.kubernetes.following import PodFollower
from armada_server.executors.kubernetes.logs import PodLogLine, PodLogs
from armada_server.executors.kubernetes.nodes import ClusterNodes
from armada_server.executors.kubernetes.pods import namespace_of, pod_manifest
from armada_server.executors.kubernetes.runs import Run
from armada_server.executors.kubernetes.settings import KubernetesSettings
from armada_server.executors.kubernetes.watcher import PodWatcher
from armada_server.executors.logs import LogQuery
from armada_server.executors.room import Room, lease_requests

log = logging.getLogger("armada_server.executor.kubernetes")

Pending = executor_pb2.RunUpdate.Pending
Returned = executor_pb2.RunUpdate.Returned
Stopped = executor_pb2.RunUpdate.Stopped


class KubernetesBackend:
    """One executor per cluster. Call `await open(agent.report)` before the agent runs."""

    def __init__(
        self,
        api: client.ApiClient,
        executor_id: str,
        settings: KubernetesSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lb.is_label_value(executor_id):
            raise ValueError(
                f"executor id {executor_id!r} must be a valid Kubernetes label "
                "value (63 characters: letters, digits, '-', '_', '.')"
            )
        self.executor_id = executor_id
        self.settings = settings or KubernetesSettings()
        self.clock = clock
        self.cluster = ClusterApi(api, threads=self.settings.api_threads)
        self._runs: dict[str, Run] = {}
        self._room = Room()
        self._waiting: dict[str, tuple[executor_pb2.Lease, Report]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.cluster_nodes = ClusterNodes(
            self.cluster, executor_id, self.settings, clock=clock, on_listed=self._room.set_nodes
        )
        self.auxiliary = AuxiliaryObjects(self.cluster, executor_id, self.settings)
        self.pod_logs = PodLogs(self.cluster, self.settings)
        self.follower = PodFollower(
            self._runs,
            self._room,
            self.settings,
            clock=clock,
            remove_pod=lambda run: self._spawn(self._cleanup(run)),
            remove_auxiliary=lambda run: self._spawn(self.auxiliary.delete(run)),
        )
        self.watcher = PodWatcher(
            self.cluster.core,
            lb.of_executor(executor_id),
            self.settings.namespace,
            on_event=self._from_thread(self.follower.on_pod),
            on_list=self._from_thread(self.follower.on_list),
            timeout=self.settings.watch_timeout,
        )

    def _from_thread(self, fn: Callable[..., None]) -> Callable[..., None]:
        def deliver(*args: Any) -> None:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(fn, *args)

        return deliver

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the Backend protocol --------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return KUBERNETES

    async def open(self, report: Report) -> int:
        """Read the nodes, re-adopt this executor's pods, and start watching them."""
        self._loop = asyncio.get_running_loop()
        await self.cluster_nodes.refresh()
        pods = await self.cluster.call(self.watcher.list)
        adopted = sum(self.follower.adopt(pod, report) for pod in pods)
        await self.auxiliary.remove_strays(set(self._runs))
        self.watcher.start()
        self._ticker = self._loop.create_task(self._tick_forever())
        log.info(
            "kubernetes executor %s: %d nodes, adopted %d pods",
            self.executor_id,
            len(self.cluster_nodes.nodes),
            len(pods),
        )
        return adopted

    def nodes(self) -> Sequence[executor_pb2.Node]:
        return self.cluster_nodes.nodes

    def held(self) -> set[str]:
        return {run_id for run_id, run in self._runs.items() if not run.done} | set(self._waiting)

    def start(self, lease: executor_pb2.Lease, report: Report) -> None:
        run_id = lease.run_id
        if run_id in self._runs or run_id in self._waiting:
            return

        def go() -> None:
            self._waiting.pop(run_id, None)
            self._create_run(lease, report)

        self._waiting[run_id] = (lease, report)
        if not self._room.offer(run_id, lease.node, lease_requests(lease), go):
            report(update(run_id, lease.job.id, pending=Pending(kubernetes_id="")))

    def stop(self, run_id: str, *, preempt: bool) -> None:
        if self._room.withdraw(run_id):  # held for room: it never started
            lease, report = self._waiting.pop(run_id)
            report(update(run_id, lease.job.id, stopped=Stopped()))
            return
        run = self._runs.get(run_id)
        if run is None or run.done or run.stopping:
            return  # the server repeats its stop on every sync until the run has ended
        run.stopping = True
        log.info(
            "stopping run %s (pod %s/%s, %s)",
            run_id,
            run.namespace,
            run.pod_name,
            "preemption" if preempt else "cancellation",
        )
        if run.created:
            self._spawn_delete(run)
        # else: _create sees `stopping` once the pod exists (or reports stopped if it failed)

    def synced(self, lease_timeout: float, elapsed: float) -> None:
        """Nothing to renew: the cluster keeps the pods."""

    async def container_log(self, query: LogQuery) -> list[PodLogLine]:
        """A container's log lines (ExecutorControl.Logs): from the pod while it exists, then
        from the archive kept when it was deleted (see logs.py)."""
        return await self.pod_logs.read(query, self._runs.get(query.run_id))

    async def close(self) -> None:
        """Stop watching; the pods keep running and are re-adopted by the next start."""
        if self._ticker is not None:
            self._ticker.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(
            *self._tasks, *([self._ticker] if self._ticker else []), return_exceptions=True
        )
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.watcher.stop)
        self.cluster.close()
        self._loop = None

    def ingress_addresses(self, run_id: str) -> dict[int, str]:
        """The run's ingress addresses (port -> host), what upstream reports as ingress_info."""
        run = self._runs.get(run_id)
        return dict(run.addresses) if run is not None else {}

    # --- creating --------------------------------------------------------------------------

    def _create_run(self, lease: executor_pb2.Lease, report: Report) -> None:
        run = Run(
            lease.run_id,
            lease.job.id,
            namespace_of(lease, self.settings),
            lease.pod_name,
            report,
            lease.node,
            lease=lease,
            grace=grace_period_seconds(lease.job.pod_specs[0] if lease.job.pod_specs else None),
        )
        self._runs[run.run_id] = run
        self._spawn(self._create(run))

    async def _create(self, run: Run) -> None:
        lease = run.lease
        assert lease is not None
        node_labels = self.cluster_nodes.labels
        if node_labels and lease.node not in node_labels:
            self.follower.end(
                run, returned=Returned(reason=f"node {lease.node} is not in the cluster")
            )
            return
        manifest = pod_manifest(lease, self.executor_id, self.settings, node_labels.get(lease.node))
        try:
            pod = await create_pod(self.cluster, run, manifest)
        except Refused as refusal:
            if run.stopping:
                self.follower.end(run, stopped=Stopped())
            else:
                self.follower.end(run, failed=refusal.failed, returned=refusal.returned)
            self._runs.pop(run.run_id, None)
            return
        run.created = True
        run.uid = run.uid or pod.metadata.uid
        if run.last is None:
            run.last = pod
        if run.stopping:
            await self._delete_pod(run)
            return
        addresses = await self.auxiliary.create(run)
        if addresses:
            run.send(ingress_info=executor_pb2.RunUpdate.IngressInfo(addresses=addresses))

    # --- deleting --------------------------------------------------------------------------

    def _spawn_delete(self, run: Run) -> None:
        """Delete the pod in a task, marked as deleting at once: a tick before the task
        starts must not delete it a second time."""
        run.deleting = True
        self._spawn(self._delete_pod(run))

    async def _delete_pod(self, run: Run) -> None:
        """Delete the run's pod with its grace period, once its logs are kept."""
        run.deleting = True
        await self.pod_logs.keep(run)
        options = client.V1DeleteOptions(
            grace_period_seconds=run.grace,
            preconditions=client.V1Preconditions(uid=run.uid) if run.uid else None,
        )
        try:
            await self.cluster.call(
                self.cluster.core.delete_namespaced_pod, run.pod_name, run.namespace, body=options
            )
        except ApiException as e:
            if e.status in (404, 409):  # gone already (409: the name is another pod's now)
                self.follower.gone(run)
            else:
                run.deleting = False  # retried by the ticker
                log.warning(
                    "could not delete pod %s/%s: %s", run.namespace, run.pod_name, error_message(e)
                )
        except Exception as e:
            run.deleting = False
            log.warning("could not delete pod %s/%s: %s", run.namespace, run.pod_name, e)

    async def _cleanup(self, run: Run) -> None:
        run.cleanup_at = None
        await self._delete_pod(run)
        await self.auxiliary.delete(run)

    # --- periodic work ---------------------------------------------------------------------

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick)
            try:
                self._tick()
            except Exception:  # pragma: no cover - a bug must not stop the executor
                log.exception("kubernetes executor tick failed")

    def _tick(self) -> None:
        now = self.clock()
        self.follower.end_stuck_too_long(now)
        for run in list(self._runs.values()):
            if run.cleanup_at is not None and now >= run.cleanup_at:
                self._spawn(self._cleanup(run))
            if run.stopping and run.created and not run.deleting and not run.done:
                self._spawn_delete(run)
        if self.cluster_nodes.due(now):
            self._spawn(self.cluster_nodes.refresh())
