"""Queues as YAML resources, the way `armada queue create -f` reads and `get` prints them.

    apiVersion: armadaproject.io/v1beta1   # optional
    kind: Queue                            # optional; Queue if given
    name: team-a                           # or metadata: {name: team-a}
    priorityFactor: 1
    userOwners: [alice]
    groupOwners: [ml]
    permissions:
      - subjects: [{kind: Group, name: ml}]
        verbs: [submit, cancel, reprioritize, watch]
    labels: {cost-centre: "42"}
    retryPolicies: [gpu-default]
    cordoned: false

The fields may also sit under `spec:`. Field names are those of api.Queue in JSON form.
"""

from __future__ import annotations

from typing import Any

import yaml
from google.protobuf import json_format

from armada_core.api import submit_pb2
from armada_core.client import SpecError, to_message

QUEUE_API_VERSION = "armadaproject.io/v1beta1"


def queue_from_document(document: Any, where: str = "") -> submit_pb2.Queue:
    """One Queue from one parsed YAML document; SpecError names a bad field."""
    if not isinstance(document, dict):
        raise SpecError(where.rstrip(": ") or "document", "expected a mapping describing a queue")
    data = dict(document)
    kind = data.pop("kind", "Queue")
    if kind != "Queue":
        raise SpecError(f"{where}kind", f"expected Queue, got {kind!r}")
    data.pop("apiVersion", None)
    metadata = data.pop("metadata", None) or {}
    spec = data.pop("spec", None)
    if spec is not None:
        if not isinstance(spec, dict):
            raise SpecError(f"{where}spec", "expected a mapping")
        data.update(spec)
    if isinstance(metadata, dict) and metadata.get("name"):
        data.setdefault("name", metadata["name"])
    if not data.get("name"):
        raise SpecError(f"{where}name", "is required")
    try:
        return to_message(data, submit_pb2.Queue)
    except SpecError as e:
        raise SpecError(f"{where}{e.path}", e.problem) from None


def load_queues(text: str) -> list[submit_pb2.Queue]:
    """Every queue in a YAML text (documents separated by `---`)."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise SpecError("", f"not valid YAML: {e}") from None
    if not documents:
        raise SpecError("", "no queue in the file")
    several = len(documents) > 1
    return [
        queue_from_document(d, f"document {i + 1}: " if several else "")
        for i, d in enumerate(documents)
    ]


def queue_to_document(queue: submit_pb2.Queue) -> dict[str, Any]:
    body = json_format.MessageToDict(queue)
    body.pop("name", None)
    return {"apiVersion": QUEUE_API_VERSION, "kind": "Queue", "name": queue.name, **body}


def dump_queues(queues: list[submit_pb2.Queue]) -> str:
    return yaml.safe_dump_all([queue_to_document(q) for q in queues], sort_keys=False)
