"""Wakes job-set watchers as soon as new events commit.

Writers call `notify` from any thread after their transaction commits; each watcher of a job
set waits on its own asyncio.Event, so delivery needs no polling delay.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

JobSetKey = tuple[str, str]


class EventHub:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiters: dict[JobSetKey, set[asyncio.Event]] = defaultdict(set)

    def notify(self, keys: Iterable[JobSetKey]) -> None:
        """Thread-safe: wake every watcher of the given job sets."""
        keys = list(keys)
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._wake, keys)

    def _wake(self, keys: list[JobSetKey]) -> None:
        for key in keys:
            for waiter in self._waiters.get(key, ()):
                waiter.set()

    @contextmanager
    def subscribe(self, key: JobSetKey) -> Iterator[asyncio.Event]:
        """An event set whenever the job set gets new events; clear it before each wait."""
        waiter = asyncio.Event()
        self._waiters[key].add(waiter)
        try:
            yield waiter
        finally:
            self._waiters[key].discard(waiter)
            if not self._waiters[key]:
                del self._waiters[key]
