"""Our protobuf Kubernetes types (`armada_core.api.k8s`) as Kubernetes JSON.

Field names already match (the .proto files use the JSON names), but the value shapes do not:
a Quantity is `{"string": "4Gi"}` in protobuf and `"4Gi"` in JSON, an IntOrString is a typed
union, a Time is seconds and nanos, 64-bit integers must stay JSON numbers (protobuf's own
JSON mapping writes them as strings, which the API server refuses), and a few Go structs are
embedded inline in JSON but are fields of their own in protobuf (`Volume.volumeSource`,
`Probe.handler`, ...). Only fields that are set are written, so Kubernetes applies its own
defaults to the rest.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from armada_core.api.k8s import intstr_pb2, meta_v1_pb2, resource_pb2

# Embedded Go structs tagged `json:",inline"`: their fields belong to the enclosing object.
_INLINE = frozenset(
    {"volumeSource", "handler", "ephemeralContainerCommon", "persistentVolumeSource"}
)


def to_kubernetes(message: Message) -> Any:
    """The Kubernetes JSON form of a message (a dict, or a scalar for the special types)."""
    if isinstance(message, resource_pb2.Quantity):
        return message.string
    if isinstance(message, intstr_pb2.IntOrString):
        return message.strVal if message.type == 1 else message.intVal
    if isinstance(message, meta_v1_pb2.Time):
        when = datetime.fromtimestamp(message.seconds, UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.name in _INLINE and field.message_type is not None:
            out.update(to_kubernetes(value))
        else:
            out[field.name] = _value(field, value)
    return out


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        inner = field.message_type.fields_by_name["value"]
        return {str(k): _scalar_or_message(inner, v) for k, v in value.items()}
    if field.is_repeated:
        return [_scalar_or_message(field, v) for v in value]
    return _scalar_or_message(field, value)


def _scalar_or_message(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        return to_kubernetes(value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value
