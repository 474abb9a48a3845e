"""Turning a JobSubmitRequest into jobs: validation, defaults, and the stored job.

Validation is all or nothing: the first problem raises SubmissionError naming the item and the
field (`job_request_items[3].pod_specs[0].terminationGracePeriodSeconds: ...`), so a request is
either accepted whole or not at all. Defaults follow seed 000: a grace period of 0 s becomes 1 s,
a missing deadline gets the configured default, a missing priority class the default class.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from google.protobuf.message import Message

from armada_core.api import submit_pb2
from armada_core.api.k8s import core_v1_pb2 as core
from armada_core.jobs import annotations as ann
from armada_core.jobs import names, podspec
from armada_core.jobs.errors import SubmissionError
from armada_core.jobs.gangs import GangAnnotationError, GangSpec, gang_of
from armada_core.jobs.grace import DEFAULT_GRACE_PERIOD_SECONDS, MINIMUM_GRACE_PERIOD_SECONDS
from armada_core.jobs.lifecycle import timestamp
from armada_core.jobs.text import key_in_path, shorten
from armada_core.scheduling.model import MAX_EXPONENT, Resources, parse_quantity

# Matched whole (fullmatch): "$" alone would accept a trailing newline ("default\n").
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DIGITS = re.compile(r"[0-9]{1,19}")


# Lengths of the columns these values are stored in: every storage backend must accept and
# refuse the same requests (SQLite would store a longer value, PostgreSQL would not).
MAX_JOB_SET_ID = 1024
MAX_CLIENT_ID = 1024
MAX_EXTERNAL_JOB_URI = 2048
MAX_GANG_ID = 1024
# Kubernetes caps a quantity at 2^63-1 (in thousandths for cpu); the scheduler counts in int64.
MAX_QUANTITY = 2**63 - 1
# A quantity's text is screened before it is parsed: "1e99999999" would take minutes to expand.
MAX_QUANTITY_TEXT = 64
_EXPONENT = re.compile(r"[eE][+-]?([0-9]+)")
# A job travels whole in the executor protocol's leases, whose messages executors receive
# with gRPC's default 4 MiB limit: a job is at most 1 MiB as protobuf, its annotations at most
# 256 KiB in total (Kubernetes' own limit on a pod's annotations).
MAX_JOB_BYTES = 1024 * 1024
MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_SCHEDULER = 253
# Gangs of more members than this are refused: the scheduler places a gang in one step.
MAX_GANG_CARDINALITY = 10_000
# gangMaxHops above this are refused: each topology level adds 2 hops, and no network has
# hundreds of levels.
MAX_GANG_HOPS = 1000
MAX_LIFETIME_SECONDS = 10 * 365 * 24 * 3600
# Kubernetes' bound on a pod's activeDeadlineSeconds.
MAX_ACTIVE_DEADLINE_SECONDS = 2**31 - 1

__all__ = ["SubmissionError"]


@dataclass(frozen=True)
class SubmissionConfig:
    """Server-side rules for submissions."""

    priority_classes: frozenset[str] = frozenset({"armada-default", "armada-preemptible"})
    default_priority_class: str = "armada-default"
    default_grace_period_seconds: int = DEFAULT_GRACE_PERIOD_SECONDS
    max_grace_period_seconds: int = 300
    # Added to jobs that set no activeDeadlineSeconds; None adds nothing.
    default_active_deadline_seconds: int | None = 7 * 24 * 3600
    # Upper bound on what one job may request, as Kubernetes quantities; empty means no bound.
    max_job_resources: Mapping[str, str] = field(default_factory=dict)
    default_namespace: str = "default"


class CheckedItems(list[submit_pb2.JobSubmitRequestItem]):
    """A request's items as checked, and for each the index of the first item it is alike
    (the same but for its client id), which storage builds once for all of them
    (`storage/new_jobs.py`) without serialising each item again to find out."""

    def __init__(self) -> None:
        super().__init__()
        self.alike: list[int] = []


def validate_request(
    request: submit_pb2.JobSubmitRequest, config: SubmissionConfig
) -> CheckedItems:
    """Check a whole request and return its items with defaults applied (copies)."""
    _check_name("queue", request.queue)
    if not request.job_set_id:
        raise SubmissionError("job_set_id", "must not be empty")
    check_text("job_set_id", request.job_set_id, MAX_JOB_SET_ID)
    if not request.job_request_items:
        raise SubmissionError("job_request_items", "must contain at least one job")
    checked = _Checked(config)
    # Items that differ only in their client ids (most of a large request) are checked once.
    firsts: dict[bytes, tuple[int, submit_pb2.JobSubmitRequestItem]] = {}
    several = len(request.job_request_items) > 1
    items = CheckedItems()
    for i, item in enumerate(request.job_request_items):
        path = f"job_request_items[{i}]"
        key = without_client_id(item) if several else b""
        found = firsts.get(key)
        if found is None:
            first, out = i, _validate_item(item, path, config, checked)
            firsts[key] = (i, out)
        else:  # as the first was, but for its own client id
            check_text(f"{path}.client_id", item.client_id, MAX_CLIENT_ID)
            # Its size is the key's and its client id's field, at most this: measured only
            # when that could be over the limit.
            if len(key) + 4 * len(item.client_id) + 16 > MAX_JOB_BYTES:
                _check_size(item, path)
            first, out = found[0], submit_pb2.JobSubmitRequestItem()
            out.CopyFrom(found[1])
            out.client_id = item.client_id
        items.append(out)
        items.alike.append(first)
    _check_gangs(items)
    return items


def without_client_id(item: submit_pb2.JobSubmitRequestItem) -> bytes:
    """`item` serialised without its client id: the same for items that differ only there."""
    client_id = item.client_id
    item.client_id = ""
    try:
        return item.SerializeToString(deterministic=True)
    finally:
        item.client_id = client_id


# Pod specs checked lately (as serialized before their defaults -> as checked), for the config
# they were checked against. Items of one request usually share their pod spec, and clients
# submitting one job per request (orchestrators' tasks) send the same few specs again and
# again: checking one took 100-200 us. A spec is checked again once the config changes.
_RECENT_KEPT = 1024
_RECENT_BYTES = 16 * 1024  # larger specs are kept for their own request only
_recent: tuple[SubmissionConfig, dict[bytes, core.PodSpec]] | None = None


class _Checked:
    """The pod specs a request need not check again: its own, and small ones checked lately
    against the same config (by any request)."""

    def __init__(self, config: SubmissionConfig) -> None:
        global _recent
        held = _recent
        if held is None or not (held[0] is config or held[0] == config):
            held = _recent = (config, {})
        elif len(held[1]) >= _RECENT_KEPT:
            held[1].clear()
        self.recent = held[1]
        self.own: dict[bytes, core.PodSpec] = {}

    def get(self, serialized: bytes) -> core.PodSpec | None:
        found = self.recent.get(serialized)
        return found if found is not None else self.own.get(serialized)

    def add(self, serialized: bytes, spec: core.PodSpec) -> None:
        kept = core.PodSpec()
        kept.CopyFrom(spec)  # the item's own spec is its caller's to change
        small = len(serialized) <= _RECENT_BYTES
        (self.recent if small else self.own)[serialized] = kept


def check_text(path: str, value: str, limit: int) -> None:
    """A string stored in a column: no NUL characters, at most `limit` characters."""
    if not isinstance(value, str):  # protobuf hands back invalid UTF-8 as bytes
        raise SubmissionError(path, "not valid UTF-8")
    if "\x00" in value:
        raise SubmissionError(path, "must not contain NUL characters")
    if len(value) > limit:
        raise SubmissionError(path, f"must be at most {limit} characters, got {len(value)}")


def job_from_item(
    item: submit_pb2.JobSubmitRequestItem,
    *,
    job_id: str,
    queue: str,
    job_set_id: str,
    owner: str,
    now: datetime,
    groups: tuple[str, ...] = (),
) -> submit_pb2.Job:
    """The job as stored (and carried by its `submitted` event)."""
    # Repeated fields are passed only when set, and times and requests come from memos: a
    # request of thousands of items calls this per item.
    job = submit_pb2.Job(
        id=job_id,
        client_id=item.client_id,
        job_set_id=job_set_id,
        queue=queue,
        namespace=item.namespace,
        owner=owner,
        priority=item.priority,
        scheduler=item.scheduler,
    )
    job.pod_specs.extend(item.pod_specs)
    if groups:
        job.queue_ownership_user_groups.extend(groups)
    if item.ingress:
        job.ingress.extend(item.ingress)
    if item.services:
        job.services.extend(item.services)
    if item.labels:
        job.labels.update(item.labels)
    if item.annotations:
        job.annotations.update(item.annotations)
    if item.external_job_uri:
        job.annotations[ann.EXTERNAL_JOB_URI] = item.external_job_uri
    job.created.CopyFrom(timestamp(now if now.tzinfo is not None else now.astimezone(UTC)))
    job.scheduling_resource_requirements.CopyFrom(
        _resource_requirements(job.pod_specs[0].SerializeToString())
    )
    return job


@functools.lru_cache(maxsize=1024)
def _resource_requirements(spec: bytes) -> core.ResourceRequirements:
    # Keyed on the serialised spec: jobs submitted together mostly share one. Callers copy it.
    requirements = core.ResourceRequirements()
    for name, quantity in sorted(job_requests(core.PodSpec.FromString(spec)).items()):
        requirements.requests[name].string = _format(name, quantity)
    return requirements


def job_requests(pod_spec: core.PodSpec) -> Resources:
    """What a pod needs from a node: the sum over containers, at least any init container."""
    return _total(
        [_effective_requests(c) for c in pod_spec.containers],
        [_effective_requests(c) for c in pod_spec.initContainers],
    )


def _total(containers: list[dict[str, int]], init_containers: list[dict[str, int]]) -> Resources:
    total: dict[str, int] = {}
    for requests in containers:
        for name, q in requests.items():
            total[name] = total.get(name, 0) + q
    for requests in init_containers:
        for name, q in requests.items():
            total[name] = max(total.get(name, 0), q)
    return Resources(total)


def _effective_requests(container: core.Container) -> dict[str, int]:
    # Kubernetes defaults a request to its limit when only the limit is given.
    raw = {k: v.string for k, v in container.resources.limits.items()}
    raw.update({k: v.string for k, v in container.resources.requests.items()})
    return {k: parse_quantity(v, milli=(k == "cpu")) for k, v in raw.items()}


def _format(name: str, quantity: int) -> str:
    return f"{quantity}m" if name == "cpu" else str(quantity)


def _check_name(path: str, value: str) -> None:
    if not value:
        raise SubmissionError(path, "must not be empty")
    if not _NAME.fullmatch(value):
        raise SubmissionError(
            path,
            f"{shorten(value)} is not a valid name (letters, digits, "
            "'-', '_' and '.', at most 63 characters)",
        )


def _validate_item(
    item: submit_pb2.JobSubmitRequestItem,
    path: str,
    config: SubmissionConfig,
    checked: _Checked,
) -> submit_pb2.JobSubmitRequestItem:
    out = submit_pb2.JobSubmitRequestItem()
    out.CopyFrom(item)
    check_text(f"{path}.client_id", out.client_id, MAX_CLIENT_ID)
    check_text(f"{path}.external_job_uri", out.external_job_uri, MAX_EXTERNAL_JOB_URI)
    if not math.isfinite(out.priority) or out.priority < 0:
        raise SubmissionError(
            f"{path}.priority", f"must be a non-negative number, got {out.priority}"
        )
    if out.HasField("pod_spec"):
        if out.pod_specs:
            raise SubmissionError(f"{path}.pod_spec", "set either pod_spec or pod_specs, not both")
        out.pod_specs.append(out.pod_spec)
        out.ClearField("pod_spec")
    if len(out.pod_specs) != 1:
        raise SubmissionError(
            f"{path}.pod_specs", f"exactly one pod spec is supported, got {len(out.pod_specs)}"
        )
    # Labels and annotations first: a 10 MB annotation is named as such, not as a job too large.
    _check_metadata(out, path)
    _check_size(out, path)
    if out.required_node_labels:
        # Deprecated upstream: carried on as the pod's node selector.
        for k, v in out.required_node_labels.items():
            out.pod_specs[0].nodeSelector[k] = v
        out.ClearField("required_node_labels")
    out.namespace = out.namespace or config.default_namespace
    if not names.DNS_LABEL.fullmatch(out.namespace):
        raise SubmissionError(
            f"{path}.namespace",
            f"{shorten(out.namespace)} is not a valid Kubernetes namespace (a DNS label)",
        )
    if out.scheduler:
        check_text(f"{path}.scheduler", out.scheduler, MAX_SCHEDULER)
        podspec.check_string(f"{path}.scheduler", out.scheduler)
    if out.ingress or out.services:
        _check_exposure(out, path)
    spec = out.pod_specs[0]
    serialized = spec.SerializeToString()
    valid = checked.get(serialized)
    if valid is None:
        _validate_pod_spec(spec, f"{path}.pod_specs[0]", config)
        checked.add(serialized, spec)
    else:
        spec.CopyFrom(valid)
    return out


def _check_size(item: submit_pb2.JobSubmitRequestItem, path: str) -> None:
    size = item.ByteSize()
    if size > MAX_JOB_BYTES:
        field, field_size = largest_field(item, path)
        raise SubmissionError(
            field,
            f"the job is {size} bytes, above the limit of "
            f"{MAX_JOB_BYTES} (1 MiB); this field holds "
            f"{field_size} bytes of it",
        )


def _check_metadata(item: submit_pb2.JobSubmitRequestItem, path: str) -> None:
    """Labels, annotations, and the options and gangs annotations declare."""
    podspec.check_labels(f"{path}.labels", item.labels)
    _check_annotations(f"{path}.annotations", item.annotations)
    _check_options(f"{path}.annotations", item.annotations)
    for key, limit in ((ann.EXTERNAL_JOB_URI, MAX_EXTERNAL_JOB_URI), (ann.GANG_ID, MAX_GANG_ID)):
        if key in item.annotations:
            check_text(f"{path}.annotations[{key}]", item.annotations[key], limit)
    try:
        gang_of(item.annotations)
    except GangAnnotationError as e:
        raise SubmissionError(f"{path}.annotations", str(e)) from None
    if ann.GANG_ID in item.annotations:
        _check_gang_values(f"{path}.annotations", item.annotations)


def largest_field(message: Message, path: str) -> tuple[str, int]:
    """The path and size of the largest field in `message` (or of one value in it, when that
    value makes up most of the field): what to name when a job is too large."""
    best, best_size = path, -1
    for fd, value in message.ListFields():
        name = f"{path}.{fd.name}"
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            # A map entry's size counts its key: a 10 MB key is named as the large part.
            sizes = [
                (
                    _size(k) + _size(v),
                    f"{name}[{key_in_path(k) if isinstance(k, str) else k}]",
                    v,
                )
                for k, v in value.items()
            ]
        else:
            elements = (
                [(f"{name}[{i}]", v) for i, v in enumerate(value)]
                if fd.is_repeated
                else [(name, value)]
            )
            sizes = [(_size(v), where, v) for where, v in elements]
        size = sum(s for s, _, _ in sizes)
        if size <= best_size:
            continue
        best, best_size = name, size
        largest, where, v = max(sizes, key=lambda s: s[0])
        if largest * 2 > size:  # one value makes up most of the field: name that
            best = where
            if isinstance(v, Message):
                inner, inner_size = largest_field(v, where)
                if inner_size * 2 > largest:
                    best = inner
    return best, best_size


def _size(value: object) -> int:
    if isinstance(value, Message):
        return value.ByteSize()
    if isinstance(value, str):
        return len(value.encode("utf-8", errors="replace"))
    return len(value) if isinstance(value, bytes) else 8


def _check_annotations(path: str, annotations: Mapping[str, str]) -> None:
    """Kubernetes' rules: qualified-name keys (in lower case), at most 256 KiB of keys and
    values together, counted in bytes as UTF-8."""
    key_ok, bad_text = names.is_annotation_key, podspec.CONTROL_IN_FREE_TEXT.search
    characters = 0
    for key, value in annotations.items():  # the common case, fast
        if not key_ok(key) or bad_text(value):
            break
        characters += len(key) + len(value)
    else:
        if characters * 4 <= MAX_ANNOTATIONS_BYTES:  # UTF-8: at most 4 bytes a character
            return
        sizes = {k: len(k.encode()) + len(v.encode()) for k, v in annotations.items()}
        total = sum(sizes.values())
        if total <= MAX_ANNOTATIONS_BYTES:
            return
        key = max(sorted(sizes), key=sizes.__getitem__)  # sorted: ties name the same key
        raise SubmissionError(
            f"{path}[{key_in_path(key)}]",
            f"the annotations hold {total} bytes, above the limit of {MAX_ANNOTATIONS_BYTES} "
            f"(256 KiB); this one holds {sizes[key]}",
        )
    for key, value in sorted(annotations.items()):  # sorted: the same first error every time
        podspec.check_label_key(path, key, annotation=True)
        podspec.check_string(f"{path}[{key}]", value, free=True)


def _check_exposure(item: submit_pb2.JobSubmitRequestItem, path: str) -> None:
    """Ingresses and services name container ports."""
    for kind in ("ingress", "services"):
        for i, config in enumerate(getattr(item, kind)):
            where = f"{path}.{kind}[{i}]"
            podspec.check_texts(config, where)
            for j, port in enumerate(config.ports):
                if not 1 <= port <= 65535:
                    raise SubmissionError(
                        f"{where}.ports[{j}]", f"must be between 1 and 65535, got {port}"
                    )
    for i, config in enumerate(item.ingress):
        for key in config.annotations:
            podspec.check_label_key(f"{path}.ingress[{i}].annotations", key, annotation=True)


def _check_gang_values(path: str, annotations: Mapping[str, str]) -> None:
    """Gang sizes are plain decimal numbers of at most MAX_GANG_CARDINALITY (`1e20` is not);
    gangMaxHops and gangRoleMaxHops plain decimal numbers of at most MAX_GANG_HOPS; the
    uniformity label a
    label key (the scheduler matches it against node labels)."""
    label = annotations.get(ann.GANG_NODE_UNIFORMITY_LABEL)
    if label and not names.is_label_key(label):
        raise SubmissionError(
            f"{path}[{ann.GANG_NODE_UNIFORMITY_LABEL}]",
            f"{shorten(label)} is not a valid label key ({names.KEY_RULE})",
        )
    for key in (ann.GANG_CARDINALITY, ann.GANG_MINIMUM_CARDINALITY):
        raw = annotations.get(key)
        if raw and (not _DIGITS.fullmatch(raw) or int(raw) > MAX_GANG_CARDINALITY):
            raise SubmissionError(
                f"{path}[{key}]",
                f"must be a whole number between 1 and {MAX_GANG_CARDINALITY}, got {shorten(raw)}",
            )
    for key in (ann.GANG_MAX_HOPS, ann.GANG_ROLE_MAX_HOPS):
        raw = annotations.get(key)
        if raw and (not _DIGITS.fullmatch(raw) or int(raw) > MAX_GANG_HOPS):
            raise SubmissionError(
                f"{path}[{key}]",
                f"must be a whole number of network hops between 0 (one node) "
                f"and {MAX_GANG_HOPS}, got {shorten(raw)}",
            )


def _check_options(path: str, annotations: Mapping[str, str]) -> None:
    for key in (ann.AT_MOST_ONCE, ann.PREEMPTIBLE):
        if key in annotations and annotations[key].lower() not in ("true", "false"):
            raise SubmissionError(
                f"{path}[{key}]", f"must be true or false, got {shorten(annotations[key])}"
            )
    if ann.LIFETIME in annotations:
        raw = annotations[ann.LIFETIME]
        if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= MAX_LIFETIME_SECONDS:
            raise SubmissionError(
                f"{path}[{ann.LIFETIME}]",
                f"must be a positive number of "
                f"seconds, at most "
                f"{MAX_LIFETIME_SECONDS}, got "
                f"{shorten(raw)}",
            )


def _validate_pod_spec(spec: core.PodSpec, path: str, config: SubmissionConfig) -> None:
    podspec.check_texts(spec, path)  # first: the checks below may assume clean text
    if not spec.priorityClassName:
        spec.priorityClassName = config.default_priority_class
    elif spec.priorityClassName not in config.priority_classes:
        known = ", ".join(sorted(config.priority_classes))
        raise SubmissionError(
            f"{path}.priorityClassName",
            f"unknown priority class {shorten(spec.priorityClassName)} (known: {known})",
        )
    if spec.restartPolicy not in ("", "Never"):
        raise SubmissionError(
            f"{path}.restartPolicy",
            f"Armada jobs never restart in place; use Never, got {shorten(spec.restartPolicy)}",
        )
    spec.restartPolicy = "Never"
    if not spec.HasField("terminationGracePeriodSeconds"):
        spec.terminationGracePeriodSeconds = config.default_grace_period_seconds
    grace = spec.terminationGracePeriodSeconds
    if grace == 0:
        # 0 would force-delete the pod (seed 000)
        spec.terminationGracePeriodSeconds = MINIMUM_GRACE_PERIOD_SECONDS
    elif grace < 0:
        raise SubmissionError(
            f"{path}.terminationGracePeriodSeconds",
            f"must be between 1 and {config.max_grace_period_seconds} seconds, got {grace}",
        )
    elif grace > config.max_grace_period_seconds:
        raise SubmissionError(
            f"{path}.terminationGracePeriodSeconds",
            f"{grace} s is above the maximum of {config.max_grace_period_seconds} s",
        )
    if spec.HasField("activeDeadlineSeconds"):
        if spec.activeDeadlineSeconds <= 0:
            raise SubmissionError(f"{path}.activeDeadlineSeconds", "must be positive")
        if spec.activeDeadlineSeconds > MAX_ACTIVE_DEADLINE_SECONDS:
            raise SubmissionError(
                f"{path}.activeDeadlineSeconds",
                f"must be at most {MAX_ACTIVE_DEADLINE_SECONDS}, got {spec.activeDeadlineSeconds}",
            )
    elif config.default_active_deadline_seconds is not None:
        spec.activeDeadlineSeconds = config.default_active_deadline_seconds
    if not spec.containers:
        raise SubmissionError(f"{path}.containers", "a pod needs at least one container")
    podspec.check_scheduling(spec, path)
    podspec.check_pod_fields(spec, path)
    podspec.check_volumes(spec, path)
    podspec.check_security_ids(spec, path)
    seen: set[str] = set()
    effective = {
        kind: [
            _validate_container(c, f"{path}.{kind}[{i}]", seen, init=(kind == "initContainers"))
            for i, c in enumerate(getattr(spec, kind))
        ]
        for kind in ("initContainers", "containers")
    }
    total = _total(effective["containers"], effective["initContainers"])
    for name, amount in total.items():
        bound, text = podspec.resource_bound(name)
        if amount > bound:
            raise SubmissionError(
                f"{path}.containers",
                f"the pod requests more {name} than the maximum of {text} in total",
            )
    if config.max_job_resources:
        for name, limit in config.max_job_resources.items():
            bound = parse_quantity(limit, milli=(name == "cpu"))
            if total.get(name, 0) > bound:
                raise SubmissionError(
                    f"{path}.containers",
                    f"the job requests more {name} than the maximum of {limit} per job",
                )


def _validate_container(
    c: core.Container, path: str, seen: set[str], *, init: bool
) -> dict[str, int]:
    """Check a container; returns what it requests (a limit stands in for a missing request)."""
    if not names.DNS_LABEL.fullmatch(c.name):
        raise SubmissionError(
            f"{path}.name",
            f"{shorten(c.name)} is not a valid container name ({names.DNS_LABEL_RULE})",
        )
    if c.name in seen:
        raise SubmissionError(f"{path}.name", f"container name {c.name!r} is used twice")
    seen.add(c.name)
    podspec.check_container_fields(c, path, init=init)
    parsed: dict[str, dict[str, int]] = {}
    for kind in ("requests", "limits"):
        parsed[kind] = {}
        for name, q in sorted(getattr(c.resources, kind).items()):
            where = f"{path}.resources.{kind}[{name}]"
            podspec.check_resource_name(where, name)
            parsed[kind][name] = _quantity(where, name, q.string)
    effective = {**parsed["limits"], **parsed["requests"]}
    for name in ("cpu", "memory"):
        if name not in effective:
            raise SubmissionError(
                f"{path}.resources.requests", f"must request {name} (requests or limits)"
            )
    for name, req in parsed["requests"].items():
        lim = parsed["limits"].get(name)
        if lim is not None and req > lim:
            raise SubmissionError(f"{path}.resources.requests[{name}]", "is greater than its limit")
        if req != lim and not podspec.overcommit_allowed(name):
            raise SubmissionError(
                f"{path}.resources.requests[{name}]",
                f"{c.resources.requests[name].string!r} must equal its limit of "
                f"{c.resources.limits[name].string!r} ({name} cannot be overcommitted)"
                if lim is not None
                else f"{name} cannot be overcommitted: set its limit too, equal to the "
                "request (or the limit alone)",
            )
    return effective


def _quantity(path: str, name: str, text: str) -> int:
    if not isinstance(text, str):  # protobuf hands back invalid UTF-8 as bytes
        raise SubmissionError(path, "not valid UTF-8")
    if text != text.strip():
        raise SubmissionError(
            path, f"{text[:80]!r} is not a valid quantity: it must not begin or end with spaces"
        )
    exponent = _EXPONENT.search(text) if ("e" in text or "E" in text) else None
    if len(text) > MAX_QUANTITY_TEXT or (exponent and int(exponent.group(1)) > MAX_EXPONENT):
        raise SubmissionError(
            path,
            f"{text[:80]!r} is not a quantity this server accepts (at "
            f"most {MAX_QUANTITY_TEXT} characters, exponents up to "
            f"{MAX_EXPONENT})",
        )
    try:
        value = parse_quantity(text, milli=(name == "cpu"))
    except ValueError:
        raise SubmissionError(path, f"{text!r} is not a valid quantity") from None
    if value > MAX_QUANTITY:
        raise SubmissionError(path, f"{text!r} is out of range (a quantity is at most 2^63-1)")
    bound, bound_text = podspec.resource_bound(name)
    if value > bound:
        raise SubmissionError(path, f"{text!r} is above the maximum of {bound_text}")
    if podspec.whole_units_only(name) and not podspec.is_whole(text):
        raise SubmissionError(path, f"{text!r}: {name} is counted in whole units")
    return value


def _check_role_hops(
    i: int, gang: GangSpec, seen: dict[tuple[str, str], tuple[int, int | None]]
) -> None:
    """Members of a role agree on its maximum hops (``seen``: the first member's, per role)."""
    at, hops = seen.setdefault((gang.id, gang.role), (i, gang.role_max_hops))
    if hops != gang.role_max_hops:
        raise SubmissionError(
            f"job_request_items[{i}].annotations[{ann.GANG_ROLE_MAX_HOPS}]",
            f"{gang.role_max_hops!r} differs from job_request_items[{at}] ({hops!r}) for "
            f"role {gang.role!r} of gang {gang.id!r}",
        )


def _check_gangs(items: CheckedItems) -> None:
    """Members of one gang in one request must agree on everything that defines the gang,
    and in a pod group (roles) every member has a role, and members of a role agree on its
    minimum and its maximum hops."""
    first: dict[str, tuple[int, GangSpec, str]] = {}
    members: dict[str, int] = {}
    roles: dict[tuple[str, str], tuple[int, int | None, int]] = {}
    role_hops: dict[tuple[str, str], tuple[int, int | None]] = {}
    gangs: dict[int, GangSpec | None] = {}  # by the first of the items alike: read once
    for i, item in enumerate(items):
        alike = items.alike[i]
        gang = gangs[alike] if alike in gangs else gangs.setdefault(i, gang_of(item.annotations))
        if gang is None:
            continue
        pc = item.pod_specs[0].priorityClassName
        members[gang.id] = members.get(gang.id, 0) + 1
        if gang.role:
            at, minimum, count = roles.get((gang.id, gang.role), (i, gang.role_minimum, 0))
            if minimum != gang.role_minimum:
                raise SubmissionError(
                    f"job_request_items[{i}].annotations[{ann.GANG_ROLE_MINIMUM}]",
                    f"{gang.role_minimum!r} differs from job_request_items[{at}] "
                    f"({minimum!r}) for role {gang.role!r} of gang {gang.id!r}",
                )
            roles[(gang.id, gang.role)] = (at, minimum, count + 1)
            _check_role_hops(i, gang, role_hops)
        if gang.id not in first:
            first[gang.id] = (i, gang, pc)
            continue
        j, other, other_pc = first[gang.id]
        path = f"job_request_items[{i}]"
        if bool(gang.role) != bool(other.role):
            k = i if not gang.role else j
            raise SubmissionError(
                f"job_request_items[{k}].annotations[{ann.GANG_ROLE}]",
                f"missing: every member of pod group {gang.id!r} names its role",
            )
        for what, mine, theirs in (
            ("gangCardinality", gang.cardinality, other.cardinality),
            ("gangMinimumCardinality", gang.minimum_cardinality, other.minimum_cardinality),
            ("gangNodeUniformityLabel", gang.node_uniformity_label, other.node_uniformity_label),
            ("gangMaxHops", gang.max_hops, other.max_hops),
        ):
            if mine != theirs:
                raise SubmissionError(
                    f"{path}.annotations[{ann.PREFIX}{what}]",
                    f"{mine!r} differs from job_request_items[{j}] ({theirs!r}) in gang "
                    f"{gang.id!r}",
                )
        if pc != other_pc:
            raise SubmissionError(
                f"{path}.pod_specs[0].priorityClassName",
                f"{pc!r} differs from job_request_items[{j}] ({other_pc!r}) in gang {gang.id!r}",
            )
    for gang_id, count in members.items():
        _, gang, _ = first[gang_id]
        if count > gang.cardinality:
            raise SubmissionError(
                "job_request_items",
                f"gang {gang_id!r} has {count} members but "
                f"{ann.GANG_CARDINALITY} is {gang.cardinality}",
            )
    for (gang_id, role), (at, minimum, count) in roles.items():
        # A whole group in one request: each role needs at least its minimum of members.
        if (
            members[gang_id] == first[gang_id][1].cardinality
            and minimum is not None
            and (count < minimum)
        ):
            raise SubmissionError(
                f"job_request_items[{at}].annotations[{ann.GANG_ROLE_MINIMUM}]",
                f"role {role!r} of gang {gang_id!r} has {count} members, fewer than its "
                f"minimum {minimum}",
            )
