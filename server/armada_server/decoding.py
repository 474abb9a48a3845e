"""Requests that do not parse as their protobuf message get INVALID_ARGUMENT.

grpc would answer UNKNOWN ("Exception deserializing request") before any service code runs;
a client sending bad bytes deserves to be told its request was invalid, and which field is
wrong where that can be found: protobuf refuses a message whose proto3 text is not UTF-8
without saying where, so the bytes are walked again to name the field
(`job_request_items[3].annotations[team]: not valid UTF-8`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from armada_server.guarded import Request, Response, RpcContext, guarded

# Paths deeper than this are not searched (a hostile message could nest without end).
MAX_DEPTH = 64

# types-protobuf leaves the descriptor pool untyped: it is looked up as what it is, reflection.
_default_pool: Callable[[], Any] = descriptor_pool.Default


class _Malformed(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Malformed
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field in `data`, in order."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, wire, value))
        elif wire == 1 or wire == 5:
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise _Malformed
            out.append((number, wire, data[pos : pos + length]))
            pos += length
        else:  # groups: not used by these APIs
            raise _Malformed
    if pos != len(data):
        raise _Malformed
    return out


def _text(value: bytes) -> str | None:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def invalid_utf8(descriptor: Descriptor, data: bytes, path: str = "", depth: int = 0) -> str | None:
    """The path of the first string field (or map key) in the serialised `data` of a
    `descriptor` message that is not valid UTF-8; None when there is none (or the bytes are
    malformed in another way)."""
    if depth > MAX_DEPTH:
        return None
    try:
        fields = _fields(data)
    except _Malformed:
        return None
    counts: dict[int, int] = {}
    for number, wire, value in fields:
        field = descriptor.fields_by_number.get(number)
        if field is None or wire != 2 or not isinstance(value, bytes):
            continue
        index = counts.get(number, 0)
        counts[number] = index + 1
        name = f"{path}.{field.name}" if path else field.name
        where = f"{name}[{index}]" if field.is_repeated else name
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            found = _invalid_map_entry(entry, value, name, depth)
        elif entry is not None:
            found = invalid_utf8(entry, value, where, depth + 1)
        elif field.type == FieldDescriptor.TYPE_STRING and _text(value) is None:
            found = where
        else:
            found = None
        if found is not None:
            return found
    return None


def _invalid_map_entry(entry: Descriptor, data: bytes, name: str, depth: int) -> str | None:
    try:
        fields = _fields(data)
    except _Malformed:
        return None
    key_field, value_field = entry.fields_by_number[1], entry.fields_by_number[2]
    key = ""
    for number, _wire, value in fields:
        if number == 1:
            if isinstance(value, bytes) and key_field.type == FieldDescriptor.TYPE_STRING:
                text = _text(value)
                if text is None:
                    return f"{name}[{value[:60]!r}]"
                key = text[:60]
            else:
                key = str(value)
    for number, _wire, value in fields:
        if number != 2 or not isinstance(value, bytes):
            continue
        if value_field.message_type is not None:
            found = invalid_utf8(value_field.message_type, value, f"{name}[{key}]", depth + 1)
            if found is not None:
                return found
        elif value_field.type == FieldDescriptor.TYPE_STRING and _text(value) is None:
            return f"{name}[{key}]"
    return None


def _request_type(method: str) -> Descriptor | None:
    """The request message of a method named like "/api.Submit/SubmitJobs"."""
    try:
        service, name = method.lstrip("/").split("/")
        found = _default_pool().FindServiceByName(service).FindMethodByName(name)
    except (KeyError, ValueError):
        return None
    input_type: Descriptor | None = found.input_type if found is not None else None
    return input_type


class _Undecodable:
    def __init__(self, error: Exception, where: str | None = None) -> None:
        self.error = error
        self.where = where


class DecodingInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Request, Response] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Request, Response] | None:
        handler = await continuation(details)
        if handler is None or handler.request_deserializer is None or (handler.request_streaming):
            return handler
        parse = handler.request_deserializer

        method = details.method

        def deserialize(data: bytes) -> object:
            try:
                return parse(data)
            except Exception as e:  # any parse failure is the client's
                descriptor = _request_type(method)
                where = invalid_utf8(descriptor, data) if descriptor is not None else None
                return _Undecodable(e, where)

        message = f"the request is not a valid message for {method}"

        async def refuse_undecodable(request: object, context: RpcContext) -> None:
            if isinstance(request, _Undecodable):
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{request.where}: not valid UTF-8" if request.where else message,
                )

        return guarded(handler, refuse_undecodable, request_deserializer=deserialize)
