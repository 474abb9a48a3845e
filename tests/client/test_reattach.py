"""The reattach rule every integration applies to jobs an earlier attempt left behind."""

from __future__ import annotations

import pytest

from armada_core.api import submit_pb2 as pb
from armada_core.client.reattach import ReattachDecision, can_reattach, decide_reattach


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (pb.SUBMITTED, True),
        (pb.QUEUED, True),
        (pb.LEASED, True),
        (pb.PENDING, True),
        (pb.RUNNING, True),
        (pb.SUCCEEDED, True),
        (pb.FAILED, False),
        (pb.CANCELLED, False),
        (pb.PREEMPTED, False),
        (pb.REJECTED, False),
        (pb.UNKNOWN, False),
    ],
)
def test_can_reattach(state: int, expected: bool) -> None:
    assert can_reattach(state) is expected


def test_every_state_is_decided() -> None:
    for state in pb.JobState.values():
        assert isinstance(can_reattach(state), bool)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ({}, ReattachDecision(False)),
        ({"a": pb.RUNNING}, ReattachDecision(True, live=("a",))),
        ({"a": pb.SUCCEEDED}, ReattachDecision(True)),
        ({"a": pb.CANCELLED}, ReattachDecision(False, ended=("a",))),
        ({"a": pb.PREEMPTED}, ReattachDecision(False, ended=("a",))),
        ({"a": pb.UNKNOWN}, ReattachDecision(False, ended=("a",))),
        # a gang: reattached to only as a whole
        (
            {"a": pb.RUNNING, "b": pb.SUCCEEDED, "c": pb.QUEUED},
            ReattachDecision(True, live=("a", "c")),
        ),
        (
            {"a": pb.RUNNING, "b": pb.PREEMPTED, "c": pb.LEASED},
            ReattachDecision(False, live=("a", "c"), ended=("b",)),
        ),
        ({"a": pb.SUCCEEDED, "b": pb.FAILED}, ReattachDecision(False, ended=("b",))),
    ],
)
def test_decide_reattach(states: dict[str, int], expected: ReattachDecision) -> None:
    assert decide_reattach(states) == expected
