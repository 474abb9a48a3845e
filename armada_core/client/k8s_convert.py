"""Kubernetes objects (JSON-shaped dicts or `kubernetes.client` models) to our protobuf.

Our `.proto` field names are the Kubernetes JSON names (camelCase), so a pod spec in the
shape `kubectl` prints maps onto `k8s.io.api.core.v1.PodSpec` field by field. The conversion
walks the message descriptors, so every field of the API is covered, and it never drops
anything: an unknown field or a value of the wrong type raises `SpecError` naming the path.
Quantities are Kubernetes strings (`"500m"`, `"4Gi"`), int-or-string fields take either.
"""

from __future__ import annotations

import base64
import difflib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from armada_core.api.k8s import intstr_pb2, meta_v1_pb2, resource_pb2

if TYPE_CHECKING:
    from google._upb._message import Descriptor as UpbDescriptor

M = TypeVar("M", bound=Message)
#: A message's DESCRIPTOR: the pure-Python class or upb's (which protobuf uses).
AnyDescriptor: TypeAlias = "Descriptor | UpbDescriptor"
_INTS = (
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
)
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
# Go structs embedded with `json:",inline"`: a field in protobuf, flattened in JSON.
_INLINE = frozenset(
    {"handler", "volumeSource", "ephemeralContainerCommon", "persistentVolumeSource"}
)

_api_client: Any = None


class SpecError(ValueError):
    """A job or pod spec that cannot be sent; `path` names the offending field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


def is_kubernetes_model(value: object) -> bool:
    """True for objects of the `kubernetes` package's generated models (e.g. V1PodSpec)."""
    return hasattr(value, "openapi_types") and hasattr(value, "attribute_map")


def sanitize(value: object) -> Any:
    """A kubernetes model as its JSON form (camelCase keys, quantities as strings)."""
    global _api_client
    if _api_client is None:
        # An optional dependency, only needed here.
        from kubernetes.client import ApiClient  # type: ignore[import-untyped]  # no type information

        _api_client = ApiClient()
    return _api_client.sanitize_for_serialization(value)


def to_message(data: Any, message: type[M] | M, path: str = "") -> M:
    """Fill a message from Kubernetes-JSON-shaped data (a mapping or a kubernetes model).

    Keys may be the JSON names or the snake_case names of `to_dict()`; None values are
    skipped, as Kubernetes treats them as unset.
    """
    target = message() if isinstance(message, type) else message
    if is_kubernetes_model(data):
        data = sanitize(data)
    if isinstance(data, Message):
        if data.DESCRIPTOR.full_name != target.DESCRIPTOR.full_name:
            raise SpecError(path, f"expected {target.DESCRIPTOR.name}, got {data.DESCRIPTOR.name}")
        copied: Message = target  # the same message type: the descriptors' names match
        copied.CopyFrom(data)
        return target
    _fill(target, data, path)
    return target


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def _lookup(descriptor: AnyDescriptor, key: str) -> FieldDescriptor | None:
    field: FieldDescriptor | None = descriptor.fields_by_name.get(key)
    if field is None:
        field = next(
            (f for f in descriptor.fields if f.json_name == key or _key(f.name) == _key(key)),
            None,
        )
    return field


def _resolve(target: Message, key: str) -> tuple[Message, FieldDescriptor] | None:
    """The message and field a JSON key names, looking through inlined embedded structs."""
    field = _lookup(target.DESCRIPTOR, key)
    if field is not None:
        return target, field
    for name in _INLINE & set(target.DESCRIPTOR.fields_by_name):
        inner = target.DESCRIPTOR.fields_by_name[name]
        if inner.message_type is not None and _lookup(inner.message_type, key) is not None:
            return _resolve(getattr(target, name), key)
    return None


