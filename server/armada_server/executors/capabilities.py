"""What each kind of executor can do, and which fields of a pod spec it cannot honour.

A backend states what it can do in one value (`Capabilities`), the same for every executor of
its kind (kinds.py): nothing outside executors/ asks a backend's type what it can do.

An executor declares the pod-spec fields it cannot honour (executor.Capabilities) in every
sync; the server refuses at submission a job that no executor of its pool could run, naming
the field, so that nothing is ever silently dropped, whichever process runs the executor.
Paths are field names joined by dots; a repeated field stands for each element, a map key
follows its map in brackets: "volumes", "containers.livenessProbe",
"containers.resources.limits[ephemeral-storage]".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import Message

from armada_core.api import executor_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_server.executors.local.support import UNSUPPORTED_POD_FIELDS

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\]]*)\])?")

Segments = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond running pods.

    `unsupported_pod_fields`: the pod-spec fields it cannot honour (sent in every sync; the
    server refuses jobs that set them). `container_logs`: it keeps its runs' container logs
    and serves them (ExecutorControl.Logs); without, a log reads as empty. `adopts_runs`: its
    runs outlive it, and `open` adopts those an earlier start left; without, a restarted
    executor holds nothing and the server fails its runs as missing and retries them.
    """

    unsupported_pod_fields: tuple[str, ...] = ()
    container_logs: bool = False
    adopts_runs: bool = False

    def declaration(self) -> executor_pb2.Capabilities:
        """What goes into each sync."""
        return executor_pb2.Capabilities(unsupported_pod_fields=self.unsupported_pod_fields)


#: Local processes: no volumes, probes, security contexts, sidecars, ... (local/support.py).
LOCAL = Capabilities(UNSUPPORTED_POD_FIELDS, container_logs=True, adopts_runs=True)
#: A simulated cluster only simulates runs: any pod spec is as good as another.
SIMULATED = Capabilities()
#: Kubernetes honours every pod-spec field (the API server checks the rest).
KUBERNETES = Capabilities(container_logs=True, adopts_runs=True)


def local_capabilities() -> executor_pb2.Capabilities:
    """The local executor's declaration."""
    return LOCAL.declaration()


def full_capabilities() -> executor_pb2.Capabilities:
    """The declaration of an executor that honours everything a pod spec says."""
    return executor_pb2.Capabilities()


@functools.lru_cache(maxsize=256)
def _parse(path: str) -> Segments | None:
    segments: list[tuple[str, str | None]] = []
    for part in _split(path):
        match = _SEGMENT.fullmatch(part)
        if match is None:
            return None  # not a path this server understands: never matches
        segments.append((match.group(1), match.group(2)))
    return tuple(segments)


def _split(path: str) -> list[str]:
    """Split on dots outside brackets (map keys may hold dots: nvidia.com/gpu)."""
    parts: list[str] = []
    depth = start = 0
    for i, ch in enumerate(path):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "." and depth == 0:
            parts.append(path[start:i])
            start = i + 1
    parts.append(path[start:])
    return parts


def unhonoured(pod_spec: core_v1_pb2.PodSpec, unsupported: Iterable[str]) -> list[str]:
    """The concrete paths of the fields set in `pod_spec` among `unsupported` declared paths
    (e.g. "containers[0].livenessProbe"), in the order declared."""
    found: list[str] = []
    for path in unsupported:
        segments = _parse(path)
        if segments:
            _find(pod_spec, segments, "", found)
    return found


def _find(message: Message, segments: Segments, prefix: str, found: list[str]) -> None:
    (name, key), rest = segments[0], segments[1:]
    field = message.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        return  # a field this server's protocol does not know: no job can set it
    where = f"{prefix}.{name}" if prefix else name
    value = getattr(message, name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        if key is None:
            if len(value) and not rest:
                found.append(where)
            return
        if key not in value:
            return
        where = f"{where}[{key}]"
        if not rest:
            found.append(where)
        elif field.message_type.fields_by_name["value"].message_type is not None:
            _find(value[key], rest, where, found)
        return
    if key is not None:
        return  # a key on a field that is not a map: never matches
    if field.is_repeated:
        if not len(value):
            return
        if not rest or field.message_type is None:
            found.append(where)
            return
        for i, element in enumerate(value):
            _find(element, rest, f"{where}[{i}]", found)
        return
    if field.message_type is not None:
        if not message.HasField(name):
            return
        if rest:
            _find(value, rest, where, found)
        else:
            found.append(where)
        return
    if rest:
        return
    if field.type == field.TYPE_BOOL:
        if value:
            found.append(where)
    elif field.has_presence:
        if message.HasField(name):
            found.append(where)
    elif value:
        found.append(where)
