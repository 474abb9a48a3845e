"""Building job items and gangs from pod specs, checked before anything is sent.

A pod spec may be a `kubernetes.client.V1PodSpec`, a plain dict in Kubernetes JSON shape
(camelCase, or the snake_case of `to_dict()`), YAML text, or our protobuf `PodSpec`. Gangs are
plain jobs carrying the gang annotations, so the helpers only fill those in consistently; an
elastic pod group is a gang whose members also name their role and its minimum.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from armada_core.api import submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.jobs import SubmissionConfig, SubmissionError, validate_request
from armada_core.jobs import annotations as ann

from .k8s_convert import SpecError, to_message

#: A V1PodSpec, a dict, YAML text or a protobuf PodSpec.
PodSpecLike = Any

_ITEM_PREFIX = "job_request_items[0]."


def pod_spec(spec: PodSpecLike, path: str = "pod_spec") -> core_v1_pb2.PodSpec:
    """Our protobuf PodSpec from any accepted form; SpecError names a bad field."""
    if isinstance(spec, str):
        try:
            spec = yaml.safe_load(spec)
        except yaml.YAMLError as e:
            raise SpecError(path, f"not valid YAML: {e}") from None
        if spec is None:
            raise SpecError(path, "the YAML text is empty")
    return to_message(spec, core_v1_pb2.PodSpec, path)


def _metadata(values: Mapping[str, str] | None, path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (values or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SpecError(
                f"{path}[{key}]", f"keys and values must be strings, got {key!r}: {value!r}"
            )
        out[key] = value
    return out


def job_item(
    spec: PodSpecLike,
    *,
    priority: float = 0.0,
    namespace: str = "default",
    priority_class: str | None = None,
    client_id: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    retry_policy: str | Sequence[str] | None = None,
    external_job_uri: str = "",
    scheduler: str = "",
    ingress: Iterable[Any] = (),
    services: Iterable[Any] = (),
    check: bool = True,
) -> submit_pb2.JobSubmitRequestItem:
    """One job. `priority_class` sets the pod spec's priorityClassName; `retry_policy` names
    policies for the `armadaproject.io/retry-policy` annotation. With `check`, the item is
    validated as the server would (minus server-specific limits) and SpecError names the
    offending field, e.g. `pod_specs[0].containers[0].resources.requests`."""
    pod = pod_spec(spec)
    if priority_class is not None:
        pod.priorityClassName = priority_class
    item = submit_pb2.JobSubmitRequestItem(
        priority=priority,
        namespace=namespace,
        client_id=client_id,
        pod_specs=[pod],
        scheduler=scheduler,
        external_job_uri=external_job_uri,
    )
    item.labels.update(_metadata(labels, "labels"))
    item.annotations.update(_metadata(annotations, "annotations"))
    if retry_policy:
        names = [retry_policy] if isinstance(retry_policy, str) else list(retry_policy)
        item.annotations[ann.RETRY_POLICY] = ",".join(names)
    if external_job_uri:
        item.annotations[ann.EXTERNAL_JOB_URI] = external_job_uri
    for i, value in enumerate(ingress):
        to_message(value, item.ingress.add(), f"ingress[{i}]")
    for i, value in enumerate(services):
        to_message(value, item.services.add(), f"services[{i}]")
    if check:
        check_items([item], prefix="")
    return item


def gang_items(
    specs: PodSpecLike | Sequence[PodSpecLike],
    *,
    replicas: int | None = None,
    gang_id: str | None = None,
    minimum_cardinality: int | None = None,
    node_uniformity_label: str | None = None,
    max_hops: int | None = None,
    client_id: str = "",
    check: bool = True,
    **job: Any,
) -> list[submit_pb2.JobSubmitRequestItem]:
    """A gang: `replicas` copies of one pod spec, or one member per spec of a list.

    Members get the gang annotations (gangId, gangCardinality, and when given
    gangMinimumCardinality, gangNodeUniformityLabel and gangMaxHops). The gang id defaults
    to `client_id` (so a resubmission forms the same gang) or a random UUID; member i's
    client id is `<client_id>-<i>`. Other keyword arguments are those of `job_item`, for
    every member.
    """
    if isinstance(specs, (list, tuple)):
        if replicas is not None:
            raise SpecError("replicas", "give either a list of pod specs or replicas, not both")
        members = list(specs)
    else:
        if replicas is None or replicas < 1:
            raise SpecError(
                "replicas", f"a gang of one pod spec needs replicas >= 1, got {replicas!r}"
            )
        members = [specs] * replicas
    if not members:
        raise SpecError("pod_specs", "a gang needs at least one member")
    cardinality = len(members)
    if minimum_cardinality is not None and not 1 <= minimum_cardinality <= cardinality:
        raise SpecError(
            "minimum_cardinality",
            f"must be between 1 and the gang size {cardinality}, got {minimum_cardinality}",
        )
    extra = (
        {}
        if minimum_cardinality is None
        else {ann.GANG_MINIMUM_CARDINALITY: str(minimum_cardinality)}
    )
    return _gang(
        [_Member(spec, extra, f"members[{i}].") for i, spec in enumerate(members)],
        gang_id=gang_id,
        node_uniformity_label=node_uniformity_label,
        max_hops=max_hops,
        client_id=client_id,
        check=check,
        job=job,
    )


@dataclass(frozen=True)
class Role:
    """One role of an elastic pod group: `maximum` members run `pod_spec`, of which at least
    `minimum` must be placed for the group to start (and to keep running); the members above
    the minimum run when there is room and are preempted first. `maximum` defaults to
    `minimum`, a fixed-size role. `max_hops` bounds the network hops between any two of the
    role's members (gangRoleMaxHops); None: the group's `max_hops`, which bounds each role."""

    name: str
    pod_spec: PodSpecLike
    minimum: int = 1
    maximum: int | None = None
    max_hops: int | None = None

    @property
    def size(self) -> int:
        """How many members are submitted for this role (its maximum)."""
        return self.minimum if self.maximum is None else self.maximum

    @classmethod
    def parse(cls, value: Role | Mapping[str, Any], path: str = "role") -> Role:
        """A Role from itself or from a mapping with `name`, `minimum`, `maximum`, `maxHops`
        (or `max_hops`) and `podSpec` (or `pod_spec`): the form of job files, Airflow
        templates and orchestrator configuration, so all of them read roles the same way."""
        if isinstance(value, Role):
            return value
        if not isinstance(value, Mapping):
            raise SpecError(path, "expected a mapping with name, minimum, maximum and podSpec")
        fields: dict[str, Any] = {}
        for key, item in value.items():
            name = _ROLE_FIELDS.get(str(key))
            if name is None:
                raise SpecError(
                    f"{path}.{key}",
                    "unknown field (expected name, minimum, maximum, maxHops, podSpec)",
                )
            if name in fields:
                raise SpecError(f"{path}.{key}", f"{key} is given twice (under two names)")
            fields[name] = item
        for required in ("name", "pod_spec"):
            if fields.get(required) is None:
                raise SpecError(
                    f"{path}.{'podSpec' if required == 'pod_spec' else required}", "is required"
                )
        return cls(**fields)

    def as_dict(self) -> dict[str, Any]:
        """The mapping `parse` reads (for orchestrators that template or serialise it)."""
        return {
            "name": self.name,
            "minimum": self.minimum,
            "maximum": self.size,
            "pod_spec": self.pod_spec,
            **({} if self.max_hops is None else {"max_hops": self.max_hops}),
        }


_ROLE_FIELDS = {
    "name": "name",
    "minimum": "minimum",
    "maximum": "maximum",
    "maxHops": "max_hops",
    "max_hops": "max_hops",
    "podSpec": "pod_spec",
    "pod_spec": "pod_spec",
}


def _count(value: object, path: str) -> int:
    """A member count; digit strings too, as templating (Airflow's) renders text."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"expected a whole number, got {value!r}")
    return value


def pod_group_items(
    roles: Sequence[Role | Mapping[str, Any]],
    *,
    gang_id: str | None = None,
    node_uniformity_label: str | None = None,
    max_hops: int | None = None,
    client_id: str = "",
    check: bool = True,
    **job: Any,
) -> list[submit_pb2.JobSubmitRequestItem]:
    """An elastic pod group: a gang of every role's `maximum` members, each also carrying its
    role's name (gangRole) and minimum (gangRoleMinimum). The group starts once every role's
    minimum fits; members above a minimum are elastic, and a role falling below its minimum
    takes the whole group down. Roles may be `Role`s or mappings (`Role.parse`).

    Members come role by role in the given order; ids, node uniformity, hops and the other
    keyword arguments are as for `gang_items`, except that `max_hops` bounds the hops within
    each role (a role's own `max_hops` replaces it), not the group as a whole.
    """
    if isinstance(roles, (str, bytes, Mapping)) or not isinstance(roles, Sequence):
        raise SpecError("roles", "expected a list of roles")
    if not roles:
        raise SpecError("roles", "a pod group needs at least one role")
    members: list[_Member] = []
    seen: dict[str, int] = {}
    for r, value in enumerate(roles):
        path = f"roles[{r}]"
        role = Role.parse(value, path)
        if not isinstance(role.name, str) or not role.name.strip():
            raise SpecError(f"{path}.name", f"must be a non-empty string, got {role.name!r}")
        if role.name in seen:
            raise SpecError(
                f"{path}.name", f"{role.name!r} is already the name of roles[{seen[role.name]}]"
            )
        seen[role.name] = r
        minimum = _count(role.minimum, f"{path}.minimum")
        maximum = minimum if role.maximum is None else _count(role.maximum, f"{path}.maximum")
        if maximum < 1:
            raise SpecError(f"{path}.maximum", f"must be at least 1, got {maximum}")
        if not 1 <= minimum <= maximum:
            raise SpecError(
                f"{path}.minimum",
                f"must be between 1 and the role's maximum {maximum}, got {minimum}",
            )
        spec = pod_spec(role.pod_spec, f"{path}.pod_spec")
        extra = {ann.GANG_ROLE: role.name, ann.GANG_ROLE_MINIMUM: str(minimum)}
        if role.max_hops is not None:
            hops = _count(role.max_hops, f"{path}.max_hops")
            if hops < 0:
                raise SpecError(f"{path}.max_hops", f"must be 0 (one node) or more, got {hops}")
            extra[ann.GANG_ROLE_MAX_HOPS] = str(hops)
        members += [_Member(spec, extra, f"{path}.")] * maximum
    if ann.GANG_MINIMUM_CARDINALITY in (job.get("annotations") or {}):
        raise SpecError(
            f"annotations[{ann.GANG_MINIMUM_CARDINALITY}]",
            "a pod group's minimums are its roles' (Role.minimum)",
        )
    return _gang(
        members,
        gang_id=gang_id,
        node_uniformity_label=node_uniformity_label,
        max_hops=max_hops,
        client_id=client_id,
        check=check,
        job=job,
    )


@dataclass(frozen=True)
class _Member:
    """One gang member to build: its pod spec, the annotations only it has (on top of the
    gang's), and how an error in it is named."""

    spec: PodSpecLike
    annotations: Mapping[str, str]
    path: str


def _gang(
    members: Sequence[_Member],
    *,
    gang_id: str | None,
    node_uniformity_label: str | None,
    max_hops: int | None,
    client_id: str,
    check: bool,
    job: dict[str, Any],
) -> list[submit_pb2.JobSubmitRequestItem]:
    """The one path behind gangs and pod groups: the gang annotations on every member, each
    member's own on top, none contradicting the caller's annotations."""
    gang = gang_id or client_id or str(uuid.uuid4())
    annotations = dict(job.pop("annotations", None) or {})
    wanted = {ann.GANG_ID: gang, ann.GANG_CARDINALITY: str(len(members))}
    if node_uniformity_label:
        wanted[ann.GANG_NODE_UNIFORMITY_LABEL] = node_uniformity_label
    if max_hops is not None:
        if max_hops < 0:
            raise SpecError("max_hops", f"must be 0 (one node) or more, got {max_hops}")
        wanted[ann.GANG_MAX_HOPS] = str(max_hops)
    items: list[submit_pb2.JobSubmitRequestItem] = []
    for i, member in enumerate(members):
        own = {**wanted, **member.annotations}
        for key, value in own.items():
            if annotations.get(key, value) != value:
                raise SpecError(
                    f"annotations[{key}]",
                    f"{annotations[key]!r} contradicts the gang helper's {value!r}",
                )
        try:
            items.append(
                job_item(
                    member.spec,
                    annotations={**annotations, **own},
                    check=False,
                    client_id=f"{client_id}-{i}" if client_id else "",
                    **job,
                )
            )
        except SpecError as e:
            raise SpecError(f"{member.path}{e.path}", e.problem) from None
    if check:
        check_items(items)
    return items


def client_check_config(items: Iterable[submit_pb2.JobSubmitRequestItem]) -> SubmissionConfig:
    """Server rules a client can check without knowing the server's configuration: any
    priority class and grace period are left to the server to judge."""
    classes = {spec.priorityClassName for item in items for spec in item.pod_specs}
    classes |= {item.pod_spec.priorityClassName for item in items}
    return SubmissionConfig(
        priority_classes=frozenset(classes - {""}) | {"armada-default"},
        max_grace_period_seconds=2**62,
        default_active_deadline_seconds=None,
    )


def check_items(
    items: Sequence[submit_pb2.JobSubmitRequestItem],
    *,
    queue: str = "queue",
    job_set_id: str = "job-set",
    prefix: str | None = None,
) -> None:
    """Raise SpecError for the first problem the server would reject the request for.

    `prefix=""` drops the `job_request_items[0].` prefix from paths (single items).
    """
    request = submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id=job_set_id, job_request_items=items
    )
    try:
        validate_request(request, client_check_config(items))
    except SubmissionError as e:
        path = e.path
        if prefix is not None and path.startswith(_ITEM_PREFIX):
            path = prefix + path[len(_ITEM_PREFIX) :]
        raise SpecError(path, e.problem) from None
