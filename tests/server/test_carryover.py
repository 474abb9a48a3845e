"""What the scheduling leader carries between cycles, as kept in the database: written and
read back alike, nothing written when there is nothing to carry, and a row that cannot be read
gives a fresh start (with a warning) instead of stopping the scheduler."""

from __future__ import annotations

import logging

import pytest

from armada_core.scheduling.ratelimit import RateBuckets
from armada_server.scheduling.carryover import Carryover


def test_nothing_to_carry_is_written_as_an_empty_document() -> None:
    assert Carryover().dumps() == "{}"
    assert Carryover(rate=RateBuckets(at=12.0)).dumps() == "{}"  # full buckets: nothing


def test_what_is_written_reads_back_the_same() -> None:
    carried = Carryover(
        {"a": 0.5, "b": 1e-3}, 100.0, RateBuckets(tokens=2.5, queues={"a": 0.0}, at=101.0)
    )
    again = Carryover.loads(carried.dumps())
    assert again == carried
    assert again.dumps() == carried.dumps()


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"usage": {"a": "lots"}, "usage_at": 1}',
        '{"usage": {"a": NaN}, "usage_at": 1}',
        '{"rate": {"tokens": true}}',
        '{"rate": {"queues": [1]}}',
        '{"usage": 3}',
    ],
)
def test_a_row_that_cannot_be_read_starts_afresh(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="armada_server"):
        assert Carryover.loads(text) == Carryover()
    assert "start afresh" in caplog.text


def test_no_row_starts_afresh_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="armada_server"):
        assert Carryover.loads(None) == Carryover()
    assert caplog.text == ""
