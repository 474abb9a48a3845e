"""Upstream's job file: the YAML that `armadactl submit` reads.

    queue: team-a
    jobSetId: nightly
    jobs:
      - priority: 0
        namespace: default
        clientId: nightly-0          # optional, makes resubmission idempotent
        labels: {}
        annotations: {}              # gangs: armadaproject.io/gangId, gangCardinality, ...
        podSpec: {...}               # or podSpecs: [{...}]
        ingress: [] / services: [] / scheduler: / externalJobUri:
      - clientId: train              # an elastic pod group instead of podSpec: one job per
        podGroup:                    # member, every other field applying to each member
          gangId: train              # optional (default clientId, else random)
          nodeUniformityLabel: rack  # optional
          maxHops: 2                 # optional
          roles:
            - {name: coordinator, minimum: 1, maximum: 1, podSpec: {...}}
            - {name: worker, minimum: 2, maximum: 4, podSpec: {...}}

Several requests may share a file as YAML documents separated by `---`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

import yaml

from armada_core.api import submit_pb2

from .builders import check_items, pod_group_items
from .k8s_convert import SpecError, to_message

_TOP = {
    "queue": "queue",
    "jobSetId": "job_set_id",
    "job_set_id": "job_set_id",
    "jobSet": "job_set_id",
    "jobs": "jobs",
}


@dataclass(frozen=True)
class JobRequest:
    """One document of a job file: what one SubmitJobs call sends."""

    queue: str
    job_set_id: str
    items: tuple[submit_pb2.JobSubmitRequestItem, ...]

    def to_proto(self) -> submit_pb2.JobSubmitRequest:
        return submit_pb2.JobSubmitRequest(
            queue=self.queue, job_set_id=self.job_set_id, job_request_items=self.items
        )


def parse_job_request(data: object, path: str = "", *, check: bool = True) -> JobRequest:
    """A JobRequest from one parsed document."""

    def at(key: str) -> str:
        return f"{path}{key}"

    if not isinstance(data, Mapping):
        raise SpecError(
            path.rstrip(": ") or "document", "expected a mapping with queue, jobSetId and jobs"
        )
    values: dict[str, object] = {}
    for key, value in data.items():
        if key not in _TOP:
            raise SpecError(at(str(key)), "unknown field (expected queue, jobSetId, jobs)")
        values[_TOP[key]] = value
    for key, label in (("queue", "queue"), ("job_set_id", "jobSetId")):
        if not isinstance(values.get(key), str) or not values[key]:
            raise SpecError(at(label), "is required and must be a non-empty string")
    jobs = values.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise SpecError(at("jobs"), "is required and must be a non-empty list of jobs")
    items: list[submit_pb2.JobSubmitRequestItem] = []
    origins: list[str] = []  # the file's name of each item: its entry, or a group's member
    for i, job in enumerate(jobs):
        expanded = _job(job, at(f"jobs[{i}]"))
        items += expanded
        origins += (
            [f"jobs[{i}]"]
            if len(expanded) == 1 and not _is_group(job)
            else [f"jobs[{i}].podGroup.members[{m}]" for m in range(len(expanded))]
        )
    if check:
        try:
            check_items(
                items, queue=str(values["queue"]), job_set_id=str(values["job_set_id"]), prefix=None
            )
        except SpecError as e:
            match = _ITEM.match(e.path)
            problem_path = (
                e.path if match is None else origins[int(match.group(1))] + e.path[match.end() :]
            )
            raise SpecError(
                at(problem_path.replace("job_request_items", "jobs", 1)), e.problem
            ) from None
    return JobRequest(str(values["queue"]), str(values["job_set_id"]), tuple(items))


_POD_GROUP = {
    "gangId": "gang_id",
    "nodeUniformityLabel": "node_uniformity_label",
    "maxHops": "max_hops",
    "roles": "roles",
}
_KINDS = {int: "a whole number", list: "a list of roles", str: "a string"}
_ITEM = re.compile(r"job_request_items\[(\d+)\]")


def _is_group(job: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(job, Mapping) and "podGroup" in job


def _job(job: object, path: str) -> list[submit_pb2.JobSubmitRequestItem]:
    """The items of one entry of `jobs`: itself, or with `podGroup` one per group member."""
    if not _is_group(job):
        return [to_message(job, submit_pb2.JobSubmitRequestItem, path)]
    rest = {k: v for k, v in job.items() if k != "podGroup"}
    for key in ("podSpec", "pod_spec", "podSpecs", "pod_specs"):
        if key in rest:
            raise SpecError(
                f"{path}.{key}",
                "a pod group's pod specs are its roles' podSpec; "
                "give podGroup or a pod spec, not both",
            )
    template = to_message(rest, submit_pb2.JobSubmitRequestItem, path)
    group = job["podGroup"]
    if not isinstance(group, Mapping):
        raise SpecError(
            f"{path}.podGroup",
            "expected a mapping with roles (and optionally gangId, nodeUniformityLabel, maxHops)",
        )
    options: dict[str, Any] = {}
    for key, value in group.items():
        if key not in _POD_GROUP:
            raise SpecError(
                f"{path}.podGroup.{key}",
                "unknown field (expected roles, gangId, nodeUniformityLabel, maxHops)",
            )
        wanted = int if key == "maxHops" else (list if key == "roles" else str)
        if value is not None and (isinstance(value, bool) or not isinstance(value, wanted)):
            raise SpecError(f"{path}.podGroup.{key}", f"expected {_KINDS[wanted]}, got {value!r}")
        options[_POD_GROUP[key]] = value
    if "roles" not in options:
        raise SpecError(f"{path}.podGroup.roles", "is required")
    try:
        members = pod_group_items(
            options.pop("roles"),
            client_id=template.client_id,
            annotations=dict(template.annotations),
            check=False,
            **options,
        )
    except SpecError as e:
        where = e.path if e.path.startswith("annotations") else f"podGroup.{e.path}"
        raise SpecError(f"{path}.{where}", e.problem) from None
    items = []
    for member in members:
        item = submit_pb2.JobSubmitRequestItem()
        item.CopyFrom(template)
        item.client_id = member.client_id
        item.pod_specs.extend(member.pod_specs)
        item.annotations.update(member.annotations)
        items.append(item)
    return items


def load_job_file(text: str, *, check: bool = True) -> list[JobRequest]:
    """Every request in a job file; SpecError names the document and field of a problem."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise SpecError("", f"not valid YAML: {e}") from None
    if not documents:
        raise SpecError("", "the job file is empty")
    several = len(documents) > 1
    return [
        parse_job_request(d, f"document {i + 1}: " if several else "", check=check)
        for i, d in enumerate(documents)
    ]
