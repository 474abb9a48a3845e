"""Checks of the pod spec fields that reach an executor or the scheduler.

Everything a job carries ends up in an executor's hands (as process arguments, environment,
file names, Kubernetes objects) or in the scheduler's (selectors, tolerations, affinity), so a
value neither can use is refused at submission, naming the field, rather than failing later
in every scheduling cycle or on every executor. The rules are Kubernetes' own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from armada_core.api.k8s import core_v1_pb2, meta_v1_pb2
from armada_core.jobs import names
from armada_core.jobs.errors import SubmissionError
from armada_core.jobs.text import key_in_path, shorten

# Any C0 or C1 control character, and DEL; free text (a command line, a variable's value, an
# annotation) may hold tabs and line breaks.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
CONTROL_IN_FREE_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CORE = "k8s.io.api.core.v1."
# String fields whose values are free text, by (message, field).
FREE_TEXT_FIELDS = frozenset(
    {
        (_CORE + "Container", "command"),
        (_CORE + "Container", "args"),
        (_CORE + "EphemeralContainerCommon", "command"),
        (_CORE + "EphemeralContainerCommon", "args"),
        (_CORE + "EnvVar", "value"),
        (_CORE + "ExecAction", "command"),
        ("api.IngressConfig", "annotations"),
    }
)

# Re-exported: the server's configuration checks topology level names with it.
QUALIFIED_NAME = names.QUALIFIED_NAME
LABEL_VALUE = names.LABEL_VALUE
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_QUANTITY = re.compile(
    r"([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)"
)
_SUFFIXES: dict[str, int | Fraction] = {
    "": 1,
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}

NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
TOLERATION_OPERATORS = ("", "Equal", "Exists")
TAINT_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
PROTOCOLS = ("", "TCP", "UDP", "SCTP")
PULL_POLICIES = ("", "Always", "IfNotPresent", "Never")
MESSAGE_POLICIES = ("", "File", "FallbackToLogsOnError")
DNS_POLICIES = ("", "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
PREEMPTION_POLICIES = ("", "PreemptLowerPriority", "Never")

# Resources counted in fractions; every other resource (GPUs, devices) is counted in whole units.
FRACTIONAL_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES = "hugepages-"
# Upper bounds on what one container, and one pod in total, may request: far above any real
# machine, low enough that a typo (10^9 CPUs) is caught instead of making the job wait forever.
MAX_CPU_MILLIS = 100_000 * 1000  # 100,000 cores
MAX_MEMORY = 2**50  # 1 PiB (also hugepages-*)
MAX_STORAGE = 2**60  # 1 EiB of ephemeral-storage
MAX_UNITS = 1_000_000  # of any other resource (GPUs, devices)


PodSpecError = SubmissionError


def check_texts(message: Message, path: str) -> None:
    """Every string in `message`: valid UTF-8, no NUL, no control characters (in free text,
    tabs and line breaks are allowed); map keys are never free text."""
    descriptor = message.DESCRIPTOR
    for field, value in message.ListFields():
        name = f"{path}.{field.name}"
        message_type = field.message_type
        if message_type is not None and message_type.GetOptions().map_entry:
            _check_map(
                name, value, message_type, (descriptor.full_name, field.name) in FREE_TEXT_FIELDS
            )
        elif message_type is not None:
            if field.is_repeated:
                for i, element in enumerate(value):
                    check_texts(element, f"{name}[{i}]")
            else:
                check_texts(value, name)
        elif field.type == FieldDescriptor.TYPE_STRING:
            free = (descriptor.full_name, field.name) in FREE_TEXT_FIELDS
            if field.is_repeated:
                for i, text in enumerate(value):
                    check_string(f"{name}[{i}]", text, free=free)
            else:
                check_string(name, value, free=free)


def _check_map(path: str, value: Any, entry: Descriptor, free: bool) -> None:
    """A map field, read by reflection: `value` is its container, `entry` its entry type."""
    value_field = entry.fields_by_name["value"]
    try:
        items = list(value.items())
    except UnicodeDecodeError:
        raise PodSpecError(path, "not valid UTF-8") from None
    for key, element in items:
        if isinstance(key, str):
            check_string(f"{path}[{key_in_path(key)}]", key, free=False)
        elif isinstance(key, bytes):
            raise PodSpecError(f"{path}[{shorten(key, 60)}]", "key not valid UTF-8")
        where = f"{path}[{key}]"
        if value_field.message_type is not None:
            check_texts(element, where)
        elif value_field.type == FieldDescriptor.TYPE_STRING:
            check_string(where, element, free=free)


def check_string(path: str, text: object, *, free: bool = False) -> None:
    """One string: valid UTF-8 without NUL or (outside free text) control characters."""
    if not isinstance(text, str):  # protobuf hands back text that is not UTF-8 as bytes
        raise PodSpecError(path, "not valid UTF-8")
    found = (CONTROL_IN_FREE_TEXT if free else _CONTROL).search(text)
    if found is not None:
        what = (
            "NUL characters"
            if found.group() == "\x00"
            else (f"control characters ({found.group()!r} at position {found.start()})")
        )
        raise PodSpecError(path, f"must not contain {what}")


def _one_of(path: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        names = ", ".join(a for a in allowed if a)
        empty = " or empty" if "" in allowed else ""
        raise PodSpecError(path, f"{shorten(value)} is not one of {names}{empty}")


def check_label_key(path: str, key: str, *, annotation: bool = False) -> None:
    """A label key, or with `annotation` an annotation key (checked in lower case)."""
    if not (names.is_annotation_key(key) if annotation else names.is_label_key(key)):
        length = len(key.rpartition("/")[2])
        rule = f"its name is {length} characters, above 63" if length > 63 else names.KEY_RULE
        raise PodSpecError(
            f"{path}[{key_in_path(key)}]",
            f"is not a valid key ({rule})",
        )


def check_labels(path: str, labels: Mapping[str, str]) -> None:
    """Kubernetes label syntax: qualified-name keys, label values."""
    key_ok, value_ok = QUALIFIED_NAME.fullmatch, LABEL_VALUE.fullmatch
    for key, value in labels.items():  # the common case, fast
        if not key_ok(key) or not value_ok(value):
            break
    else:
        return
    for key, value in sorted(labels.items()):  # sorted: the same first error every time
        check_label_key(path, key)
        if not LABEL_VALUE.fullmatch(value):
            raise PodSpecError(
                f"{path}[{key}]",
                f"{shorten(value)} is not a valid label value "
                "(at most 63 letters, digits, '-', '_' and "
                "'.', starting and ending with a letter or "
                "digit)",
            )


def check_scheduling(spec: core_v1_pb2.PodSpec, path: str) -> None:
    """The fields the scheduler reads: node selector, tolerations, affinity, enums."""
    check_labels(f"{path}.nodeSelector", spec.nodeSelector)
    for i, t in enumerate(spec.tolerations):
        _check_toleration(t, f"{path}.tolerations[{i}]")
    if spec.HasField("affinity"):
        _check_affinity(spec.affinity, f"{path}.affinity")
    _one_of(f"{path}.dnsPolicy", spec.dnsPolicy, DNS_POLICIES)
    if spec.dnsPolicy == "None" and not spec.HasField("dnsConfig"):
        raise PodSpecError(f"{path}.dnsConfig", "is required when dnsPolicy is None")
    _one_of(f"{path}.preemptionPolicy", spec.preemptionPolicy, PREEMPTION_POLICIES)


def _check_toleration(t: core_v1_pb2.Toleration, path: str) -> None:
    if t.key and not QUALIFIED_NAME.fullmatch(t.key):
        raise PodSpecError(f"{path}.key", f"{shorten(t.key)} is not a valid taint key")
    _one_of(f"{path}.operator", t.operator, TOLERATION_OPERATORS)
    _one_of(f"{path}.effect", t.effect, TAINT_EFFECTS)
    if t.operator == "Exists":
        if t.value:
            raise PodSpecError(f"{path}.value", "must be empty when the operator is Exists")
    else:
        if not t.key:
            raise PodSpecError(f"{path}.operator", "must be Exists when the key is empty")
        if not LABEL_VALUE.fullmatch(t.value):
            raise PodSpecError(f"{path}.value", f"{shorten(t.value)} is not a valid taint value")
    if t.HasField("tolerationSeconds") and t.effect != "NoExecute":
        raise PodSpecError(f"{path}.tolerationSeconds", "is only allowed with the effect NoExecute")


def _check_affinity(affinity: core_v1_pb2.Affinity, path: str) -> None:
    node = affinity.nodeAffinity
    required = node.requiredDuringSchedulingIgnoredDuringExecution
    where = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if node.HasField("requiredDuringSchedulingIgnoredDuringExecution") and not (
        required.nodeSelectorTerms
    ):
        raise PodSpecError(f"{where}.nodeSelectorTerms", "must have at least one term")
    for i, term in enumerate(required.nodeSelectorTerms):
        _check_node_term(term, f"{where}.nodeSelectorTerms[{i}]")
    where = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, preferred in enumerate(node.preferredDuringSchedulingIgnoredDuringExecution):
        _check_weight(f"{where}[{i}].weight", preferred.weight)
        _check_node_term(preferred.preference, f"{where}[{i}].preference")
    for kind in ("podAffinity", "podAntiAffinity"):
        pods = getattr(affinity, kind)
        where = f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        for i, term in enumerate(pods.requiredDuringSchedulingIgnoredDuringExecution):
            _check_pod_term(term, f"{where}[{i}]")
        where = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, weighted in enumerate(pods.preferredDuringSchedulingIgnoredDuringExecution):
            _check_weight(f"{where}[{i}].weight", weighted.weight)
            _check_pod_term(weighted.podAffinityTerm, f"{where}[{i}].podAffinityTerm")


def _check_weight(path: str, weight: int) -> None:
    if not 1 <= weight <= 100:
        raise PodSpecError(path, f"must be between 1 and 100, got {weight}")


def _check_node_term(term: core_v1_pb2.NodeSelectorTerm, path: str) -> None:
    for i, req in enumerate(term.matchExpressions):
        check_requirement(req, f"{path}.matchExpressions[{i}]", NODE_SELECTOR_OPERATORS)
    for i, req in enumerate(term.matchFields):
        where = f"{path}.matchFields[{i}]"
        if req.key != "metadata.name":
            raise PodSpecError(
                f"{where}.key", f"{shorten(req.key)} is not a node field (only metadata.name is)"
            )
        _one_of(f"{where}.operator", req.operator, ("In", "NotIn"))
        if len(req.values) != 1:
            raise PodSpecError(f"{where}.values", "must hold exactly one node name")


def _check_pod_term(term: core_v1_pb2.PodAffinityTerm, path: str) -> None:
    if not term.topologyKey or not QUALIFIED_NAME.fullmatch(term.topologyKey):
        raise PodSpecError(
            f"{path}.topologyKey", f"{shorten(term.topologyKey)} is not a valid label key"
        )
    for selector in ("labelSelector", "namespaceSelector"):
        s = getattr(term, selector)
        check_labels(f"{path}.{selector}.matchLabels", s.matchLabels)
        for i, req in enumerate(s.matchExpressions):
            check_requirement(
                req, f"{path}.{selector}.matchExpressions[{i}]", LABEL_SELECTOR_OPERATORS
            )


def check_requirement(
    req: core_v1_pb2.NodeSelectorRequirement | meta_v1_pb2.LabelSelectorRequirement,
    path: str,
    operators: tuple[str, ...],
) -> None:
    """A selector requirement: a label key, a known operator, and values that suit it."""
    if not QUALIFIED_NAME.fullmatch(req.key):
        raise PodSpecError(f"{path}.key", f"{shorten(req.key)} is not a valid label key")
    _one_of(f"{path}.operator", req.operator, operators)
    values = list(req.values)
    if req.operator in ("In", "NotIn") and not values:
        raise PodSpecError(f"{path}.values", f"{req.operator} needs at least one value")
    if req.operator in ("Exists", "DoesNotExist") and values:
        raise PodSpecError(f"{path}.values", f"{req.operator} takes no values")
    if req.operator in ("Gt", "Lt") and (len(values) != 1 or not _INTEGER.fullmatch(values[0])):
        raise PodSpecError(f"{path}.values", f"{req.operator} takes exactly one integer")
    for i, value in enumerate(values):
        if req.operator not in ("Gt", "Lt") and not LABEL_VALUE.fullmatch(value):
            raise PodSpecError(
                f"{path}.values[{i}]", f"{shorten(value)} is not a valid label value"
            )


def check_container_fields(c: core_v1_pb2.Container, path: str, *, init: bool) -> None:
    """Enums, ports and names of a container (its resources are checked separately)."""
    _one_of(f"{path}.imagePullPolicy", c.imagePullPolicy, PULL_POLICIES)
    _one_of(f"{path}.terminationMessagePolicy", c.terminationMessagePolicy, MESSAGE_POLICIES)
    if c.restartPolicy and not (init and c.restartPolicy == "Always"):
        raise PodSpecError(
            f"{path}.restartPolicy",
            f"{shorten(c.restartPolicy)}: only an init container may set one, and only Always",
        )
    port_names: set[str] = set()
    for i, port in enumerate(c.ports):
        where = f"{path}.ports[{i}]"
        if not 1 <= port.containerPort <= 65535:
            raise PodSpecError(
                f"{where}.containerPort", f"must be between 1 and 65535, got {port.containerPort}"
            )
        if port.HasField("hostPort") and not 0 <= port.hostPort <= 65535:
            raise PodSpecError(
                f"{where}.hostPort", f"must be between 1 and 65535, got {port.hostPort}"
            )
        _one_of(f"{where}.protocol", port.protocol, PROTOCOLS)
        if port.name:
            if not names.PORT_NAME.fullmatch(port.name):
                raise PodSpecError(
                    f"{where}.name",
                    f"{shorten(port.name)} is not a valid port "
                    "name (at most 15 lower-case letters, "
                    "digits and '-', with a letter)",
                )
            if port.name in port_names:
                raise PodSpecError(f"{where}.name", f"{port.name!r} is used twice")
            port_names.add(port.name)
    for i, env in enumerate(c.env):
        if not names.ENV_NAME.fullmatch(env.name):
            raise PodSpecError(
                f"{path}.env[{i}].name",
                f"{shorten(env.name)} is not a valid variable name "
                "(printable ASCII characters other than '=')",
            )
    if c.image != c.image.strip():
        raise PodSpecError(f"{path}.image", "must not begin or end with whitespace")


def check_resource_name(path: str, name: str) -> None:
    """Kubernetes' rule for a container's resources: a name without a domain is one of the
    standard resources; any other is an extended resource, `domain/name`."""
    if not QUALIFIED_NAME.fullmatch(name):
        raise PodSpecError(
            path,
            "is not a valid resource name (an optional DNS prefix and "
            "'/', then a name of letters, digits, '-', '_' and '.')",
        )
    if "/" not in name and name not in FRACTIONAL_RESOURCES and not name.startswith(HUGEPAGES):
        raise PodSpecError(
            path,
            "is not a standard resource (cpu, memory, ephemeral-storage, hugepages-<size>); "
            "an extended resource names its domain, as in nvidia.com/gpu",
        )
    if name.startswith("requests."):
        raise PodSpecError(path, "is not a valid resource name (must not begin with requests.)")


def overcommit_allowed(name: str) -> bool:
    """Whether a request may be below its limit. Kubernetes allows it only for its native
    resources (no domain, or a kubernetes.io one) other than hugepages: an extended resource
    (nvidia.com/gpu) is handed out whole, so its request equals its limit."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith(HUGEPAGES)


