"""A container's environment, resolved the way kubelet would on a node without an API server.

Plain values and the downward API (`fieldRef`, `resourceFieldRef`) resolve locally; Secrets and
ConfigMaps live in a Kubernetes API server this executor does not have, so a reference to one
that is not optional makes the pod unrunnable (kubelet's CreateContainerConfigError), and an
optional one is left unset, as kubelet does when the object is missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from armada_core.api.k8s import core_v1_pb2
from armada_core.scheduling.model import parse_quantity

CONFIG_ERROR = "CreateContainerConfigError"
LOCAL_IP = "127.0.0.1"

_LABEL_PATH = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class UnresolvableVariable(ValueError):
    """A variable that cannot be resolved on this node."""


@dataclass(frozen=True)
class PodIdentity:
    """What the downward API tells a container about its pod."""

    pod_name: str
    namespace: str
    node_name: str
    uid: str = ""
    service_account: str = ""
    pod_ip: str = LOCAL_IP
    host_ip: str = LOCAL_IP
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes variable expansion: `$(NAME)` becomes its value when NAME is defined.

    `$$` is an escaped `$`; a reference to an undefined variable stays as written.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 == len(text):
            out.append(char)
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def container_environment(
    container: core_v1_pb2.Container,
    pod_spec: core_v1_pb2.PodSpec,
    identity: PodIdentity,
    *,
    base: Mapping[str, str],
    allocatable: Mapping[str, str],
) -> dict[str, str]:
    """`base` overlaid with the container's envFrom and env, in Kubernetes' order.

    Later definitions win; values may refer to variables defined before them with `$(NAME)`.
    Raises UnresolvableVariable naming the container and variable when one cannot be resolved.
    """
    env = dict(base)
    where = f"container {container.name!r}"
    for source in container.envFrom:
        kind, ref = (
            ("secret", source.secretRef)
            if source.HasField("secretRef")
            else ("configMap", source.configMapRef)
        )
        if not ref.optional:
            raise UnresolvableVariable(
                f"{where}: envFrom {kind} {ref.localObjectReference.name!r} cannot be read: "
                "the local executor has no Kubernetes API server"
            )
    for var in container.env:
        if not var.HasField("valueFrom"):
            env[var.name] = expand(var.value, env)
            continue
        value = _value_from(var, container, pod_spec, identity, allocatable, where)
        if value is not None:
            env[var.name] = value
    return env


def _value_from(
    var: core_v1_pb2.EnvVar,
    container: core_v1_pb2.Container,
    pod_spec: core_v1_pb2.PodSpec,
    identity: PodIdentity,
    allocatable: Mapping[str, str],
    where: str,
) -> str | None:
    source = var.valueFrom
    if source.HasField("fieldRef"):
        return _field_value(source.fieldRef.fieldPath, identity, f"{where}, env {var.name}")
    if source.HasField("resourceFieldRef"):
        return _resource_value(
            source.resourceFieldRef, container, pod_spec, allocatable, f"{where}, env {var.name}"
        )
    selectors: tuple[tuple[str, Literal["secretKeyRef", "configMapKeyRef"]], ...] = (
        ("secret", "secretKeyRef"),
        ("configMap", "configMapKeyRef"),
    )
    for kind, selector_field in selectors:
        if source.HasField(selector_field):
            selector: core_v1_pb2.SecretKeySelector | core_v1_pb2.ConfigMapKeySelector = getattr(
                source, selector_field
            )
            if selector.optional:
                return None
            raise UnresolvableVariable(
                f"{where}, env {var.name}: {kind} {selector.localObjectReference.name!r} "
                f"(key {selector.key!r}) cannot be read: the local executor has no Kubernetes "
                "API server"
            )
    raise UnresolvableVariable(f"{where}, env {var.name}: valueFrom names no source")


def _field_value(path: str, identity: PodIdentity, where: str) -> str:
    simple = {
        "metadata.name": identity.pod_name,
        "metadata.namespace": identity.namespace,
        "metadata.uid": identity.uid,
        "spec.nodeName": identity.node_name,
        "spec.serviceAccountName": identity.service_account,
        "status.podIP": identity.pod_ip,
        "status.podIPs": identity.pod_ip,
        "status.hostIP": identity.host_ip,
        "status.hostIPs": identity.host_ip,
    }
    if path in simple:
        return simple[path]
    match = _LABEL_PATH.match(path)
    if match:
        values = identity.labels if match.group(1) == "labels" else identity.annotations
        return values.get(match.group(2), "")
    raise UnresolvableVariable(f"{where}: fieldRef {path!r} is not supported")


def _resource_value(
    ref: core_v1_pb2.ResourceFieldSelector,
    container: core_v1_pb2.Container,
    pod_spec: core_v1_pb2.PodSpec,
    allocatable: Mapping[str, str],
    where: str,
) -> str:
    target = container
    if ref.containerName and ref.containerName != container.name:
        found = [
            c
            for c in (*pod_spec.initContainers, *pod_spec.containers)
            if c.name == ref.containerName
        ]
        if not found:
            raise UnresolvableVariable(
                f"{where}: resourceFieldRef names unknown container {ref.containerName!r}"
            )
        target = found[0]
    kind, _, name = ref.resource.partition(".")
    limits = {k: v.string for k, v in target.resources.limits.items()}
    requests = {k: v.string for k, v in target.resources.requests.items()}
    if kind == "limits":
        # An unset limit is the node's allocatable amount, as kubelet reports it.
        quantity = limits.get(name) or allocatable.get(name)
    elif kind == "requests":
        # A request defaults to the limit when only the limit is set.
        quantity = requests.get(name) or limits.get(name) or "0"
    else:
        quantity = None
    if not name or quantity is None:
        raise UnresolvableVariable(f"{where}: resourceFieldRef {ref.resource!r} is not supported")
    divisor = ref.divisor.string if ref.HasField("divisor") and ref.divisor.string else "1"
    try:
        value = parse_quantity(quantity, milli=True)
        unit = parse_quantity(divisor, milli=True)
    except ValueError as e:
        raise UnresolvableVariable(f"{where}: {e}") from None
    if unit == 0:
        raise UnresolvableVariable(f"{where}: resourceFieldRef divisor must not be zero")
    return str(-(-value // unit))  # rounded up, as kubelet does
