"""Protobuf messages as JSON, the way Kubernetes and Armada users write them.

Field names are the messages' JSON names (camelCase); enums are their names; quantities are
strings ("500m"), int-or-string fields a number or a string, times RFC 3339; 64-bit integers
stay numbers. Requests go the other way through armada_core.client's `to_message`, which
accepts the same shapes.
"""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_TIMES = (
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "google.protobuf.Timestamp",
)


def to_json(message: Message) -> dict[str, Any]:
    """The message's set fields as a JSON-ready dict."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[_json_name(field)] = {str(k): _single(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[_json_name(field)] = [_single(field, v) for v in value]
        else:
            out[_json_name(field)] = _single(field, value)
    return out


def _json_name(field: FieldDescriptor) -> str:
    """The field's JSON name: camelCase unless the .proto names it otherwise (a few fields of
    event.proto and meta/v1 keep their capitals, so camelcase_name would not do)."""
    name: str = field.json_name  # type: ignore[attr-defined]  # types-protobuf omits json_name
    return name


def _single(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        name = field.message_type.full_name
        if name == _QUANTITY:
            return value.string
        if name == _INT_OR_STRING:
            return value.strVal if value.type == 1 else value.intVal
        if name in _TIMES:
            when = datetime.fromtimestamp(value.seconds + value.nanos / 1e9, UTC)
            return iso(when)
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def iso(when: datetime | None) -> str | None:
    """RFC 3339 in UTC with milliseconds, or None."""
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
