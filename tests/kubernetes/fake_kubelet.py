"""The node side of the fake cluster: nodes, a small kube-scheduler and a scripted kubelet.

Tests move pods through their lives with these methods, and every change goes through the
fake API server's storage, so watchers see exactly the events a real cluster would send:
binding (PodScheduled), Running with container states, Succeeded, Failed with exit codes,
reasons and termination messages, OOMKilled containers, evictions, DeadlineExceeded, image
pull errors, unschedulable pods, kubelet admission rejections (OutOfcpu) and the end of a
graceful deletion. Statuses carry every field the `kubernetes` client's models require.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Mapping
from typing import Any

from armada_core.scheduling.model import parse_quantity

from .fake_apiserver import Cluster, FakeApiServer, Key, Obj, now_text

HOSTNAME = "kubernetes.io/hostname"


def _requests(pod: Obj) -> dict[str, int]:
    total: dict[str, int] = {}
    spec = pod["spec"]
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for name, q in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[name] = total.get(name, 0) + parse_quantity(str(q), milli=name == "cpu")
    return total


def _tolerates(pod: Obj, taint: Mapping[str, str]) -> bool:
    for t in pod["spec"].get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


class FakeKubelet:
    """Nodes plus the kubelet and scheduler of the fake cluster."""

    def __init__(self, fake: FakeApiServer, *, auto_schedule: bool = True) -> None:
        self.fake = fake
        self.cluster: Cluster = fake.cluster
        self.auto_schedule = auto_schedule
        self._ips = 0
        self._scheduling = False
        self.cluster.on_change.append(self._changed)

    # --- nodes -----------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "16Gi",
        gpus: int = 0,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Mapping[str, str]] = (),
        unschedulable: bool = False,
        ready: bool = True,
    ) -> None:
        allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
        if gpus:
            allocatable["nvidia.com/gpu"] = str(gpus)
        self._ips += 1
        node = {
            "metadata": {
                "name": name,
                "labels": {HOSTNAME: name, "kubernetes.io/os": "linux", **(labels or {})},
            },
            "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
            "status": {
                "capacity": dict(allocatable),
                "allocatable": allocatable,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "lastHeartbeatTime": now_text(),
                        "lastTransitionTime": now_text(),
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": f"192.168.0.{self._ips}"},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": "b",
                    "containerRuntimeVersion": "containerd://1.7",
                    "kernelVersion": "6.1",
                    "kubeProxyVersion": "v1.31.0",
                    "kubeletVersion": "v1.31.0",
                    "machineID": "m",
                    "operatingSystem": "linux",
                    "osImage": "fake",
                    "systemUUID": "u",
                },
            },
        }
        if not node["spec"]["taints"]:
            del node["spec"]["taints"]
        self.cluster.put("nodes", node)

    def set_node(
        self, name: str, *, ready: bool | None = None, unschedulable: bool | None = None
    ) -> None:
        with self.cluster.lock:
            node = copy.deepcopy(self.cluster.objects["nodes"][("", name)])
            if ready is not None:
                node["status"]["conditions"][0]["status"] = "True" if ready else "False"
            if unschedulable is not None:
                node["spec"]["unschedulable"] = unschedulable
            self.cluster.put("nodes", node)

    # --- the scheduler ---------------------------------------------------------------------

    def _changed(self, resource: str, obj: Obj) -> None:
        if not self.auto_schedule or self._scheduling or resource not in ("pods", "nodes"):
            return
        self._scheduling = True  # binding is itself a change: do not recurse
        try:
            for key, pod in list(self.cluster.objects["pods"].items()):
                if not pod["spec"].get("nodeName") and "deletionTimestamp" not in pod["metadata"]:
                    self._try_schedule(key, pod)
        finally:
            self._scheduling = False

    def _fits(self, pod: Obj, node: Obj) -> str:
        """Why the pod cannot go on the node ('' when it can)."""
        labels = node["metadata"].get("labels") or {}
        if node["spec"].get("unschedulable"):
            return "node(s) were unschedulable"
        if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in node["spec"].get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(pod, taint):
                return "node(s) had untolerated taint"
        used: dict[str, int] = {}
        for other in self.cluster.objects["pods"].values():
            if other["spec"].get("nodeName") == node["metadata"]["name"] and other["status"].get(
                "phase"
            ) not in ("Succeeded", "Failed"):
                for k, v in _requests(other).items():
                    used[k] = used.get(k, 0) + v
        allocatable = node["status"]["allocatable"]
        for name, wanted in _requests(pod).items():
            have = parse_quantity(str(allocatable.get(name, "0")), milli=name == "cpu")
            if used.get(name, 0) + wanted > have:
                return f"Insufficient {name}"
        return ""

    def _try_schedule(self, key: Key, pod: Obj) -> None:
        nodes = list(self.cluster.objects["nodes"].values())
        reasons = {n["metadata"]["name"]: self._fits(pod, n) for n in nodes}
        chosen = next((name for name, why in reasons.items() if not why), None)
        if chosen is not None:
            self._bind(key, chosen)
            return
        summary: dict[str, int] = {}
        for why in reasons.values():
            summary[why] = summary.get(why, 0) + 1
        message = (
            f"0/{len(nodes)} nodes are available: "
            + ", ".join(f"{n} {why}" for why, n in sorted(summary.items()))
            + "."
        )
        self.unschedulable(*key, message=message)

    def _bind(self, key: Key, node: str) -> None:
        def change(pod: Obj) -> None:
            pod["spec"]["nodeName"] = node
            host = self.cluster.objects["nodes"][("", node)]["status"]["addresses"][0]
            pod["status"]["hostIP"] = host["address"]
            pod["status"]["conditions"] = [self._condition("PodScheduled", "True")]
            pod["status"]["containerStatuses"] = [
                self._container(c, {"waiting": {"reason": "ContainerCreating"}})
                for c in pod["spec"]["containers"]
            ]

        self._update(key, change)

    # --- the kubelet -----------------------------------------------------------------------

    @staticmethod
    def _condition(kind: str, status: str, reason: str = "", message: str = "") -> Obj:
        out = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": now_text(),
        }
        if reason:
            out["reason"] = reason
        if message:
            out["message"] = message
        return out

    @staticmethod
    def _container(spec: Obj, state: Obj, *, ready: bool = False) -> Obj:
        return {
            "name": spec["name"],
            "image": spec["image"],
            "imageID": "",
            "containerID": "",
            "ready": ready,
            "restartCount": 0,
            "started": ready,
            "state": state,
        }

    def _update(self, key: Key, change: Any) -> Obj:
        with self.cluster.lock:
            current = self.cluster.objects["pods"].get(key)
            if current is None:
                raise KeyError(f"no pod {key[0]}/{key[1]}")
            pod = copy.deepcopy(current)
            change(pod)
            return self.cluster.put("pods", pod)

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.cluster.get("pods", namespace, name)

    def schedule(self, namespace: str, name: str, node: str) -> None:
        """Bind the pod to a node, as kube-scheduler would."""
        self._bind((namespace, name), node)

    def unschedulable(
        self,
        namespace: str,
        name: str,
        *,
        message: str = "0/1 nodes are available: 1 Insufficient cpu.",
    ) -> None:
        def change(pod: Obj) -> None:
            pod["status"]["conditions"] = [
                self._condition("PodScheduled", "False", "Unschedulable", message)
            ]

        current = self.pod(namespace, name)
        conditions = (current or {}).get("status", {}).get("conditions") or []
        if any(c.get("message") == message for c in conditions):
            return  # nothing new: a real scheduler would not write either
        self._update((namespace, name), change)

    def run(self, namespace: str, name: str) -> None:
        """All containers started: phase Running."""

        def change(pod: Obj) -> None:
            assert pod["spec"].get("nodeName"), "run() needs a bound pod"
            self._ips += 1
            status = pod["status"]
            status.update(
                phase="Running",
                podIP=f"10.244.0.{self._ips % 250 + 1}",
                startTime=status.get("startTime") or now_text(),
            )
            status["conditions"] = [
                self._condition("PodScheduled", "True"),
                self._condition("Initialized", "True"),
                self._condition("Ready", "True"),
            ]
            status["containerStatuses"] = [
                self._container(c, {"running": {"startedAt": now_text()}}, ready=True)
                for c in pod["spec"]["containers"]
            ]

        self._update((namespace, name), change)

    def log(self, namespace: str, name: str, container: str, *lines: str) -> None:
        """The container prints `lines` (the pod's log, read through the API)."""
        self.cluster.write_log((namespace, name), container, *lines)

    def image_pull_error(
        self,
        namespace: str,
        name: str,
        *,
        reason: str = "ErrImagePull",
        message: str = "failed to pull image: not found",
    ) -> None:
        def change(pod: Obj) -> None:
            pod["status"]["containerStatuses"] = [
                self._container(c, {"waiting": {"reason": reason, "message": message}})
                for c in pod["spec"]["containers"]
            ]

        self._update((namespace, name), change)

    def _finish(
        self,
        namespace: str,
        name: str,
        phase: str,
        ends: Mapping[str, Obj],
        *,
        reason: str = "",
        message: str = "",
    ) -> None:
        def change(pod: Obj) -> None:
            status = pod["status"]
            status["phase"] = phase
            if reason:
                status["reason"] = reason
            if message:
                status["message"] = message
            status["conditions"] = [
                self._condition("PodScheduled", "True"),
                self._condition("Ready", "False", "PodCompleted"),
            ]
            statuses = []
            for c in pod["spec"]["containers"]:
                end = {"exitCode": 0, "reason": "Completed", **ends.get(c["name"], {})}
                end.setdefault("startedAt", now_text())
                end["finishedAt"] = now_text()
                statuses.append(self._container(c, {"terminated": end}))
            status["containerStatuses"] = statuses

        self._update((namespace, name), change)

    def succeed(self, namespace: str, name: str) -> None:
        self._finish(namespace, name, "Succeeded", {})

    def fail(
        self,
        namespace: str,
        name: str,
        *,
        exit_code: int = 1,
        reason: str = "Error",
        message: str = "",
        container: str | None = None,
    ) -> None:
        """One container (the first by default) exits non-zero; the pod fails."""
        pod = self.pod(namespace, name)
        assert pod is not None
        target = container or pod["spec"]["containers"][0]["name"]
        end: Obj = {"exitCode": exit_code, "reason": reason}
        if message:
            end["message"] = message
        self._finish(namespace, name, "Failed", {target: end})

    def oom_kill(self, namespace: str, name: str, container: str | None = None) -> None:
        self.fail(namespace, name, exit_code=137, reason="OOMKilled", container=container)

    def evict(
        self, namespace: str, name: str, *, message: str = "The node was low on resource: memory."
    ) -> None:
        pod = self.pod(namespace, name)
        assert pod is not None
        ends = {c["name"]: {"exitCode": 137, "reason": "Error"} for c in pod["spec"]["containers"]}
        self._finish(namespace, name, "Failed", ends, reason="Evicted", message=message)

    def deadline_exceeded(self, namespace: str, name: str) -> None:
        pod = self.pod(namespace, name)
        assert pod is not None
        ends = {c["name"]: {"exitCode": 137, "reason": "Error"} for c in pod["spec"]["containers"]}
        self._finish(
            namespace,
            name,
            "Failed",
            ends,
            reason="DeadlineExceeded",
            message="Pod was active on the node longer than the specified deadline",
        )

    def reject(self, namespace: str, name: str, *, reason: str = "OutOfcpu") -> None:
        """Kubelet admission refuses the pod: it fails without any container starting."""

        def change(pod: Obj) -> None:
            pod["status"].update(
                phase="Failed",
                reason=reason,
                message=(f"Pod was rejected: Node didn't have enough resource: {reason[5:]}"),
            )
            pod["status"].pop("containerStatuses", None)

        self._update((namespace, name), change)

    def terminated(self, namespace: str, name: str) -> None:
        """The containers of a pod being deleted have exited: the pod object goes now."""
        with self.cluster.lock:
            assert (namespace, name) in self.cluster.terminating, "pod is not being deleted"
            self.cluster.terminating[(namespace, name)] = time.monotonic()
        self.cluster.reap()

    def wait_pods(
        self, count: int, *, timeout: float = 10.0, namespace: str | None = None
    ) -> list[Obj]:
        """Wait for `count` live pods (not being deleted); returns them sorted by name."""

        def live() -> list[Obj]:
            pods = [
                p
                for p in self.fake.objects("pods", namespace)
                if "deletionTimestamp" not in p["metadata"]
            ]
            return sorted(pods, key=lambda p: p["metadata"]["name"]) if len(pods) >= count else []

        return self.fake.wait_for(live, timeout)
