"""A faithful fake of the Kubernetes API server, for the Kubernetes executor's tests.

No API server can run on these machines, so the executor is tested against this: a real HTTP
server on 127.0.0.1 speaking enough of the Kubernetes REST API that the official `kubernetes`
client, configured with `Configuration(host=fake.url)`, works against it unchanged:

- pods, services and ingresses (namespaced) and nodes (cluster-scoped): GET one, LIST (all
  namespaces or one), WATCH (`?watch=true`, chunked JSON lines), POST, PUT, PATCH (merge
  patch), DELETE;
- label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`) and the
  field selectors the executor needs (`metadata.name`, `metadata.namespace`, `spec.nodeName`,
  `status.phase`);
- one resourceVersion counter for everything, as etcd's revision: every write bumps it; lists
  carry it; watches resume strictly after it, replay history, start with synthetic ADDED
  events when no version is given, send ADDED/DELETED when an object enters or leaves the
  selector, optional BOOKMARKs, and an ERROR event with a 410 Expired Status once the history
  has been compacted past the requested version;
- optimistic concurrency: PUT/PATCH with a stale resourceVersion and DELETE with failing
  preconditions answer 409 Conflict;
- graceful pod deletion: a pod bound to a node gets `deletionTimestamp` and
  `deletionGracePeriodSeconds` and disappears when the grace period ends (or earlier, when the
  fake kubelet reports its containers gone); an unbound or finished pod, or grace 0, goes at
  once;
- pod logs (`GET .../pods/NAME/log`: `container`, `timestamps`, `tailLines`), written by the
  fake kubelet, refused while the container has not started, gone with the pod;
- errors as Kubernetes `Status` bodies: 400 BadRequest, 404 NotFound, 405 MethodNotAllowed,
  409 AlreadyExists/Conflict, 410 Expired, 415 UnsupportedMediaType, 422 Invalid.

The kubelet and kube-scheduler halves live in fake_kubelet.py and act on the same state.
Not implemented: pagination (`limit`/`continue` are ignored: lists are complete), admission
(quotas, PriorityClass lookups), other resources and API groups, authentication.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes import client

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True)
class Kind:
    resource: str
    kind: str
    api_version: str
    namespaced: bool
    group: str = ""


KINDS = {
    k.resource: k
    for k in (
        Kind("pods", "Pod", "v1", True),
        Kind("services", "Service", "v1", True),
        Kind("nodes", "Node", "v1", False),
        Kind("ingresses", "Ingress", "networking.k8s.io/v1", True, "networking.k8s.io"),
    )
}


def _true(value: str | None) -> bool:
    """Go's strconv.ParseBool, as the API server parses boolean parameters."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def now_text(delta: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """Answered as a Kubernetes Status body."""

    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


# --- selectors -------------------------------------------------------------------------------

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def label_matcher(text: str) -> Callable[[dict[str, str]], bool]:
    """A predicate over labels for a `labelSelector`; ApiError 400 when it does not parse."""
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_terms(text or ""):
        m = _SET_TERM.match(term)
        if m:
            key, op = m.group(1), m.group(2)
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
            continue
        for op in ("!=", "==", "="):
            if op in term:
                key, value = (p.strip() for p in term.split(op, 1))
                if not key or not _LABEL_VALUE.match(value):
                    raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")
                if op == "!=":
                    tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
                else:
                    tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
                break
        else:
            if term.startswith("!"):
                absent = term[1:].strip()
                tests.append(lambda labels, k=absent: k not in labels)
            elif re.match(r"^[A-Za-z0-9./_-]+$", term):
                tests.append(lambda labels, k=term: k in labels)
            else:
                raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")
    return lambda labels: all(t(labels) for t in tests)


_FIELDS: dict[str, Callable[[Obj], str]] = {
    "metadata.name": lambda o: o["metadata"].get("name", ""),
    "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName", ""),
    "status.phase": lambda o: o.get("status", {}).get("phase", ""),
}


