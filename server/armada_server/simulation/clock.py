"""Virtual time for a simulation.

The scheduling loop and storage read the time through a `clock` callable, and the simulated
executor ends its runs through a `later` callable (as `loop.call_later`); handing them
`VirtualClock.now` and `VirtualClock.call_later` runs the server's own code on time that moves
only when the driver says.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

#: Where virtual time starts: a fixed instant, so that two runs of a workload are identical.
EPOCH = datetime(2026, 1, 5, 0, 0, 0, tzinfo=UTC)


class VirtualClock:
    """Seconds since `start`; timers fire, in deadline order, when `advance` passes them."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.start = start
        self.elapsed = 0.0
        # The instant as a datetime, made once per move: storage asks for it many times a step.
        self._now = start
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._sequence = 0

    def now(self) -> datetime:
        return self._now

    def call_later(self, seconds: float, callback: Callable[[], None]) -> asyncio.Future[None]:
        """Call `callback` (on the loop) once virtual time has moved `seconds` on; cancelling
        the returned future forgets it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: None if f.cancelled() else callback())
        self._sequence += 1
        heapq.heappush(self._timers, (self.elapsed + max(0.0, seconds), self._sequence, future))
        return future

    def next_deadline(self) -> float | None:
        """When the earliest timer fires (None: none is set)."""
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)  # cancelled
        return self._timers[0][0] if self._timers else None

    def advance(self, to: float) -> int:
        """Move to `to` seconds (never back) and fire every timer due by then; returns how
        many fired."""
        if to < self.elapsed:
            raise ValueError(f"virtual time cannot go back from {self.elapsed} to {to}")
        self.elapsed = to
        self._now = self.start + timedelta(seconds=to)
        woke = 0
        while self._timers and self._timers[0][0] <= to:
            _, _, future = heapq.heappop(self._timers)
            if not future.done():
                future.set_result(None)
                woke += 1
        return woke