def is_whole(text: str) -> bool:
    """Whether a (valid) quantity is a whole number of units."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return False
    return (Fraction(match.group(1)) * _SUFFIXES[match.group(2)]).denominator == 1


def resource_bound(name: str) -> tuple[int, str]:
    """The most of resource `name` a job may request (cpu in thousandths), as a number and
    as text."""
    if name == "cpu":
        return MAX_CPU_MILLIS, "100000 cores"
    if name == "memory" or name.startswith(HUGEPAGES):
        return MAX_MEMORY, "1Pi"
    if name == "ephemeral-storage":
        return MAX_STORAGE, "1Ei"
    return MAX_UNITS, str(MAX_UNITS)


def whole_units_only(name: str) -> bool:
    return name not in FRACTIONAL_RESOURCES and not name.startswith(HUGEPAGES)


# Pod fields that name Kubernetes objects, and the syntax each must have.
_POD_NAMES = (
    ("hostname", names.DNS_LABEL, "a DNS label"),
    ("subdomain", names.DNS_LABEL, "a DNS label"),
    ("serviceAccountName", names.DNS_SUBDOMAIN, "a DNS subdomain"),
    ("nodeName", names.DNS_SUBDOMAIN, "a DNS subdomain"),
    ("schedulerName", names.DNS_SUBDOMAIN, "a DNS subdomain"),
)


def check_pod_fields(spec: core_v1_pb2.PodSpec, path: str) -> None:
    """Host name, subdomain, service account, node and scheduler names, when set. No
    pod-level resources (the scheduler adds up the containers'), no overhead (Kubernetes
    sets it from the RuntimeClass) and no ephemeral containers (added to running pods)."""
    for field, pattern, what in _POD_NAMES:
        value = getattr(spec, field)
        if value and not pattern.fullmatch(value):
            raise PodSpecError(f"{path}.{field}", f"{shorten(value)} is not {what}")
    if spec.HasField("resources"):
        raise PodSpecError(
            f"{path}.resources",
            "pod-level resources are not supported: set each container's resources instead",
        )
    if spec.ephemeralContainers:
        raise PodSpecError(
            f"{path}.ephemeralContainers", "cannot be set on a new pod (Kubernetes' rule)"
        )
    if spec.overhead:
        raise PodSpecError(
            f"{path}.overhead", "is set by Kubernetes from the pod's RuntimeClass, not by a job"
        )


# User and group ids, as Kubernetes bounds them.
MAX_ID = 2**31 - 1


def check_security_ids(spec: core_v1_pb2.PodSpec, path: str) -> None:
    """User and group ids of the pod's and its containers' security contexts: 0 to 2^31-1."""
    contexts: list[tuple[str, Message]] = [(f"{path}.securityContext", spec.securityContext)]
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(getattr(spec, kind)):
            contexts.append((f"{path}.{kind}[{i}].securityContext", c.securityContext))
    for where, context in contexts:
        for field, value in context.ListFields():
            if field.name in _ID_FIELDS:
                for i, v in enumerate(value if field.is_repeated else [value]):
                    at = f"{where}.{field.name}" + (f"[{i}]" if field.is_repeated else "")
                    if not 0 <= v <= MAX_ID:
                        raise PodSpecError(at, f"must be between 0 and {MAX_ID}, got {v}")


_ID_FIELDS = frozenset({"runAsUser", "runAsGroup", "fsGroup", "supplementalGroups"})


def check_volumes(spec: core_v1_pb2.PodSpec, path: str) -> None:
    """Volumes have unique DNS-label names and one source each; every container's mounts
    name one of them, at distinct paths (Kubernetes' rules)."""
    volume_names: set[str] = set()
    for i, volume in enumerate(spec.volumes):
        where = f"{path}.volumes[{i}]"
        if not names.DNS_LABEL.fullmatch(volume.name):
            raise PodSpecError(
                f"{where}.name",
                f"{shorten(volume.name)} is not a valid volume name ({names.DNS_LABEL_RULE})",
            )
        if volume.name in volume_names:
            raise PodSpecError(f"{where}.name", f"{volume.name!r} is used twice")
        volume_names.add(volume.name)
        sources = [f.name for f, _ in volume.volumeSource.ListFields()]
        if len(sources) != 1:
            raise PodSpecError(
                f"{where}.volumeSource",
                "must set exactly one volume type (emptyDir, hostPath, configMap, ...), "
                f"got {', '.join(sources) or 'none'}",
            )
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(getattr(spec, kind)):
            _check_mounts(c, f"{path}.{kind}[{i}]", volume_names)


def _check_mounts(c: core_v1_pb2.Container, path: str, volume_names: set[str]) -> None:
    mount_paths: set[str] = set()
    for i, mount in enumerate(c.volumeMounts):
        where = f"{path}.volumeMounts[{i}]"
        if mount.name not in volume_names:
            raise PodSpecError(
                f"{where}.name", f"{shorten(mount.name)} is not the name of a volume of the pod"
            )
        if not mount.mountPath:
            raise PodSpecError(f"{where}.mountPath", "must not be empty")
        if mount.mountPath in mount_paths:
            raise PodSpecError(f"{where}.mountPath", f"{shorten(mount.mountPath)} is mounted twice")
        mount_paths.add(mount.mountPath)
        if mount.subPath and (mount.subPath.startswith("/") or ".." in mount.subPath.split("/")):
            raise PodSpecError(
                f"{where}.subPath",
                f"{shorten(mount.subPath)} must be a relative path without '..'",
            )
