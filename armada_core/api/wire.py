"""Length-delimited protobuf fields (strings and messages) encoded by hand: a message's
encoding is the concatenation of its fields' encodings, so one already encoded (a stored
spec, a stored event) is put into another as it is, not parsed and serialised again."""

from __future__ import annotations

from google.protobuf.message import Message


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Every length under 16 KiB encoded in advance: a request of a thousand jobs encodes seven
# fields per job, and building each length's bytes was half of what a field cost.
_SMALL = [_encode_varint(n) for n in range(1 << 14)]


def varint(n: int) -> bytes:
    """`n` (not negative) as a protobuf varint."""
    return _SMALL[n] if 0 <= n < 16384 else _encode_varint(n)


def tag(message: type[Message], name: str) -> bytes:
    """The key of `message`'s length-delimited field `name`."""
    number = message.DESCRIPTOR.fields_by_name[name].number
    return varint(number << 3 | 2)


def field(key: bytes, payload: bytes) -> bytes:
    """The field of key `key` (`tag`) holding `payload` (a string's UTF-8, a message's
    encoding)."""
    size = len(payload)
    return key + (_SMALL[size] if size < 16384 else _encode_varint(size)) + payload
