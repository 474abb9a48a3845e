"""Live updates: which job sets changed, pushed to browsers as server-sent events.

The feed listens to the event hub, which storage's commit callback wakes (as it wakes gRPC
watchers), so a page hears of a change as soon as its transaction commits, and of changes
other replicas (PostgreSQL) notify as soon as the hub does; pages also refresh periodically.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from armada_server.eventhub import EventHub

JobSetKey = tuple[str, str]
#: Of changed job sets, those the subscriber may know of (its queue permissions).
Visible = Callable[[set[JobSetKey]], Awaitable[set[JobSetKey]]]
KEEP = 2000  # changes remembered for subscribers that fall behind
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(data: Any, *, event: str | None = None, id: str | None = None) -> str:
    """One server-sent event."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines += [f"data: {line}" for line in text.split("\n")]
    return "\n".join(lines) + "\n\n"


class ChangeFeed:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.version = 0
        self._recent: deque[tuple[int, tuple[JobSetKey, ...]]] = deque(maxlen=KEEP)
        self._waiters: set[asyncio.Event] = set()
        self.closing = asyncio.Event()

    def attach(self, hub: EventHub) -> None:
        """Hear of every commit that appends events, as the event hub does (on the loop)."""
        hub.listeners.append(self._record)

    @property
    def streams(self) -> int:
        """Live streams open now: one per page that follows changes."""
        return len(self._waiters)

    def _record(self, keys: tuple[JobSetKey, ...]) -> None:
        self.version += 1
        self._recent.append((self.version, keys))
        for waiter in self._waiters:
            waiter.set()

    def since(self, version: int) -> set[JobSetKey] | None:
        """Job sets changed after `version`; None when that is too long ago to know."""
        if self._recent and self._recent[0][0] > version + 1:
            return None
        changed: set[JobSetKey] = set()
        for v, keys in self._recent:
            if v > version:
                changed.update(keys)
        return changed

    async def follow(
        self, visible: Visible | None = None, *, debounce: float = 0.3, keepalive: float = 15.0
    ) -> AsyncIterator[str]:
        """Server-sent events: `change` with the changed job sets as ["queue", "set"] pairs
        (or "*" for all), at most one per `debounce` seconds; a comment on idle streams.
        With `visible`, only the job sets it keeps are named, and a change to none of them
        is not sent."""
        waiter = asyncio.Event()
        self._waiters.add(waiter)
        seen = self.version
        try:
            yield sse({"version": seen}, event="hello")
            while not self.closing.is_set():
                try:
                    async with asyncio.timeout(keepalive):
                        await waiter.wait()
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                await asyncio.sleep(debounce)
                waiter.clear()
                changed = self.since(seen)
                seen = self.version
                if changed is not None and visible is not None:
                    changed = await visible(changed)
                    if not changed:
                        continue
                yield sse("*" if changed is None else sorted(changed), event="change")
        finally:
            self._waiters.discard(waiter)

    def close(self) -> None:
        self.closing.set()
        for waiter in self._waiters:
            waiter.set()
