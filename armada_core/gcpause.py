"""Pausing the cyclic garbage collector while bulk work runs (a scheduling cycle, a bulk
transition of thousands of jobs): shared by every thread of the process."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_gc_lock = threading.Lock()
_gc_batches = 0
_gc_was_enabled = False
_gc_paused_at = 0.0
GC_PAUSE_LIMIT = 30.0  # seconds


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for bulk work. A scheduling cycle, or leasing or
    updating tens of thousands of jobs, allocates millions of short-lived objects, none in
    reference cycles (reference counting frees them), and the collections those allocations
    trigger traverse the whole heap (a million held jobs): a tenth of a scheduling cycle, a
    quarter of a bulk transition. Collection resumes when the last concurrent batch ends."""
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


@contextmanager
def young_collections_every(allocations: int) -> Iterator[None]:
    """Collect the youngest generation every `allocations` allocations while the context
    lasts (700 by default), then put the threshold back. For long single-threaded work that
    makes many short-lived objects outside `gc_paused` batches: every tenth young collection
    is followed by an older one, which walks everything the process holds."""
    before = gc.get_threshold()
    gc.set_threshold(allocations, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
