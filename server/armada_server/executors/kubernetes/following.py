"""Following the executor's pods: what each sight of a pod means for its run.

The watch (watcher.py) hands over every change of a pod, and a fresh listing when it had to
start again; after a restart the executor adopts the pods it finds. Each sight is judged
(status.py) and the run's progress reported once: pending, running, then its end. A pod stuck
pending (an image that cannot be pulled, no room in the cluster) ends its run once that has
lasted its timeout; a pod that vanished ends it by what was last seen of it. An ended run's pod
is deleted after `finished_pod_retention` (at once when it must go), and a run is forgotten
once its pod is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from armada_core.api import executor_pb2
from armada_server.executors.backend import Report
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.nodes import pod_requests
from armada_server.executors.kubernetes.runs import Run
from armada_server.executors.kubernetes.settings import KubernetesSettings
from armada_server.executors.kubernetes.status import State, observe, vanished
from armada_server.executors.room import Room

Pending = executor_pb2.RunUpdate.Pending
Running = executor_pb2.RunUpdate.Running
Returned = executor_pb2.RunUpdate.Returned
UNSCHEDULABLE = "unschedulable"


def _newer(version: str | None, than: str) -> bool:
    """Whether a resourceVersion is after another. Versions are opaque strings to clients;
    when they are not both numbers, assume not (the listing is the later word)."""
    try:
        return int(version or "") > int(than)
    except ValueError:
        return False


class PodFollower:
    """Keeps the runs in `runs` up to date with their pods. `remove_pod` deletes a run's pod
    and auxiliary objects, `remove_auxiliary` the latter only (both in the background)."""

    def __init__(
        self,
        runs: dict[str, Run],
        room: Room,
        settings: KubernetesSettings,
        *,
        clock: Callable[[], float],
        remove_pod: Callable[[Run], None],
        remove_auxiliary: Callable[[Run], None],
    ) -> None:
        self.runs = runs
        self.room = room
        self.settings = settings
        self.clock = clock
        self.remove_pod = remove_pod
        self.remove_auxiliary = remove_auxiliary

    def adopt(self, pod: Any, report: Report) -> bool:
        """Hold the run of a pod found at start (its progress goes to `report`); False for
        a pod that is not a run's, or whose run is held already."""
        labels = pod.metadata.labels or {}
        run_id, job_id = labels.get(lb.RUN_ID), labels.get(lb.JOB_ID)
        if not run_id or not job_id or run_id in self.runs:
            return False
        # The pod's own grace period, as the cluster keeps it (the executor set it at creation).
        grace = pod.spec.termination_grace_period_seconds
        node = (pod.metadata.annotations or {}).get(lb.LEASED_NODE) or pod.spec.node_name or ""
        run = Run(
            run_id,
            job_id,
            pod.metadata.namespace,
            pod.metadata.name,
            report,
            node,
            grace=grace,
            uid=pod.metadata.uid,
            created=True,
            last=pod,
        )
        self.runs[run_id] = run
        self.room.claim(run_id, node, pod_requests(pod, lenient=True))  # until it ends or is gone
        if pod.metadata.deletion_timestamp is not None:
            run.stopping = run.deleting = True  # being deleted: report stopped once gone
            return True
        self.assess(run, pod)
        return True

    def on_pod(self, kind: str, pod: Any) -> None:
        """A watch event: ADDED, MODIFIED or DELETED."""
        run = self.runs.get((pod.metadata.labels or {}).get(lb.RUN_ID, ""))
        if run is None or (run.uid and pod.metadata.uid != run.uid):
            return
        if kind == "DELETED":
            self.gone(run)
            return
        run.created = True
        run.uid = pod.metadata.uid
        run.last = pod
        if not run.done and not run.stopping:
            self.assess(run, pod)

    def on_list(self, pods: list[Any], version: str) -> None:
        """A fresh listing after the watch expired: catch up with everything missed."""
        present = {(p.metadata.labels or {}).get(lb.RUN_ID) for p in pods}
        for run in list(self.runs.values()):
            if (
                run.run_id not in present
                and run.created
                and run.last is not None
                and not _newer(run.last.metadata.resource_version, version)
            ):
                self.gone(run)
        for pod in pods:
            self.on_pod("MODIFIED", pod)

    def assess(self, run: Run, pod: Any) -> None:
        seen = observe(pod, self.settings.classification)
        if seen.state in (State.PENDING, State.STUCK) and not run.reported:
            run.reported = "pending"
            run.send(pending=Pending(kubernetes_id=seen.uid))
        if seen.state is State.STUCK:
            if run.stuck is None or run.stuck.problem != seen.problem:
                run.stuck_since = self.clock()
            run.stuck = seen
            if seen.hopeless:
                self.end_stuck(run)
            return
        run.stuck = None
        if seen.state is State.RUNNING and run.reported != "running":
            run.reported = "running"
            run.send(running=Running(node=seen.node, kubernetes_id=seen.uid))
        elif seen.state is State.SUCCEEDED:
            self.end(run, succeeded=executor_pb2.RunUpdate.Succeeded())
        elif seen.state is State.FAILED:
            self.end(run, failed=seen.failure)
        elif seen.state is State.RETURNED:
            self.end(run, returned=Returned(reason=seen.reason), remove_pod=True)

    def end_stuck_too_long(self, now: float) -> None:
        """End the runs stuck pending for longer than their problem's timeout. Pods still
        terminating on a node (preempted ones, typically) hold its resources: a pod waiting
        for them is not stuck yet."""
        draining = {r.node for r in self.runs.values() if r.stopping and not r.done}
        for run in list(self.runs.values()):
            if run.stuck is None:
                continue
            unschedulable = run.stuck.problem == UNSCHEDULABLE
            if unschedulable and run.node in draining:
                run.stuck_since = now
            if not run.done and not run.stopping:
                limit = (
                    self.settings.unschedulable_timeout
                    if unschedulable
                    else self.settings.image_pull_timeout
                )
                if now - run.stuck_since >= limit:
                    self.end_stuck(run)

    def end_stuck(self, run: Run) -> None:
        seen = run.stuck
        assert seen is not None
        if seen.problem == UNSCHEDULABLE:
            self.end(run, returned=Returned(reason=seen.reason), remove_pod=True)
        else:
            self.end(run, failed=seen.failure, remove_pod=True)

    def end(self, run: Run, *, remove_pod: bool = False, **kind: Any) -> None:
        """Report the run's end; it is no longer held. The pod is deleted now or later."""
        if run.done:
            return
        run.done = True
        self.room.release(run.run_id)  # stopped runs end only once their pod is gone
        run.send(**kind)
        if run.created:
            delay = 0.0 if remove_pod else self.settings.finished_pod_retention
            if delay <= 0:
                self.remove_pod(run)
            else:
                run.cleanup_at = self.clock() + delay
                self.remove_auxiliary(run)

    def gone(self, run: Run) -> None:
        """The run's pod object no longer exists."""
        if not run.done:
            if run.stopping:
                self.end(run, stopped=executor_pb2.RunUpdate.Stopped())
            else:
                seen = vanished(run.last, self.settings.classification)
                if seen.state is State.RETURNED:
                    self.end(run, returned=Returned(reason=seen.reason))
                else:
                    self.end(run, failed=seen.failure)
        run.cleanup_at = None
        self.runs.pop(run.run_id, None)
        self.remove_auxiliary(run)
