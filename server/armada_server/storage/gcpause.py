"""Pausing the cyclic garbage collector while a bulk transition runs, and keeping what the
leader holds of every job out of its collections."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_gc_lock = threading.Lock()
_gc_batches = 0
_gc_was_enabled = False
_gc_paused_at = 0.0
GC_PAUSE_LIMIT = 30.0  # seconds


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk transition. Leasing or updating tens of
    thousands of jobs allocates millions of short-lived objects, none in reference cycles
    (reference counting frees them), and the collector those allocations trigger kept
    traversing the whole heap: a quarter of a scheduling cycle's time. Collection resumes
    when the last concurrent batch ends."""
    global _gc_batches, _gc_was_enabled, _gc_paused_at
    with _gc_lock:
        if _gc_batches == 0:
            _gc_was_enabled = gc.isenabled()
            _gc_paused_at = time.monotonic()
            gc.disable()
        _gc_batches += 1
    try:
        yield
    finally:
        collect = False
        with _gc_lock:
            _gc_batches -= 1
            if _gc_batches == 0 and _gc_was_enabled:
                gc.enable()
            elif _gc_was_enabled and time.monotonic() - _gc_paused_at > GC_PAUSE_LIMIT:
                # Batches overlapping without end (a busy server): collect now and then
                # anyway, so that garbage in reference cycles cannot pile up.
                _gc_paused_at = time.monotonic()
                collect = True
        if collect:
            gc.collect()


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
