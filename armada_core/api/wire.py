"""Length-delimited protobuf fields (strings and messages) encoded by hand: a message's
encoding is the concatenation of its fields' encodings, so one already encoded (a stored
spec, a stored event) is put into another as it is, not parsed and serialised again."""

from __future__ import annotations

from google.protobuf.message import Message


def varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(message: type[Message], name: str) -> bytes:
    """The key of `message`'s length-delimited field `name`."""
    number = message.DESCRIPTOR.fields_by_name[name].number
    return varint(number << 3 | 2)


def field(key: bytes, payload: bytes) -> bytes:
    """The field of key `key` (`tag`) holding `payload` (a string's UTF-8, a message's
    encoding)."""
    return key + varint(len(payload)) + payload
