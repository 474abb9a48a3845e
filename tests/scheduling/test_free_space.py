"""The best-fit index (fast.free_space.FreeSpace) answers every shape's best fit as a scan of
all nodes would, whatever happened in between: jobs placed one at a time or many at once,
preempted, and tentative work undone, with each shape's scan memo carried across."""

from __future__ import annotations

import random

import numpy as np
import pytest

from armada_core.scheduling.fast.free_space import INF, FreeSpace, IndexEntry, ScanMemo

NODES = 40
SHAPES = [(1, 1, 0), (2, 8, 0), (4, 2, 0), (1, 0, 1), (3, 3, 0), (8, 16, 0)]


def brute_force(
    space: FreeSpace, req: tuple[int, ...], partitions: list[int], mask: np.ndarray | None
) -> IndexEntry | None:
    free = (space.capacity - space.held - space.evicted_total).tolist()
    fits = [
        (*free[i], i)
        for i in range(space.n_nodes)
        if space.indexed[i]
        and int(space.partition[i]) in partitions
        and all(f >= r for f, r in zip(free[i], req, strict=True))
        and (mask is None or mask[i])
    ]
    return min(fits, default=None)


@pytest.mark.parametrize("seed", range(12))
def test_best_fit_equals_a_scan_of_every_node(seed: int) -> None:
    rng = random.Random(seed)
    capacity = np.array(
        [
            [rng.choice([8, 16, 32]), rng.choice([16, 64]), rng.choice([0, 0, 4])]
            for _ in range(NODES)
        ],
        dtype=np.int64,
    )
    partition = np.array([rng.choice([0, 1]) for _ in range(NODES)], dtype=np.int64)
    indexed = np.array([rng.random() > 0.1 for _ in range(NODES)])  # a few cordoned
    partition[~indexed] = -1
    space = FreeSpace(capacity, partition, indexed)
    space.build_index()
    masks = [None, np.array([rng.random() > 0.3 for _ in range(NODES)])]
    memos = {(s, k): ScanMemo() for s in range(len(SHAPES)) for k in range(len(masks))}
    placed: list[tuple[int, tuple[int, ...]]] = []
    saved = []
    for _ in range(400):
        action = rng.random()
        req = rng.choice(SHAPES)
        found = brute_force(space, req, [0, 1], None)
        if action < 0.55 and found is not None:
            count = rng.choice([1, 1, 1, 2])
            while count > 1 and any(f < count * r for f, r in zip(found[:-1], req, strict=True)):
                count -= 1
            space.place(found[-1], np.array(req, dtype=np.int64), INF, count, req)
            placed += [(found[-1], req)] * count
        elif action < 0.65 and found is not None:
            nodes = sorted(
                {e[-1] for e in [found, brute_force(space, req, [0], None)] if e is not None}
            )
            space.place_many(
                np.array(nodes, dtype=np.int64),
                np.ones(len(nodes), dtype=np.int64),
                np.array(req, dtype=np.int64),
            )
            placed += [(n, req) for n in nodes]
        elif action < 0.75 and placed:
            node, held = placed.pop(rng.randrange(len(placed)))
            space.release(node, np.array(held, dtype=np.int64), INF)
        elif action < 0.85 and len(saved) < 3:
            saved.append((space.save(), list(placed)))
        elif action < 0.95 and saved:
            state, before = saved.pop()
            if rng.random() < 0.5:
                space.restore(state)
                placed = before
            else:
                space.keep()
        for (s, k), memo in memos.items():
            if rng.random() < 0.5:  # memos fall behind, as shapes not at a queue's head do
                continue
            shape, mask = SHAPES[s], masks[k]
            partitions = [0] if s % 2 else [0, 1]  # a shape's memo serves its partitions
            assert space.best_fit(shape, partitions, mask, memo) == brute_force(
                space, shape, partitions, mask
            )
