"""The Kubernetes executor: runs leases as pods in one cluster (a `Backend` for ExecutorAgent).

All bookkeeping happens on the agent's event loop; the synchronous `kubernetes` client runs
on a thread pool, and the pod watch on a thread of its own (watcher.py) whose events are moved
onto the loop. A run is held from the moment its lease arrives until its pod has ended (and
was reported) or, when stopped, until the pod object is gone. Everything created carries the
executor's labels, so that after a restart `open()` re-adopts the pods the server still leases
(they are reported as held; the server answers with a stop for the others, which are then
deleted) and removes auxiliary objects whose pod is gone.

The room rule (room.py): the executor counts per node what its live pods request, pods being
deleted included until they are gone, and holds a new lease (reported pending) until its node
has room; kube-scheduler would keep the pod Pending anyway, but the server would hear of it
only as a pod that does not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client

from armada_core.api import executor_pb2
from armada_server.executors.backend import Report, update
from armada_server.executors.capabilities import KUBERNETES, Capabilities
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.exposure import exposure
from armada_server.executors.kubernetes.logs import LogArchive, PodLogLine, parse_log, select
from armada_server.executors.kubernetes.nodes import executor_nodes
from armada_server.executors.kubernetes.pods import namespace_of, pod_manifest
from armada_server.executors.kubernetes.settings import KubernetesSettings
from armada_server.executors.kubernetes.status import Observation, State, observe, vanished
from armada_server.executors.kubernetes.watcher import PodWatcher
from armada_server.executors.logs import LogQuery, LogUnavailable
from armada_server.executors.room import Requests, Room, lease_requests, quantities

log = logging.getLogger("armada_server.executor.kubernetes")

T = TypeVar("T")
Pending = executor_pb2.RunUpdate.Pending
Running = executor_pb2.RunUpdate.Running
Failed = executor_pb2.RunUpdate.Failed
Returned = executor_pb2.RunUpdate.Returned


@dataclass
class _Run:
    run_id: str
    job_id: str
    namespace: str
    pod_name: str
    report: Report
    node: str = ""  # the node it was leased on
    lease: executor_pb2.Lease | None = None  # None: adopted after a restart
    grace: int | None = None
    uid: str = ""
    created: bool = False  # the pod exists (or existed)
    last: Any = None  # the pod as last seen
    reported: str = ""  # "", "pending" or "running"
    stopping: bool = False
    deleting: bool = False  # a delete request is under way or was accepted
    done: bool = False  # the end was reported: no longer held
    stuck: Observation | None = None
    stuck_since: float = 0.0
    cleanup_at: float | None = None  # when to delete the finished pod
    addresses: dict[int, str] = field(default_factory=dict)


def _message(e: client.ApiException) -> str:
    try:
        return json.loads(e.body or "{}").get("message") or str(e.reason)
    except (ValueError, AttributeError):
        return str(e.reason)


def _newer(version: str | None, than: str) -> bool:
    """Whether a resourceVersion is after another. Versions are opaque strings to clients;
    when they are not both numbers, assume not (the listing is the later word)."""
    try:
        return int(version or "") > int(than)
    except ValueError:
        return False


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
        self.api = api
        self.executor_id = executor_id
        self.settings = settings or KubernetesSettings()
        self.clock = clock
        self.core = client.CoreV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self._pool = ThreadPoolExecutor(
            self.settings.api_threads, thread_name_prefix="kubernetes-api"
        )
        self._runs: dict[str, _Run] = {}
        self._room = Room()
        self._waiting: dict[str, tuple[executor_pb2.Lease, Report]] = {}
        self._nodes: list[executor_pb2.Node] = []
        self._node_labels: dict[str, dict[str, str]] = {}
        self._nodes_at = -float("inf")
        self._refreshing = False
        self._tasks: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._report: Report | None = None
        self._ticker: asyncio.Task | None = None
        self.log_archive = LogArchive(
            self.settings.log_dir,
            retention=self.settings.log_retention,
            max_bytes=self.settings.log_max_bytes,
        )
        self.watcher = PodWatcher(
            self.core,
            lb.of_executor(executor_id),
            self.settings.namespace,
            on_event=self._from_thread(self._on_pod),
            on_list=self._from_thread(self._on_list),
            timeout=self.settings.watch_timeout,
        )

    # --- plumbing --------------------------------------------------------------------------

    def _from_thread(self, fn: Callable[..., None]) -> Callable[..., None]:
        def deliver(*args: Any) -> None:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(fn, *args)

        return deliver

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _send(self, run: _Run, **kind: Any) -> None:
        run.report(update(run.run_id, run.job_id, **kind))

    # --- the Backend protocol --------------------------------------------------------------

    async def open(self, report: Report) -> int:
        """Read the nodes, re-adopt this executor's pods, and start watching them."""
        self._loop = asyncio.get_running_loop()
        self._report = report
        await self._refresh_nodes()
        pods = await self._call(self.watcher.list)
        for pod in pods:
            self._adopt(pod)
        await self._remove_stray_objects()
        self.watcher.start()
        self._ticker = self._loop.create_task(self._tick_forever())
        log.info(
            "kubernetes executor %s: %d nodes, adopted %d pods",
            self.executor_id,
            len(self._nodes),
            len(pods),
        )
        return len(pods)

    def nodes(self) -> Sequence[executor_pb2.Node]:
        return self._nodes

    @property
    def capabilities(self) -> Capabilities:
        return KUBERNETES

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

    def _create_run(self, lease: executor_pb2.Lease, report: Report) -> None:
        spec = lease.job.pod_specs[0] if lease.job.pod_specs else None
        grace = (
            spec.terminationGracePeriodSeconds
            if spec is not None and spec.HasField("terminationGracePeriodSeconds")
            else None
        )
        run = _Run(
            lease.run_id,
            lease.job.id,
            namespace_of(lease, self.settings),
            lease.pod_name,
            report,
            lease.node,
            lease=lease,
            grace=grace,
        )
        self._runs[run.run_id] = run
        self._spawn(self._create(run))

    def stop(self, run_id: str, *, preempt: bool) -> None:
        if self._room.withdraw(run_id):  # held for room: it never started
            lease, report = self._waiting.pop(run_id)
            report(update(run_id, lease.job.id, stopped=executor_pb2.RunUpdate.Stopped()))
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
            self._spawn(self._delete_pod(run))
        # else: _create sees `stopping` once the pod exists (or reports stopped if it failed)

    def synced(self, lease_timeout: float, elapsed: float) -> None:
        """Nothing to renew: the cluster keeps the pods."""

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
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._loop = None

    async def container_log(self, query: LogQuery) -> list[PodLogLine]:
        """A container's log lines (ExecutorControl.Logs): from the pod while it exists, then
        from the archive kept when it was deleted (see logs.py)."""
        if query.run_id not in self.log_archive:
            run = self._runs.get(query.run_id)
            namespace = (
                run.namespace
                if run is not None
                else (self.settings.namespace or query.namespace or self.settings.default_namespace)
            )
            name = run.pod_name if run is not None else query.pod_name
            try:
                text = await self._call(
                    self.core.read_namespaced_pod_log,
                    name,
                    namespace,
                    container=query.container,
                    timestamps=True,
                    tail_lines=query.tail,
                )
            except client.ApiException as e:
                if e.status == 400:  # the container has not started: nothing logged yet
                    return []
                if e.status != 404:
                    raise
                if query.run_id not in self.log_archive:  # (or kept meanwhile)
                    raise LogUnavailable(
                        f"pod {namespace}/{name} of run {query.run_id} is gone and this "
                        "executor no longer keeps its log"
                    ) from None
            else:
                return select(parse_log(text or ""), query)
        text = self.log_archive.get(query.run_id, query.container) or ""
        return select(parse_log(text), query)

    async def _archive_logs(self, run: _Run) -> None:
        """Keep the pod's logs before deleting it (Kubernetes deletes them with the pod)."""
        if run.run_id in self.log_archive or run.last is None:
            return
        spec = run.last.spec
        names = [c.name for c in [*(spec.init_containers or []), *(spec.containers or [])]]
        logs: dict[str, str] = {}
        for name in names:
            try:
                logs[name] = (
                    await self._call(
                        self.core.read_namespaced_pod_log,
                        run.pod_name,
                        run.namespace,
                        container=name,
                        timestamps=True,
                    )
                    or ""
                )
            except client.ApiException as e:
                if e.status == 404:
                    return  # gone already: nothing left to keep
                logs[name] = ""  # never started
            except Exception as e:
                log.warning(
                    "could not keep the log of pod %s/%s: %s", run.namespace, run.pod_name, e
                )
                return
        try:
            self.log_archive.put(run.run_id, logs)
        except (OSError, ValueError) as e:
            log.warning("could not keep the log of pod %s/%s: %s", run.namespace, run.pod_name, e)

    def ingress_addresses(self, run_id: str) -> dict[int, str]:
        """The run's ingress addresses (port -> host), what upstream reports as ingress_info."""
        run = self._runs.get(run_id)
        return dict(run.addresses) if run is not None else {}

    # --- creating --------------------------------------------------------------------------

    async def _create(self, run: _Run) -> None:
        lease = run.lease
        assert lease is not None
        if self._node_labels and lease.node not in self._node_labels:
            self._end(run, returned=Returned(reason=f"node {lease.node} is not in the cluster"))
            return
        manifest = pod_manifest(
            lease, self.executor_id, self.settings, self._node_labels.get(lease.node)
        )
        try:
            pod = await self._call(self.core.create_namespaced_pod, run.namespace, manifest)
        except client.ApiException as e:
            pod = await self._creation_failed(run, e)
            if pod is None:
                return
        except Exception as e:
            self._creation_refused(
                run, returned=Returned(reason=f"the pod could not be created: {e}")
            )
            return
        run.created = True
        run.uid = run.uid or pod.metadata.uid
        if run.last is None:
            run.last = pod
        if run.stopping:
            await self._delete_pod(run)
            return
        await self._expose(run)

    async def _creation_failed(self, run: _Run, e: client.ApiException) -> Any:
        """The existing pod to carry on with, or None once the run has been ended."""
        if e.status == 409:
            try:
                pod = await self._call(self.core.read_namespaced_pod, run.pod_name, run.namespace)
            except client.ApiException:
                pod = None
            if pod is not None and (pod.metadata.labels or {}).get(lb.RUN_ID) == run.run_id:
                return pod  # ours already (a repeated lease): carry on with it
            self._creation_refused(
                run,
                returned=Returned(
                    reason=f"a pod named {run.pod_name} already exists in {run.namespace}"
                ),
            )
        elif e.status in (400, 422):
            self._creation_refused(
                run, failed=Failed(reason=f"Kubernetes refused the pod: {_message(e)}")
            )
        else:
            self._creation_refused(
                run,
                returned=Returned(reason=f"the pod could not be created: {e.status} {_message(e)}"),
            )
        return None

    def _creation_refused(self, run: _Run, **kind: Any) -> None:
        if run.stopping:
            self._end(run, stopped=executor_pb2.RunUpdate.Stopped())
        else:
            self._end(run, **kind)
        self._runs.pop(run.run_id, None)

    async def _expose(self, run: _Run) -> None:
        assert run.lease is not None
        wanted = exposure(run.lease, self.executor_id, self.settings, run.uid)
        run.addresses = dict(wanted.addresses)
        for service in wanted.services:
            await self._create_object(self.core.create_namespaced_service, run, service)
        for ingress in wanted.ingresses:
            await self._create_object(self.networking.create_namespaced_ingress, run, ingress)
        if wanted.addresses:
            run.report(
                update(
                    run.run_id,
                    run.job_id,
                    ingress_info=executor_pb2.RunUpdate.IngressInfo(addresses=wanted.addresses),
                )
            )

    async def _create_object(
        self, create: Callable[..., Any], run: _Run, body: dict[str, Any]
    ) -> None:
        try:
            await self._call(create, run.namespace, body)
        except client.ApiException as e:
            if e.status != 409:
                log.warning(
                    "run %s: could not create %s %s: %s",
                    run.run_id,
                    body["kind"],
                    body["metadata"]["name"],
                    _message(e),
                )

    # --- watching --------------------------------------------------------------------------

    def _adopt(self, pod: Any) -> None:
        labels = pod.metadata.labels or {}
        run_id, job_id = labels.get(lb.RUN_ID), labels.get(lb.JOB_ID)
        if not run_id or not job_id or run_id in self._runs:
            return
        assert self._report is not None
        grace = pod.spec.termination_grace_period_seconds
        node = (pod.metadata.annotations or {}).get(lb.LEASED_NODE) or pod.spec.node_name or ""
        run = _Run(
            run_id,
            job_id,
            pod.metadata.namespace,
            pod.metadata.name,
            self._report,
            node,
            grace=grace,
            uid=pod.metadata.uid,
            created=True,
            last=pod,
        )
        self._runs[run_id] = run
        self._room.claim(run_id, node, _pod_requests(pod))  # until it ends or is gone
        if pod.metadata.deletion_timestamp is not None:
            run.stopping = run.deleting = True  # being deleted: report stopped once gone
            return
        self._assess(run, pod)

    def _on_pod(self, kind: str, pod: Any) -> None:
        run = self._runs.get((pod.metadata.labels or {}).get(lb.RUN_ID, ""))
        if run is None or (run.uid and pod.metadata.uid != run.uid):
            return
        if kind == "DELETED":
            self._gone(run)
            return
        run.created = True
        run.uid = pod.metadata.uid
        run.last = pod
        if not run.done and not run.stopping:
            self._assess(run, pod)

    def _on_list(self, pods: list[Any], version: str) -> None:
        """A fresh listing after the watch expired: catch up with everything missed."""
        present = {(p.metadata.labels or {}).get(lb.RUN_ID) for p in pods}
        for run in list(self._runs.values()):
            if (
                run.run_id not in present
                and run.created
                and run.last is not None
                and not _newer(run.last.metadata.resource_version, version)
            ):
                self._gone(run)
        for pod in pods:
            self._on_pod("MODIFIED", pod)

    def _assess(self, run: _Run, pod: Any) -> None:
        seen = observe(pod, self.settings.classification)
        if seen.state in (State.PENDING, State.STUCK) and not run.reported:
            run.reported = "pending"
            self._send(run, pending=Pending(kubernetes_id=seen.uid))
        if seen.state is State.STUCK:
            if run.stuck is None or run.stuck.problem != seen.problem:
                run.stuck_since = self.clock()
            run.stuck = seen
            if seen.hopeless:
                self._end_stuck(run)
            return
        run.stuck = None
        if seen.state is State.RUNNING and run.reported != "running":
            run.reported = "running"
            self._send(run, running=Running(node=seen.node, kubernetes_id=seen.uid))
        elif seen.state is State.SUCCEEDED:
            self._end(run, succeeded=executor_pb2.RunUpdate.Succeeded())
        elif seen.state is State.FAILED:
            self._end(run, failed=seen.failure)
        elif seen.state is State.RETURNED:
            self._end(run, returned=Returned(reason=seen.reason), remove_pod=True)

    def _end_stuck(self, run: _Run) -> None:
        seen = run.stuck
        assert seen is not None
        if seen.problem == "unschedulable":
            self._end(run, returned=Returned(reason=seen.reason), remove_pod=True)
        else:
            self._end(run, failed=seen.failure, remove_pod=True)

    def _end(self, run: _Run, *, remove_pod: bool = False, **kind: Any) -> None:
        """Report the run's end; it is no longer held. The pod is deleted now or later."""
        if run.done:
            return
        run.done = True
        self._room.release(run.run_id)  # stopped runs end only once their pod is gone
        self._send(run, **kind)
        if run.created:
            delay = 0.0 if remove_pod else self.settings.finished_pod_retention
            if delay <= 0:
                self._spawn(self._cleanup(run))
            else:
                run.cleanup_at = self.clock() + delay
                self._spawn(self._delete_auxiliary(run))

    def _gone(self, run: _Run) -> None:
        """The run's pod object no longer exists."""
        if not run.done:
            if run.stopping:
                self._end(run, stopped=executor_pb2.RunUpdate.Stopped())
            else:
                seen = vanished(run.last, self.settings.classification)
                if seen.state is State.RETURNED:
                    self._end(run, returned=Returned(reason=seen.reason))
                else:
                    self._end(run, failed=seen.failure)
        run.cleanup_at = None
        self._runs.pop(run.run_id, None)
        self._spawn(self._delete_auxiliary(run))

    # --- deleting --------------------------------------------------------------------------

    async def _delete_pod(self, run: _Run, *, grace: int | None = None) -> None:
        run.deleting = True
        await self._archive_logs(run)
        grace = run.grace if grace is None else grace
        options = client.V1DeleteOptions(
            grace_period_seconds=grace,
            preconditions=client.V1Preconditions(uid=run.uid) if run.uid else None,
        )
        try:
            await self._call(
                self.core.delete_namespaced_pod, run.pod_name, run.namespace, body=options
            )
        except client.ApiException as e:
            if e.status in (404, 409):  # gone already (409: the name is another pod's now)
                self._gone(run)
            else:
                run.deleting = False  # retried by the ticker
                log.warning(
                    "could not delete pod %s/%s: %s", run.namespace, run.pod_name, _message(e)
                )
        except Exception as e:
            run.deleting = False
            log.warning("could not delete pod %s/%s: %s", run.namespace, run.pod_name, e)

    async def _cleanup(self, run: _Run) -> None:
        run.cleanup_at = None
        await self._delete_pod(run)
        await self._delete_auxiliary(run)

    async def _delete_auxiliary(self, run: _Run) -> None:
        selector = lb.of_run(self.executor_id, run.run_id)
        await self._delete_matching(run.namespace, selector)

    async def _delete_matching(
        self, namespace: str | None, selector: str, keep: Callable[[Any], bool] = lambda _: False
    ) -> None:
        kinds = (
            (
                self.core.list_namespaced_service,
                self.core.list_service_for_all_namespaces,
                self.core.delete_namespaced_service,
            ),
            (
                self.networking.list_namespaced_ingress,
                self.networking.list_ingress_for_all_namespaces,
                self.networking.delete_namespaced_ingress,
            ),
        )
        for list_in, list_all, delete in kinds:
            try:
                found = await (
                    self._call(list_in, namespace, label_selector=selector)
                    if namespace
                    else self._call(list_all, label_selector=selector)
                )
                for obj in found.items:
                    if not keep(obj):
                        with contextlib.suppress(client.ApiException):
                            await self._call(delete, obj.metadata.name, obj.metadata.namespace)
            except Exception as e:
                log.warning("could not clean up %s: %s", selector, e)

    async def _remove_stray_objects(self) -> None:
        """Services and ingresses of runs whose pod is gone (the executor was down)."""
        live = set(self._runs)
        await self._delete_matching(
            self.settings.namespace,
            lb.selector(**{lb.EXECUTOR: self.executor_id, lb.AUXILIARY: "true"}),
            keep=lambda obj: (obj.metadata.labels or {}).get(lb.RUN_ID) in live,
        )

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
        # Pods still terminating on a node (preempted ones, typically) hold its resources: a
        # pod waiting for them is not stuck yet.
        draining = {r.node for r in self._runs.values() if r.stopping and not r.done}
        for run in list(self._runs.values()):
            if (
                run.stuck is not None
                and run.stuck.problem == "unschedulable"
                and run.node in draining
            ):
                run.stuck_since = now
            if run.stuck is not None and not run.done and not run.stopping:
                limit = (
                    self.settings.unschedulable_timeout
                    if run.stuck.problem == "unschedulable"
                    else self.settings.image_pull_timeout
                )
                if now - run.stuck_since >= limit:
                    self._end_stuck(run)
            if run.cleanup_at is not None and now >= run.cleanup_at:
                self._spawn(self._cleanup(run))
            if run.stopping and run.created and not run.deleting and not run.done:
                self._spawn(self._delete_pod(run))
        if not self._refreshing and now - self._nodes_at >= self.settings.node_refresh_interval:
            self._spawn(self._refresh_nodes())

    async def _refresh_nodes(self) -> None:
        self._refreshing = True
        try:
            nodes = await self._call(self.core.list_node)
            pods: list[Any] = []
            if self.settings.subtract_foreign_pods:
                pods = (
                    await self._call(
                        self.core.list_pod_for_all_namespaces,
                        field_selector="status.phase!=Succeeded,status.phase!=Failed",
                    )
                ).items
            self._nodes = executor_nodes(
                nodes.items,
                pods,
                self.executor_id,
                subtract_foreign=self.settings.subtract_foreign_pods,
            )
            self._room.set_nodes(self._nodes)
            self._node_labels = {
                n.metadata.name: dict(n.metadata.labels or {}) for n in nodes.items
            }
        except Exception as e:
            log.warning("could not read the cluster's nodes: %s", e)
        finally:
            self._nodes_at = self.clock()
            self._refreshing = False


def _pod_requests(pod: Any) -> Requests:
    """What an existing pod requests (requests, else limits; at least any init container)."""

    def of(container: Any) -> Requests:
        resources = container.resources
        raw = dict((resources.limits or {}) if resources else {})
        raw.update((resources.requests or {}) if resources else {})
        return quantities({k: str(v) for k, v in raw.items()})

    total: Requests = {}
    for container in pod.spec.containers or []:
        for name, amount in of(container).items():
            total[name] = total.get(name, 0) + amount
    for container in pod.spec.init_containers or []:
        for name, amount in of(container).items():
            total[name] = max(total.get(name, 0), amount)
    return total
