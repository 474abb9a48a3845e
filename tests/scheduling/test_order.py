"""The queue order's sort: numeric columns first, ties broken by the id of each position's
anchor job, as the reference orders jobs."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from armada_core.scheduling.fast.order import stable_order


def _expected(columns: list[np.ndarray], ids: list[str], anchor: np.ndarray) -> list[int]:
    return sorted(range(len(anchor)), key=lambda p: (*(c[p] for c in columns), ids[int(anchor[p])]))


def _breaks(ids: list[str]) -> np.ndarray:
    return np.cumsum([0] + [not b > a for a, b in itertools.pairwise(ids)])


@pytest.mark.parametrize(
    ("positions", "distinct_keys", "anchored"),
    [
        (0, 1, "own"),
        (1, 1, "own"),
        (2, 1, "own"),  # one tie of two
        (50, 50, "own"),  # hardly any ties
        (200, 3, "own"),  # three large ties, as a request's jobs share their submit time
        (200, 1, "own"),  # everything tied
        (200, 4, "shared"),  # positions anchored on the same job (a gang's members)
        (200, 3, "in id order"),  # rows in order of id, as a server holds its jobs
        (200, 1, "in id order"),
        (200, 3, "partly in id order"),  # runs in order of id, broken in places
        (200, 3, "ids in order, positions not"),  # rows in order of id, anchors shuffled
    ],
)
@pytest.mark.parametrize("breaks_known", [False, True])
def test_ties_are_ordered_by_the_anchor_id(
    positions: int, distinct_keys: int, anchored: str, breaks_known: bool
) -> None:
    rng = random.Random(positions * 31 + distinct_keys)
    ids = [f"{rng.getrandbits(40):010x}" for _ in range(positions)]
    if anchored == "own":
        anchor = np.array(rng.sample(range(positions), positions), dtype=np.int64)
    elif anchored == "in id order":
        ids.sort()
        anchor = np.arange(positions, dtype=np.int64)
    elif anchored == "ids in order, positions not":
        ids.sort()
        anchor = np.array(rng.sample(range(positions), positions), dtype=np.int64)
    elif anchored == "partly in id order":
        ids = sorted(ids[:80]) + sorted(ids[80:150]) + ids[150:]
        anchor = np.arange(positions, dtype=np.int64)
    else:
        anchor = np.array([rng.randrange(max(1, positions // 5)) for _ in range(positions)])
    columns = [
        np.array([rng.randrange(2) for _ in range(positions)], dtype=np.int64),
        np.array([float(rng.randrange(distinct_keys)) for _ in range(positions)]),
    ]
    id_array = np.empty(len(ids), dtype=object)
    id_array[:] = ids
    # The rows' breaks in the order of id, as job_columns reads them, or none known.
    breaks = _breaks(ids) if breaks_known else None
    got = stable_order(columns, id_array, anchor, breaks).tolist()
    expected = _expected(columns, ids, anchor)
    if anchored != "shared":
        assert got == expected
    else:
        # Positions of one anchor tie completely: any order among them is the reference's.
        def key(p: int) -> tuple:
            return (*(c[p] for c in columns), ids[int(anchor[p])])

        assert [key(p) for p in got] == [key(p) for p in expected]
        assert sorted(got) == list(range(positions))
