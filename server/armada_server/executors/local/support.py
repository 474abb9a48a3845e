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

from armada_core.api.k8s import core_v1_pb2

# Container fields that change what the process experiences and are not implemented here.
_CONTAINER_FIELDS = (
    "volumeMounts",
    "volumeDevices",
    "lifecycle",
    "livenessProbe",
    "startupProbe",
    "securityContext",
    "stdin",
    "tty",
)
_POD_FIELDS = (
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


def ignored_fields(pod_spec: core_v1_pb2.PodSpec) -> list[str]:
    """Paths of the fields set in `pod_spec` that running it locally would ignore."""
    found = [name for name in _POD_FIELDS if _is_set(pod_spec, name)]
    if pod_spec.restartPolicy not in ("", "Never"):
        found.append(f"restartPolicy={pod_spec.restartPolicy}")
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(getattr(pod_spec, kind)):
            found += [
                f"{kind}[{i}].{name}" for name in _CONTAINER_FIELDS if _is_set(container, name)
            ]
            if "ephemeral-storage" in container.resources.limits:
                found.append(f"{kind}[{i}].resources.limits.ephemeral-storage")
    return found


def _is_set(message: object, name: str) -> bool:
    field = message.DESCRIPTOR.fields_by_name[name]  # type: ignore[attr-defined]
    value = getattr(message, name)
    if field.is_repeated:
        return len(value) > 0
    if field.type == field.TYPE_BOOL:
        return bool(value)
    return message.HasField(name)  # type: ignore[attr-defined]
