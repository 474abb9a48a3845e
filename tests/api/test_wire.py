"""Hand-encoded fields parse as protobuf's own encoding of the same message."""

from __future__ import annotations

import pytest

from armada_core.api import submit_pb2
from armada_core.api.wire import field, tag, varint


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**35 + 7])
def test_varint_round_trips_through_protobuf(n: int) -> None:
    size = len(varint(n))
    assert size == max(1, (n.bit_length() + 6) // 7)
    decoded = shift = 0
    for byte in varint(n):
        decoded |= (byte & 0x7F) << shift
        shift += 7
    assert decoded == n


@pytest.mark.parametrize("length", [0, 5, 127, 128, 16383, 16384, 70000])
def test_a_field_of_any_length_parses_as_the_string_it_holds(length: int) -> None:
    text = "x" * length
    key = tag(submit_pb2.JobSubmitRequestItem, "client_id")
    parsed = submit_pb2.JobSubmitRequestItem.FromString(field(key, text.encode()))
    assert parsed.client_id == text
    if length:  # proto3 writes no empty string
        assert (
            field(key, text.encode())
            == submit_pb2.JobSubmitRequestItem(client_id=text).SerializeToString()
        )


def test_a_negative_varint_is_refused() -> None:
    with pytest.raises(ValueError):
        varint(-1)
