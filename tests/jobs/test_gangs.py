"""Reading gangs from annotations."""

from __future__ import annotations

import pytest

from armada_core.jobs import GangAnnotationError, GangSpec, gang_of
from armada_core.jobs import annotations as ann

CASES = [
    ({}, None),
    ({ann.GANG_ID: "g", ann.GANG_CARDINALITY: "3"}, GangSpec("g", 3, 3, "")),
    (
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "4",
            ann.GANG_MINIMUM_CARDINALITY: "2",
            ann.GANG_NODE_UNIFORMITY_LABEL: "rack",
        },
        GangSpec("g", 4, 2, "rack"),
    ),
    (
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "8", ann.GANG_MAX_HOPS: "2"},
        GangSpec("g", 8, 8, "", max_hops=2),
    ),
    (
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_MAX_HOPS: "0"},
        GangSpec("g", 2, 2, "", max_hops=0),
    ),
    (
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "5",
            ann.GANG_ROLE: "worker",
            ann.GANG_ROLE_MINIMUM: "2",
        },
        GangSpec("g", 5, 5, "", role="worker", role_minimum=2),
    ),
    (
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "5",
            ann.GANG_MAX_HOPS: "4",
            ann.GANG_ROLE: "worker",
            ann.GANG_ROLE_MINIMUM: "2",
            ann.GANG_ROLE_MAX_HOPS: "2",
        },
        GangSpec("g", 5, 5, "", max_hops=4, role="worker", role_minimum=2, role_max_hops=2),
    ),
]


@pytest.mark.parametrize(("annotations", "expected"), CASES)
def test_gang_of(annotations, expected) -> None:
    assert gang_of(annotations) == expected


@pytest.mark.parametrize(
    "annotations",
    [
        {ann.GANG_ID: "g"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "0"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_MINIMUM_CARDINALITY: "0"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_MINIMUM_CARDINALITY: "3"},
        {ann.GANG_NODE_UNIFORMITY_LABEL: "rack"},
        {ann.GANG_MAX_HOPS: "2"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_MAX_HOPS: "-1"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_MAX_HOPS: "near"},
        {ann.GANG_ROLE: "worker", ann.GANG_ROLE_MINIMUM: "1"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_ROLE: "worker"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_ROLE_MINIMUM: "1"},
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "2",
            ann.GANG_ROLE: "w",
            ann.GANG_ROLE_MINIMUM: "0",
        },
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "2",
            ann.GANG_ROLE: "w",
            ann.GANG_ROLE_MINIMUM: "3",
        },
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "2",
            ann.GANG_ROLE: "w",
            ann.GANG_ROLE_MINIMUM: "1",
            ann.GANG_MINIMUM_CARDINALITY: "1",
        },
        {ann.GANG_ROLE_MAX_HOPS: "2"},
        {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2", ann.GANG_ROLE_MAX_HOPS: "2"},
        {
            ann.GANG_ID: "g",
            ann.GANG_CARDINALITY: "2",
            ann.GANG_ROLE: "w",
            ann.GANG_ROLE_MINIMUM: "1",
            ann.GANG_ROLE_MAX_HOPS: "-1",
        },
    ],
)
def test_malformed_gangs_raise(annotations) -> None:
    with pytest.raises(GangAnnotationError):
        gang_of(annotations)
