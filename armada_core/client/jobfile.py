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

Several requests may share a file as YAML documents separated by `---`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from armada_core.api import submit_pb2

from .builders import check_items
from .k8s_convert import SpecError, to_message

_TOP = {"queue": "queue", "jobSetId": "job_set_id", "job_set_id": "job_set_id",
        "jobSet": "job_set_id", "jobs": "jobs"}


@dataclass(frozen=True)
class JobRequest:
    """One document of a job file: what one SubmitJobs call sends."""

    queue: str
    job_set_id: str
    items: tuple[submit_pb2.JobSubmitRequestItem, ...]

    def to_proto(self) -> submit_pb2.JobSubmitRequest:
        return submit_pb2.JobSubmitRequest(queue=self.queue, job_set_id=self.job_set_id,
                                           job_request_items=self.items)


def parse_job_request(data: object, path: str = "", *, check: bool = True) -> JobRequest:
    """A JobRequest from one parsed document."""
    def at(key: str) -> str:
        return f"{path}{key}"

    if not isinstance(data, Mapping):
        raise SpecError(path.rstrip(": ") or "document",
                        "expected a mapping with queue, jobSetId and jobs")
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
    items = tuple(to_message(job, submit_pb2.JobSubmitRequestItem, at(f"jobs[{i}]"))
                  for i, job in enumerate(jobs))
    if check:
        try:
            check_items(items, queue=str(values["queue"]), job_set_id=str(values["job_set_id"]),
                        prefix=None)
        except SpecError as e:
            problem_path = e.path.replace("job_request_items", "jobs", 1)
            raise SpecError(at(problem_path), e.problem) from None
    return JobRequest(str(values["queue"]), str(values["job_set_id"]), items)


def load_job_file(text: str, *, check: bool = True) -> list[JobRequest]:
    """Every request in a job file; SpecError names the document and field of a problem."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise SpecError("", f"not valid YAML: {e}") from None
    if not documents:
        raise SpecError("", "the job file is empty")
    prefix = (lambda i: f"document {i + 1}: ") if len(documents) > 1 else (lambda i: "")
    return [parse_job_request(d, prefix(i), check=check) for i, d in enumerate(documents)]