def field_matcher(text: str) -> Callable[[Obj], bool]:
    tests: list[Callable[[Obj], bool]] = []
    for term in _split_terms(text or ""):
        for op in ("!=", "==", "="):
            if op in term:
                field, value = (p.strip() for p in term.split(op, 1))
                if field not in _FIELDS:
                    raise ApiError(400, "BadRequest", f"field label not supported: {field}")
                get = _FIELDS[field]
                if op == "!=":
                    tests.append(lambda o, g=get, v=value: g(o) != v)
                else:
                    tests.append(lambda o, g=get, v=value: g(o) == v)
                break
        else:
            raise ApiError(400, "BadRequest", f"invalid field selector: {term!r}")
    return lambda obj: all(t(obj) for t in tests)


# --- the state -------------------------------------------------------------------------------


@dataclass
class Event:
    rv: int
    resource: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None


@dataclass(frozen=True)
class Deletion:
    resource: str
    namespace: str
    name: str
    grace: int | None  # what the client asked for; None: the object's own default


class Cluster:
    """The API server's storage: objects, the revision counter and the event history."""

    def __init__(self, history: int = 10_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 1
        self.objects: dict[str, dict[Key, Obj]] = {r: {} for r in KINDS}
        self.events: list[Event] = []
        self.compacted = 0  # watches from a version below this get 410 Gone
        self.history = history
        self.namespaces = {"default", "kube-system"}
        self.deletions: list[Deletion] = []
        self.requests: list[tuple[str, str]] = []  # (method, path), for assertions
        self.closing = False
        # Pods being deleted gracefully: key -> monotonic deadline.
        self.terminating: dict[Key, float] = {}
        # Called (with the lock held) after a pod is created or removed, or a node changes:
        # the fake scheduler uses it.
        self.on_change: list[Callable[[str, Obj], None]] = []
        # Container logs: pod key -> container -> [(RFC 3339 nanosecond time, line)].
        self.logs: dict[Key, dict[str, list[tuple[str, str]]]] = {}
        self._last_log_ns = 0

    # Writes. Each bumps the revision and records the event; callers hold the lock.

    def _record(self, resource: str, type_: str, obj: Obj, old: Obj | None) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append(
            Event(
                self.rv,
                resource,
                type_,
                copy.deepcopy(obj),
                copy.deepcopy(old) if old is not None else None,
            )
        )
        if len(self.events) > self.history:
            dropped = self.events[: len(self.events) - self.history]
            del self.events[: len(dropped)]
            self.compacted = dropped[-1].rv + 1
        self.changed.notify_all()

    def put(self, resource: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        with self.lock:
            old = self.objects[resource].get(key)
            if old is None:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", now_text())
            self.objects[resource][key] = obj
            self._record(resource, "ADDED" if old is None else "MODIFIED", obj, old)
            for hook in self.on_change:
                hook(resource, obj)
            return obj

    def remove(self, resource: str, key: Key) -> Obj | None:
        with self.lock:
            obj = self.objects[resource].pop(key, None)
            self.terminating.pop(key, None)
            if resource == "pods":
                self.logs.pop(key, None)  # a pod's logs go with it
            if obj is None:
                return None
            old = copy.deepcopy(obj)
            self._record(resource, "DELETED", obj, old)
            for hook in self.on_change:
                hook(resource, obj)
            return obj

    def compact(self) -> None:
        """Forget the history: every watch resuming from before now gets 410 Gone."""
        with self.lock:
            self.events.clear()
            self.compacted = self.rv + 1

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        with self.lock:
            obj = self.objects[resource].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def write_log(self, key: Key, container: str, *lines: str) -> None:
        """Lines a container printed, each stamped as the kubelet does (nanoseconds, strictly
        increasing here)."""
        with self.lock:
            for line in lines:
                ns = max(time.time_ns(), self._last_log_ns + 1)
                self._last_log_ns = ns
                seconds, nanos = divmod(ns, 1_000_000_000)
                stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
                self.logs.setdefault(key, {}).setdefault(container, []).append(
                    (f"{stamp}.{nanos:09d}Z", line)
                )

    def pods(self) -> list[Obj]:
        with self.lock:
            return [copy.deepcopy(p) for p in self.objects["pods"].values()]

    def reap(self) -> None:
        """Remove pods whose grace period has ended."""
        with self.lock:
            due = [k for k, deadline in self.terminating.items() if deadline <= time.monotonic()]
            for key in due:
                self.remove("pods", key)


# --- requests --------------------------------------------------------------------------------

_ROUTES = [
    (re.compile(r"^/api/v1/(pods|services|nodes)$"), "collection"),
    (re.compile(r"^/apis/networking\.k8s\.io/v1/(ingresses)$"), "collection"),
    (re.compile(r"^/api/v1/(nodes)/([^/]+)$"), "cluster-item"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/(pods|services)$"), "ns-collection"),
    (re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/([^/]+)/(ingresses)$"), "ns-collection"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/(pods|services)/([^/]+)$"), "ns-item"),
    (
        re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/([^/]+)/(ingresses)/([^/]+)$"),
        "ns-item",
    ),
]


_LOG_ROUTE = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")


@dataclass
class Target:
    kind: Kind
    namespace: str | None  # None: all namespaces (collections only)
    name: str | None


def route(path: str) -> Target:
    for pattern, shape in _ROUTES:
        m = pattern.match(path)
        if not m:
            continue
        if shape == "collection":
            return Target(KINDS[m.group(1)], None, None)
        if shape == "cluster-item":
            return Target(KINDS[m.group(1)], "", m.group(2))
        if shape == "ns-collection":
            return Target(KINDS[m.group(2)], m.group(1), None)
        return Target(KINDS[m.group(2)], m.group(1), m.group(3))
    raise ApiError(404, "NotFound", "the server could not find the requested resource")


def _not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{kind.resource} "{name}" not found',
        name=name,
        kind=kind.resource,
        group=kind.group,
    )


def _invalid(kind: Kind, name: str, field: str, problem: str) -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f'{kind.kind} "{name}" is invalid: {field}: {problem}',
        name=name,
        kind=kind.kind,
        group=kind.group,
        causes=[{"reason": "FieldValueInvalid", "message": problem, "field": field}],
    )


