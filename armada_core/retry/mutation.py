"""Applying upstream's memory-bump mutation to a retried job's memory request."""

from __future__ import annotations

import math

from armada_core.scheduling.model import parse_quantity

from .policy import MemoryBump


def apply_memory_bump(bump: MemoryBump, memory_bytes: int) -> int:
    """The bumped request in bytes: ``static`` adds, ``factor`` multiplies (rounded up).

    Bumps compound across retries because each applies to the current request.
    """
    if bump.static is not None:
        return memory_bytes + parse_quantity(bump.static)
    if bump.factor is not None:
        return math.ceil(memory_bytes * bump.factor)
    return memory_bytes
