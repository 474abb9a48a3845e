"""Wire compatibility with the official `armada-client` package.

Messages cross in both directions as bytes and must read back with the same field values;
the schemas must agree field by field, so a wrong number fails even for fields no sample sets.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

import armada_core.api.binoculars_pb2
import armada_core.api.event_pb2
import armada_core.api.health_pb2
import armada_core.api.job_pb2
import armada_core.api.submit_pb2

from .samples import EVENTS, MESSAGES
from .schema import EXTENSIONS_FROM, differences, schema_of

pytestmark = pytest.mark.compat

OUR_ROOTS = [
    "armada_core/api/submit.proto",
    "armada_core/api/event.proto",
    "armada_core/api/job.proto",
    "armada_core/api/health.proto",
    "armada_core/api/binoculars.proto",
]


def our_files() -> list:
    pool = descriptor_pool.Default()
    seen: dict[str, Any] = {}
    todo = [pool.FindFileByName(r) for r in OUR_ROOTS]
    while todo:
        fd = todo.pop()
        if fd.name not in seen:
            seen[fd.name] = fd
            todo.extend(fd.dependencies)
    return list(seen.values())


def our_class(full_name: str):
    return message_factory.GetMessageClass(
        descriptor_pool.Default().FindMessageTypeByName(full_name)
    )


def as_dict(msg) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def encode(msg) -> str:
    return base64.b64encode(msg.SerializeToString(deterministic=True)).decode()


def sample_id(type_name: str, value: dict[str, Any]) -> str:
    event = value.get("message")
    return f"event-{next(iter(event))}" if event else type_name


def test_schema_matches_official_client(official) -> None:
    theirs = official({"op": "schema"})
    ours = schema_of(our_files())
    assert differences(ours, theirs, require_all_of=(".api.", ".binoculars.")) == []
    # The Kubernetes part covers what a batch pod spec uses.
    k8s = [
        m
        for m in ours["messages"]
        if m.startswith(".k8s.io.") and not ours["messages"][m]["map_entry"]
    ]
    assert len(k8s) >= 120
    assert sum(len(ours["messages"][m]["fields"]) for m in k8s) >= 520


def test_schema_comparison_catches_a_wrong_field_number() -> None:
    ours = schema_of(our_files())
    tampered = copy.deepcopy(ours)
    tampered["messages"][".api.JobSubmitRequestItem"]["fields"]["client_id"]["number"] = 9
    found = differences(tampered, ours, require_all_of=(".api.",))
    assert any("JobSubmitRequestItem.client_id" in p for p in found)


def test_every_event_type_has_a_sample() -> None:
    oneof = armada_core.api.event_pb2.EventMessage.DESCRIPTOR.oneofs_by_name["events"]
    assert {f.name for f in oneof.fields} == set(EVENTS)


@pytest.mark.parametrize(
    ("type_name", "value"), MESSAGES, ids=[sample_id(t, v) for t, v in MESSAGES]
)
def test_official_encodes_we_decode(official, type_name: str, value: dict[str, Any]) -> None:
    [data] = official({"op": "encode", "items": [{"type": type_name, "value": value}]})
    msg = our_class(type_name)()
    msg.ParseFromString(base64.b64decode(data))
    expected = as_dict(json_format.ParseDict(value, our_class(type_name)()))
    assert as_dict(msg) == expected
    assert encode(msg) == data


@pytest.mark.parametrize(
    ("type_name", "value"), MESSAGES, ids=[sample_id(t, v) for t, v in MESSAGES]
)
def test_we_encode_official_decodes(official, type_name: str, value: dict[str, Any]) -> None:
    msg = json_format.ParseDict(value, our_class(type_name)())
    [answer] = official({"op": "decode", "items": [{"type": type_name, "data": encode(msg)}]})
    assert answer["value"] == as_dict(msg)
    assert answer["data"] == encode(msg)


def populate(msg, depth: int = 0) -> None:
    """Set every upstream field reachable within a depth bound to a value from its number."""
    desc: Descriptor = msg.DESCRIPTOR
    for f in desc.fields:
        if f.number >= EXTENSIONS_FROM:  # ours only: upstream reads them as unknown fields
            continue
        if f.containing_oneof is not None and f is not f.containing_oneof.fields[0]:
            continue
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_f, val_f = f.message_type.fields
            key = scalar(key_f)
            target = getattr(msg, f.name)
            if val_f.message_type is not None:
                if depth < 7:
                    populate(target[key], depth + 1)
            else:
                target[key] = scalar(val_f)
        elif f.message_type is not None:
            if depth >= 7:
                continue
            if f.is_repeated:
                populate(getattr(msg, f.name).add(), depth + 1)
            else:
                populate(getattr(msg, f.name), depth + 1)
        elif f.is_repeated:
            getattr(msg, f.name).append(scalar(f))
        else:
            setattr(msg, f.name, scalar(f))


def scalar(f: FieldDescriptor):
    t = f.type
    if t == FieldDescriptor.TYPE_STRING:
        return f"{f.name}-{f.number}"
    if t == FieldDescriptor.TYPE_BYTES:
        return f.name.encode()
    if t == FieldDescriptor.TYPE_BOOL:
        return True
    if t == FieldDescriptor.TYPE_ENUM:
        return f.enum_type.values[-1].number
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return f.number + 0.5
    return f.number + 1000


@pytest.mark.parametrize(
    "type_name",
    [
        "api.JobSubmitRequest",
        "api.EventStreamMessage",
        "api.Queue",
        "api.RetryPolicy",
        "api.JobDetailsResponse",
    ],
)
def test_every_field_round_trips(official, type_name: str) -> None:
    msg = our_class(type_name)()
    populate(msg)
    [answer] = official({"op": "decode", "items": [{"type": type_name, "data": encode(msg)}]})
    assert answer["value"] == as_dict(msg)
    [data] = official({"op": "encode", "items": [{"type": type_name, "value": as_dict(msg)}]})
    assert data == encode(msg)


def test_extension_fields_are_read_past_and_kept_by_the_official_client(official) -> None:
    failed = dict(EVENTS["failed"], run_id="run-1", condition="OOMKilled")
    failed["container_statuses"] = [dict(failed["container_statuses"][0], init_container=True)]
    msg = json_format.ParseDict(
        {"id": "7", "message": {"failed": failed}}, our_class("api.EventStreamMessage")()
    )
    [answer] = official(
        {"op": "decode", "items": [{"type": "api.EventStreamMessage", "data": encode(msg)}]}
    )
    seen = answer["value"]["message"]["failed"]
    assert "run_id" not in seen and "condition" not in seen
    assert seen["failure_category"] == "oom" and seen["retryable"] is True
    assert answer["data"] == encode(msg)  # unknown fields survive a pass through upstream code