def _merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


class Api:
    """The REST semantics over a Cluster, independent of HTTP."""

    def __init__(self, cluster: Cluster, *, bookmark_interval: float | None = None) -> None:
        self.cluster = cluster
        self.bookmark_interval = bookmark_interval
        self._ips = 0

    def _selected(self, target: Target, query: dict[str, str]) -> Callable[[Obj], bool]:
        labels = label_matcher(query.get("labelSelector", ""))
        fields = field_matcher(query.get("fieldSelector", ""))

        def matches(obj: Obj) -> bool:
            meta = obj["metadata"]
            if (
                target.namespace is not None
                and target.kind.namespaced
                and meta.get("namespace") != target.namespace
            ):
                return False
            return labels(meta.get("labels") or {}) and fields(obj)

        return matches

    def _with_kind(self, kind: Kind, obj: Obj) -> Obj:
        return {"kind": kind.kind, "apiVersion": kind.api_version, **obj}

    def list(self, target: Target, query: dict[str, str]) -> Obj:
        matches = self._selected(target, query)
        with self.cluster.lock:
            items = [
                copy.deepcopy(o)
                for o in self.cluster.objects[target.kind.resource].values()
                if matches(o)
            ]
            rv = self.cluster.rv
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return {
            "kind": f"{target.kind.kind}List",
            "apiVersion": target.kind.api_version,
            "metadata": {"resourceVersion": str(rv)},
            "items": items,
        }

    def get(self, target: Target) -> Obj:
        assert target.name is not None
        obj = self.cluster.get(target.kind.resource, target.namespace or "", target.name)
        if obj is None:
            raise _not_found(target.kind, target.name)
        return self._with_kind(target.kind, obj)

    def pod_log(self, namespace: str, name: str, query: dict[str, str]) -> str:
        """A container's log as the kubelet serves it through the API server."""
        with self.cluster.lock:
            pod = self.cluster.objects["pods"].get((namespace, name))
            if pod is None:
                raise _not_found(KINDS["pods"], name)
            names = [
                c["name"]
                for c in [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]
            ]
            container = query.get("container")
            if not container:
                if len(pod["spec"]["containers"]) != 1:
                    raise ApiError(
                        400,
                        "BadRequest",
                        "a container name must be specified "
                        f"for pod {name}, choose one of: {names}",
                    )
                container = names[-1]
            if container not in names:
                raise ApiError(
                    400, "BadRequest", f"container {container} is not valid for pod {name}"
                )
            statuses = [
                *(pod["status"].get("initContainerStatuses") or []),
                *(pod["status"].get("containerStatuses") or []),
            ]
            state = next((s["state"] for s in statuses if s["name"] == container), {})
            if "running" not in state and "terminated" not in state:
                raise ApiError(
                    400,
                    "BadRequest",
                    f'container "{container}" in pod "{name}" '
                    "is waiting to start: ContainerCreating",
                )
            lines = list(self.cluster.logs.get((namespace, name), {}).get(container, []))
        tail = query.get("tailLines")
        if tail is not None:
            lines = lines[-int(tail) :] if int(tail) > 0 else []
        stamps = _true(query.get("timestamps"))
        return "".join(f"{t} {line}\n" if stamps else f"{line}\n" for t, line in lines)

    def watch(self, target: Target, query: dict[str, str]) -> Iterator[Obj]:
        """The events of a watch, as they happen; ends on timeoutSeconds or shutdown.
        A bad selector or version raises here, before the stream starts."""
        matches = self._selected(target, query)
        requested = query.get("resourceVersion", "")
        if requested not in ("", "0") and not requested.isdigit():
            raise ApiError(400, "BadRequest", f"invalid resource version {requested!r}")
        return self._events(target, query, matches)

    def _events(
        self, target: Target, query: dict[str, str], matches: Callable[[Obj], bool]
    ) -> Iterator[Obj]:
        resource = target.kind.resource
        timeout = float(query["timeoutSeconds"]) if "timeoutSeconds" in query else None
        deadline = time.monotonic() + timeout if timeout is not None else None
        bookmarks = _true(query.get("allowWatchBookmarks")) and self.bookmark_interval
        next_bookmark = time.monotonic() + (self.bookmark_interval or 0)
        requested = query.get("resourceVersion", "")
        cluster = self.cluster
        with cluster.lock:
            if requested in ("", "0"):
                cursor = cluster.rv
                initial = [
                    copy.deepcopy(o) for o in cluster.objects[resource].values() if matches(o)
                ]
            else:
                cursor = int(requested)
                initial = []
                if cursor + 1 < cluster.compacted:
                    yield {
                        "type": "ERROR",
                        "object": ApiError(
                            410,
                            "Expired",
                            f"too old resource version: {cursor} ({cluster.compacted - 1})",
                        ).status(),
                    }
                    return
        for obj in initial:
            yield {"type": "ADDED", "object": self._with_kind(target.kind, obj)}
        while True:
            with cluster.lock:
                if cursor + 1 < cluster.compacted:
                    # Compacted under a live watch: it cannot go on without a gap.
                    yield {
                        "type": "ERROR",
                        "object": ApiError(
                            410,
                            "Expired",
                            f"too old resource version: {cursor} ({cluster.compacted - 1})",
                        ).status(),
                    }
                    return
                pending = [e for e in cluster.events if e.rv > cursor and e.resource == resource]
                if not pending:
                    if cluster.closing:
                        return
                    wait = 0.5
                    if deadline is not None:
                        wait = min(wait, deadline - time.monotonic())
                    if bookmarks:
                        wait = min(wait, next_bookmark - time.monotonic())
                    if wait > 0:
                        cluster.changed.wait(wait)
                    pending = [
                        e for e in cluster.events if e.rv > cursor and e.resource == resource
                    ]
                latest = cluster.rv
            for e in pending:
                cursor = e.rv
                now_in = e.type != "DELETED" and matches(e.obj)
                was_in = e.old is not None and matches(e.old)
                if e.type == "DELETED":
                    kind = "DELETED" if was_in else None
                elif now_in:
                    kind = "MODIFIED" if was_in else "ADDED"
                else:
                    kind = "DELETED" if was_in else None
                if kind is not None:
                    yield {"type": kind, "object": self._with_kind(target.kind, e.obj)}
            if deadline is not None and time.monotonic() >= deadline:
                return
            if bookmarks and time.monotonic() >= next_bookmark:
                next_bookmark = time.monotonic() + (self.bookmark_interval or 0)
                cursor = max(cursor, latest)
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": target.kind.kind,
                        "apiVersion": target.kind.api_version,
                        "metadata": {"resourceVersion": str(cursor)},
                    },
                }

    def create(self, target: Target, body: Obj) -> Obj:
        kind = target.kind
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body is not a JSON object")
        meta = body.setdefault("metadata", {})
        ns = target.namespace or ""
        if kind.namespaced:
            if meta.get("namespace", ns) != ns:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does "
                    "not match the namespace sent on the request",
                )
            if ns not in self.cluster.namespaces:
                raise ApiError(
                    404, "NotFound", f'namespaces "{ns}" not found', name=ns, kind="namespaces"
                )
            meta["namespace"] = ns
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _invalid(kind, "", "metadata.name", "name or generateName is required")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta["name"]
        pattern = _DNS_1035 if kind.resource == "services" else _DNS_1123
        if len(name) > (63 if kind.resource == "services" else 253) or not pattern.match(name):
            raise _invalid(
                kind,
                name,
                "metadata.name",
                f"Invalid value: {name!r}: a lowercase RFC 1123 name is required",
            )
        for key, value in (meta.get("labels") or {}).items():
            if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                raise _invalid(
                    kind,
                    name,
                    f"metadata.labels[{key}]",
                    f"Invalid value: {value!r}: a valid label must be 63 characters "
                    "or less and consist of alphanumerics, '-', '_' or '.'",
                )
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(field, None)
        body.pop("kind", None)
        body.pop("apiVersion", None)
        getattr(self, f"_default_{kind.resource}")(body)
        with self.cluster.lock:
            if (ns, name) in self.cluster.objects[kind.resource]:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{kind.resource} "{name}" already exists',
                    name=name,
                    kind=kind.resource,
                    group=kind.group,
                )
            return self._with_kind(kind, copy.deepcopy(self.cluster.put(kind.resource, body)))

    def _default_pods(self, pod: Obj) -> None:
        spec = pod.get("spec")
        name = pod["metadata"]["name"]
        kind = KINDS["pods"]
        if not isinstance(spec, dict) or not spec.get("containers"):
            raise _invalid(kind, name, "spec.containers", "Required value")
        seen = set()
        for group in ("initContainers", "containers"):
            for i, c in enumerate(spec.get(group) or []):
                if not c.get("name"):
                    raise _invalid(kind, name, f"spec.{group}[{i}].name", "Required value")
                if c["name"] in seen:
                    raise _invalid(
                        kind, name, f"spec.{group}[{i}].name", f"Duplicate value: {c['name']!r}"
                    )
                seen.add(c["name"])
                if not c.get("image"):
                    raise _invalid(kind, name, f"spec.{group}[{i}].image", "Required value")
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
                c.setdefault(
                    "imagePullPolicy",
                    "Always"
                    if c["image"].endswith(":latest") or ":" not in c["image"]
                    else "IfNotPresent",
                )
        if spec.get("restartPolicy", "Always") not in ("Always", "OnFailure", "Never"):
            raise _invalid(kind, name, "spec.restartPolicy", "Unsupported value")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}

    def _default_services(self, service: Obj) -> None:
        spec = service.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
            if spec["type"] == "NodePort" and "nodePort" not in port:
                self._ips += 1
                port["nodePort"] = 30000 + self._ips
        if spec.get("clusterIP") != "None":
            self._ips += 1
            spec["clusterIP"] = f"10.96.{self._ips // 250}.{self._ips % 250 + 1}"
        spec["clusterIPs"] = [spec["clusterIP"]]
        service["status"] = {"loadBalancer": {}}

    def _default_ingresses(self, ingress: Obj) -> None:
        ingress.setdefault("spec", {})
        ingress["status"] = {"loadBalancer": {}}

    def _default_nodes(self, node: Obj) -> None:
        node.setdefault("spec", {})
        node.setdefault("status", {})

    def replace(self, target: Target, body: Obj, *, patch: bool = False) -> Obj:
        kind, name = target.kind, target.name
        assert name is not None
        with self.cluster.lock:
            current = self.cluster.objects[kind.resource].get((target.namespace or "", name))
            if current is None:
                raise _not_found(kind, name)
            wanted = _merge_patch(current, body) if patch else copy.deepcopy(body)
            given = (body.get("metadata") or {}).get("resourceVersion")
            if not patch and not given:
                raise _invalid(
                    kind,
                    name,
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )
            if given and given != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Operation cannot be fulfilled on "
                    f'{kind.resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    name=name,
                    kind=kind.resource,
                    group=kind.group,
                )
            if kind.resource == "pods" and wanted.get("spec") != current.get("spec"):
                raise _invalid(
                    kind,
                    name,
                    "spec",
                    "Forbidden: pod updates may not change "
                    "fields other than labels and annotations",
                )
            updated = copy.deepcopy(current)
            meta = wanted.get("metadata") or {}
            for field in ("labels", "annotations"):
                if meta.get(field) is not None:
                    updated["metadata"][field] = meta[field]
                else:
                    updated["metadata"].pop(field, None)
            if kind.resource != "pods":
                updated["spec"] = wanted.get("spec", updated.get("spec"))
            return self._with_kind(kind, copy.deepcopy(self.cluster.put(kind.resource, updated)))

    def delete(self, target: Target, query: dict[str, str], body: Obj | None) -> Obj:
        kind, name = target.kind, target.name
        assert name is not None
        options = body or {}
        grace = options.get("gracePeriodSeconds")
        if grace is None and "gracePeriodSeconds" in query:
            grace = int(query["gracePeriodSeconds"])
        key = (target.namespace or "", name)
        with self.cluster.lock:
            current = self.cluster.objects[kind.resource].get(key)
            if current is None:
                raise _not_found(kind, name)
            pre = options.get("preconditions") or {}
            meta = current["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: "
                    f"{pre['uid']}, UID in object meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    "Precondition failed: ResourceVersion in "
                    f"precondition: {pre['resourceVersion']}, ResourceVersion in "
                    f"object meta: {meta['resourceVersion']}",
                )
            self.cluster.deletions.append(Deletion(kind.resource, key[0], name, grace))
            if kind.resource != "pods":
                removed = self.cluster.remove(kind.resource, key)
                assert removed is not None
                if kind.resource == "ingresses":
                    return {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            "group": kind.group,
                            "kind": kind.resource,
                            "uid": meta["uid"],
                        },
                    }
                return self._with_kind(kind, copy.deepcopy(removed))
            if grace is None:
                grace = int(current["spec"].get("terminationGracePeriodSeconds", 30))
            bound = bool(current["spec"].get("nodeName"))
            finished = current["status"].get("phase") in ("Succeeded", "Failed")
            if grace <= 0 or not bound or finished:
                removed = self.cluster.remove("pods", key)
                assert removed is not None
                return self._with_kind(kind, copy.deepcopy(removed))
            deadline = time.monotonic() + grace
            if key in self.cluster.terminating and deadline >= self.cluster.terminating[key]:
                return self._with_kind(kind, copy.deepcopy(current))
            self.cluster.terminating[key] = deadline
            updated = copy.deepcopy(current)
            updated["metadata"]["deletionTimestamp"] = now_text(grace)
            updated["metadata"]["deletionGracePeriodSeconds"] = grace
            return self._with_kind(kind, copy.deepcopy(self.cluster.put("pods", updated)))


