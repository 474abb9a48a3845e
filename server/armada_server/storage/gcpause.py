"""Keeping what the leader holds of every job out of the cyclic garbage collector's
collections (pausing it for bulk work: `armada_core.gcpause`)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Below this many held jobs a full collection is short: what is held stays collected.
FREEZE_FROM = 100_000


@contextmanager
def long_lived(rebuilt: bool, held: Callable[[], int]) -> Iterator[None]:
    """Around a leader's cycle that reads every job again (`rebuilt`). What it then holds
    (`held()` jobs) stays until the jobs change, and at a million jobs it is four million
    objects, which every full collection traversed for about 1.3 s with every thread stopped,
    finding nothing to free: the first after the read, then whenever new objects added a
    quarter. From FREEZE_FROM jobs it goes to the collector's permanent generation
    (`gc.freeze`, a list splice). Frozen objects are still freed by reference counting (a
    later read replaces the rows); only reference cycles among them would wait, and only
    until the next read of everything, which first returns them to the collector and
    collects once. So there is one full collection per read of everything (every ten
    minutes, as its new objects caused before) and none between."""
    if rebuilt and gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
    try:
        yield
    finally:
        if rebuilt and held() >= FREEZE_FROM:
            gc.freeze()
