"""The room rule (executors/room.py): a lease starts only when its node has room for it and no
earlier lease waits for that node; held leases start in arrival order as room frees."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from armada_core.api import executor_pb2
from armada_server.executors.room import Room


def node(name: str, cpu: int) -> executor_pb2.Node:
    return executor_pb2.Node(name=name, allocatable={"cpu": str(cpu)})


class Started:
    """The runs started, in order, through the callbacks `start` makes."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def start(self, run: str) -> Callable[[], None]:
        return lambda: self.runs.append(run)


def offer(room: Room, started: Started, run: str, where: str, cpu: int) -> bool:
    return room.offer(run, where, {"cpu": cpu * 1000}, started.start(run))


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # A lease waits behind an earlier one on its node even when it would fit.
        ([("offer", "a", "x", 3), ("offer", "b", "x", 2), ("offer", "c", "x", 1)], ["a"]),
        # Releasing room starts the held leases in arrival order, as many as fit.
        (
            [
                ("offer", "a", "x", 3),
                ("offer", "b", "x", 2),
                ("offer", "c", "x", 1),
                ("release", "a"),
            ],
            ["a", "b", "c"],
        ),
        # Another node's leases are not held behind x's.
        ([("offer", "a", "x", 4), ("offer", "b", "x", 1), ("offer", "c", "y", 4)], ["a", "c"]),
        # A held lease withdrawn: the one behind it starts if it fits.
        (
            [
                ("offer", "a", "x", 3),
                ("offer", "b", "x", 2),
                ("offer", "c", "x", 1),
                ("withdraw", "b"),
            ],
            ["a", "c"],
        ),
        # Room freed on one node starts nothing held for another.
        (
            [
                ("offer", "a", "x", 4),
                ("offer", "b", "y", 4),
                ("offer", "c", "y", 1),
                ("release", "a"),
            ],
            ["a", "b"],
        ),
        # A node that grows (reported again) starts what now fits.
        (
            [("offer", "a", "x", 3), ("offer", "b", "x", 2), ("nodes", 8)],
            ["a", "b"],
        ),
    ],
    ids=["held-behind", "released", "other-node", "withdrawn", "freed-elsewhere", "grown"],
)
def test_room_rule(steps: list[tuple[object, ...]], expected: list[str]) -> None:
    room = Room([node("x", 4), node("y", 4)])
    started = Started()
    for step in steps:
        match step:
            case ("offer", str(run), str(where), int(cpu)):
                offer(room, started, run, where, cpu)
            case ("release", str(run)):
                room.release(run)
            case ("withdraw", str(run)):
                assert room.withdraw(run)
            case ("nodes", int(cpu)):
                room.set_nodes([node("x", cpu), node("y", 4)])
    assert started.runs == expected
    assert room.waiting.isdisjoint(started.runs)


def test_a_withdrawal_on_closing_starts_nothing() -> None:
    room = Room([node("x", 4)])
    started = Started()
    for run, cpu in (("a", 3), ("b", 2), ("c", 1)):
        offer(room, started, run, "x", cpu)
    assert room.withdraw("b", admit=False)
    assert started.runs == ["a"] and room.waiting == {"c"}


def test_a_start_that_frees_room_starts_the_next() -> None:
    """A run that ends as it starts (a backend failing it at once) releases its room from
    inside its start: the lease behind it starts too, once."""
    room = Room([node("x", 4)])
    started = Started()
    offer(room, started, "a", "x", 4)

    def fails_at_once() -> None:
        started.runs.append("b")
        room.release("b")

    room.offer("b", "x", {"cpu": 4000}, fails_at_once)
    offer(room, started, "c", "x", 4)
    room.release("a")
    assert started.runs == ["a", "b", "c"]
    assert not room.waiting


def test_each_release_looks_only_at_its_nodes_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 leases held on 200 nodes, then every run released one at a time: each offer and
    release checks the room of its own node's first held leases, not of every lease held (an
    executor holds thousands while preempted runs take their grace periods)."""
    nodes, per_node = 200, 50
    room = Room([node(f"n{i}", 1) for i in range(nodes)])
    started = Started()
    checks = 0
    fits = room._fits

    def counted(where: str, requests: dict[str, int]) -> bool:
        nonlocal checks
        checks += 1
        return fits(where, requests)

    monkeypatch.setattr(room, "_fits", counted)
    for k in range(per_node):
        for i in range(nodes):
            offer(room, started, f"r{i}-{k}", f"n{i}", 1)
    assert len(started.runs) == nodes and len(room.waiting) == nodes * (per_node - 1)
    while started.runs:
        room.release(started.runs.pop(0))
    assert not room.waiting
    releases = nodes * per_node
    assert checks <= 2 * nodes + 2 * releases  # two offers a node, then a start and a miss each