# --- HTTP ------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: Obj) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        try:
            return json.loads(self.rfile.read(length))
        except json.JSONDecodeError as e:
            raise ApiError(400, "BadRequest", f"the body is not JSON: {e}") from None

    def _handle(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        api = self.server.api
        api.cluster.requests.append((method, url.path))
        try:
            body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
            log = _LOG_ROUTE.match(url.path)
            if log and method == "GET":
                self._send_text(api.pod_log(log.group(1), log.group(2), query))
                return
            target = route(url.path)
            if method == "GET" and target.name is None and _true(query.get("watch")):
                self._stream(api.watch(target, query))
                return
            if method == "GET":
                self._send(200, api.list(target, query) if target.name is None else api.get(target))
            elif method == "POST" and target.name is None and target.namespace is not None:
                self._send(201, api.create(target, body))
            elif method == "PUT" and target.name is not None:
                self._send(200, api.replace(target, body or {}))
            elif method == "PATCH" and target.name is not None:
                content = self.headers.get("Content-Type", "")
                if "merge-patch" not in content or not isinstance(body, dict):
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        f"the fake supports merge patches only, not {content}",
                    )
                self._send(200, api.replace(target, body, patch=True))
            elif method == "DELETE" and target.name is not None:
                self._send(200, api.delete(target, query, body))
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {url.path}")
        except ApiError as e:
            self._send(e.code, e.status())

    def _stream(self, events: Iterator[Obj]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went away
            self.close_connection = True

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    api: Api

    def __init__(self, api: Api) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api = api
        self.connections: set[socket.socket] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.connections.discard(request)
        super().shutdown_request(request)


class FakeApiServer:
    """The fake API server on 127.0.0.1:<port>; `with FakeApiServer() as fake:`."""

    def __init__(self, *, bookmark_interval: float | None = None) -> None:
        self.cluster = Cluster()
        self.api = Api(self.cluster, bookmark_interval=bookmark_interval)
        self._http = _HttpServer(self.api)
        self._threads = [
            threading.Thread(target=self._http.serve_forever, daemon=True, name="fake-apiserver"),
            threading.Thread(target=self._reaper, daemon=True, name="fake-reaper"),
        ]
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    def configuration(self) -> client.Configuration:
        config = client.Configuration(host=self.url)
        config.retries = 0
        return config

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration())

    def start(self) -> FakeApiServer:
        for t in self._threads:
            t.start()
        return self

    def _reaper(self) -> None:
        while not self._stop.wait(0.02):
            self.cluster.reap()

    def stop(self) -> None:
        with self.cluster.lock:
            self.cluster.closing = True
            self.cluster.changed.notify_all()
        self._stop.set()
        self._http.shutdown()
        for conn in list(self._http.connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._http.server_close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Conveniences for tests.

    def add_namespace(self, name: str) -> None:
        with self.cluster.lock:
            self.cluster.namespaces.add(name)

    def objects(self, resource: str, namespace: str | None = None) -> list[Obj]:
        with self.cluster.lock:
            return [
                copy.deepcopy(o)
                for (ns, _), o in self.cluster.objects[resource].items()
                if namespace is None or ns == namespace
            ]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until predicate() is truthy (re-checked on every change); returns its value."""
        deadline = time.monotonic() + timeout
        with self.cluster.lock:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the condition did not hold in time")
                self.cluster.changed.wait(min(left, 0.05))
