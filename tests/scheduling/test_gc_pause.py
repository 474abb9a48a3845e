"""The cyclic garbage collector is paused while bulk work runs (`armada_core.gcpause`): a
scheduling cycle's short-lived objects would otherwise make it traverse every job held."""

from __future__ import annotations

import gc
import time

import pytest

from armada_core import gcpause
from armada_core.scheduling import Queue, Snapshot, fast_schedule
from armada_core.scheduling.fast import cycle as fast_cycle

from .helpers import PRIORITY_CLASSES, jobs, node


def _no_batch_running() -> None:
    # A server an earlier test stopped may still be finishing a batch on its own thread.
    deadline = time.monotonic() + 60
    while gcpause._gc_batches and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gc.isenabled()


def test_bulk_pauses_the_collector_until_the_last_batch_ends(monkeypatch) -> None:
    _no_batch_running()
    with gcpause.gc_paused():
        with gcpause.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        # Overlapping batches past the limit still collect now and then.
        monkeypatch.setattr(gcpause, "GC_PAUSE_LIMIT", 0.0)
        collected: list[int] = []
        monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
        with gcpause.gc_paused():
            pass
        assert collected == [1] and not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.parametrize("enabled", [True, False])
def test_a_cycle_runs_without_collections_and_leaves_the_collector_as_it_was(
    enabled: bool, monkeypatch
) -> None:
    _no_batch_running()
    snapshot = Snapshot(
        [Queue("A"), Queue("B")],
        PRIORITY_CLASSES,
        [node(f"n{i}", cpu=8, mem=32) for i in range(200)],
        jobs("a", 3_000, "A") + jobs("b", 3_000, "B"),
    )
    collections: list[int] = []
    cycle = fast_cycle._schedule
    inside = [False]
    # Another thread of this process (a server an earlier test left) may pause the collector
    # too: a batch of its own that overlaps the cycle's decides what the collector is after.
    overlapped = [False]

    def counted(*args: object) -> object:
        inside[0] = True
        overlapped[0] |= gcpause._gc_batches > 1
        try:
            return cycle(*args)  # type: ignore[arg-type]
        finally:
            overlapped[0] |= gcpause._gc_batches > 1
            inside[0] = False

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and inside[0]:
            collections.append(info["generation"])

    monkeypatch.setattr(fast_cycle, "_schedule", counted)
    if not enabled:
        gc.disable()
    gc.callbacks.append(count)
    try:
        before = gc.isenabled()  # as set above, unless such a batch just ended
        result = fast_schedule(snapshot)
        assert gc.isenabled() is before or overlapped[0] or gcpause._gc_batches > 0
    finally:
        gc.callbacks.remove(count)
        gc.enable()
    assert len(result.scheduled) == 1_600  # 8 CPUs on each of 200 nodes
    assert collections == []  # without the pause, this cycle made dozens