def _all_names(descriptor: AnyDescriptor) -> list[str]:
    names = [f.name for f in descriptor.fields]
    for name in _INLINE & set(descriptor.fields_by_name):
        names += _all_names(descriptor.fields_by_name[name].message_type)
    return names


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _fill(target: Message, data: Any, path: str) -> None:
    if not isinstance(data, Mapping):
        raise SpecError(
            path,
            f"expected a mapping of {target.DESCRIPTOR.name} fields, got {type(data).__name__}",
        )
    descriptor = target.DESCRIPTOR
    for key, value in data.items():
        if not isinstance(key, str):
            raise SpecError(path, f"field names must be strings, got {key!r}")
        if value is None:
            continue
        resolved = _resolve(target, key)
        here = _join(path, key)
        if resolved is None:
            close = difflib.get_close_matches(key, _all_names(descriptor), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SpecError(here, f"unknown field of {descriptor.name}{hint}")
        owner, field = resolved
        _set_field(owner, field, value, here)


def _set_field(target: Message, field: FieldDescriptor, value: Any, here: str) -> None:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        _fill_map(getattr(target, field.name), field, value, here)
    elif field.is_repeated:
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            raise SpecError(here, f"expected a list, got {type(value).__name__}")
        container = getattr(target, field.name)
        for i, element in enumerate(value):
            at = f"{here}[{i}]"
            if field.message_type is not None:
                _message_value(container.add(), element, at)
            else:
                container.append(_scalar(field, element, at))
    elif field.message_type is not None:
        sub = getattr(target, field.name)
        sub.SetInParent()  # an empty mapping still sets the field
        _message_value(sub, value, here)
    else:
        setattr(target, field.name, _scalar(field, value, here))


def _fill_map(container: Any, field: FieldDescriptor, value: Any, path: str) -> None:
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected a mapping, got {type(value).__name__}")
    key_field = field.message_type.fields_by_name["key"]
    value_field = field.message_type.fields_by_name["value"]
    for k, v in value.items():
        at = f"{path}[{k}]"
        key = (
            _scalar(key_field, k, at)
            if key_field.type != FieldDescriptor.TYPE_STRING
            else _string(k, at)
        )
        if v is None:
            raise SpecError(at, "a map value must not be null")
        if value_field.message_type is not None:
            _message_value(container[key], v, at)
        else:
            container[key] = _scalar(value_field, v, at)


def _message_value(target: Message, value: Any, path: str) -> None:
    if isinstance(target, resource_pb2.Quantity) and not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise SpecError(path, f"expected a quantity such as '500m' or '4Gi', got {value!r}")
        target.string = str(value)
    elif isinstance(target, intstr_pb2.IntOrString) and not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise SpecError(path, f"expected an integer or a string, got {value!r}")
        if isinstance(value, int):
            target.type, target.intVal = 0, value
        else:
            target.type, target.strVal = 1, value
    elif isinstance(target, meta_v1_pb2.Time) and not isinstance(value, Mapping):
        when = value
        if isinstance(value, str):
            try:
                when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise SpecError(path, f"expected an RFC 3339 time, got {value!r}") from None
        if not isinstance(when, datetime):
            raise SpecError(path, f"expected an RFC 3339 time, got {value!r}")
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        stamp = when.timestamp()
        target.seconds = int(stamp // 1)
        target.nanos = when.microsecond * 1000
    elif isinstance(value, Message) or is_kubernetes_model(value):
        to_message(value, target, path)
    else:
        _fill(target, value, path)


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise SpecError(path, f"expected a string, got {value!r}")
    return value


def _scalar(field: FieldDescriptor, value: Any, path: str) -> Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _string(value, path)
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise SpecError(path, f"expected true or false, got {value!r}")
        return value
    if kind in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise SpecError(path, f"expected an integer, got {value!r}")
        return value
    if kind in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(path, f"expected a number, got {value!r}")
        return float(value)
    if kind == FieldDescriptor.TYPE_ENUM:
        if isinstance(value, str) and value in field.enum_type.values_by_name:
            return field.enum_type.values_by_name[value].number
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value in field.enum_type.values_by_number
        ):
            return value
        known = ", ".join(field.enum_type.values_by_name)
        raise SpecError(path, f"expected one of {known}, got {value!r}")
    if kind == FieldDescriptor.TYPE_BYTES:
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                raise SpecError(path, "expected base64-encoded bytes") from None
        raise SpecError(path, f"expected bytes, got {value!r}")
    raise SpecError(path, f"unsupported field type {kind}")  # pragma: no cover
