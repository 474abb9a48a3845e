"""Which PodSpec fields this runtime does not honour, so a caller can refuse them up front.

The design rule is that a field the system cannot carry through is rejected, never silently
dropped; the runtime cannot decide that on its own (the same job may suit another executor),
so it only says which fields it would ignore. Scheduling fields (nodeSelector, affinity,
tolerations, priority, ...) are the scheduler's and are not listed; neither are fields that
do not change what a batch process does (image, imagePullPolicy, ports, readiness probes).
CPU limits are not enforced either (no cgroups): Kubernetes only throttles, so they are not
listed.
"""

from __future__ import annotations

from google.protobuf.message import Message

from armada_core.api.k8s import core_v1_pb2

#: Container fields that change what the process experiences and are not implemented here.
IGNORED_CONTAINER_FIELDS = (
    "volumeMounts",
    "volumeDevices",
    "lifecycle",
    "livenessProbe",
    "startupProbe",
    "securityContext",
    "stdin",
    "tty",
)
#: Pod fields likewise.
IGNORED_POD_FIELDS = (
    "volumes",
    "securityContext",
    "hostAliases",
    "dnsConfig",
    "ephemeralContainers",
    "shareProcessNamespace",
    "hostPID",
    "hostIPC",
    "resourceClaims",
)
_CONTAINER_KINDS = ("initContainers", "containers")

#: What the local executor declares it cannot honour, as executor.Capabilities paths (see
#: executors/capabilities.py): the fields above, a container's ephemeral-storage limit, and
#: sidecars (init containers with a restartPolicy).
UNSUPPORTED_POD_FIELDS: tuple[str, ...] = (
    *IGNORED_POD_FIELDS,
    *(
        path
        for kind in _CONTAINER_KINDS
        for path in (
            *(f"{kind}.{name}" for name in IGNORED_CONTAINER_FIELDS),
            f"{kind}.resources.limits[ephemeral-storage]",
        )
    ),
    "initContainers.restartPolicy",
)


def ignored_fields(pod_spec: core_v1_pb2.PodSpec) -> list[str]:
    """Paths of the fields set in `pod_spec` that running it locally would ignore."""
    found = [name for name in IGNORED_POD_FIELDS if _is_set(pod_spec, name)]
    if pod_spec.restartPolicy not in ("", "Never"):
        found.append(f"restartPolicy={pod_spec.restartPolicy}")
    for kind in _CONTAINER_KINDS:
        containers: list[core_v1_pb2.Container] = list(getattr(pod_spec, kind))
        for i, container in enumerate(containers):
            found += [
                f"{kind}[{i}].{name}"
                for name in IGNORED_CONTAINER_FIELDS
                if _is_set(container, name)
            ]
            if "ephemeral-storage" in container.resources.limits:
                found.append(f"{kind}[{i}].resources.limits.ephemeral-storage")
    return found


def _is_set(message: Message, name: str) -> bool:
    field = message.DESCRIPTOR.fields_by_name[name]
    value = getattr(message, name)
    if field.is_repeated:
        return len(value) > 0
    if field.type == field.TYPE_BOOL:
        return bool(value)
    return message.HasField(name)
