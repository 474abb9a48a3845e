"""One periodic look at /proc for every running container: membership and memory.

A single timer serves all pods, so the cost is one scan of the process table per interval
however many pods run. Each container learns every process that belongs to it (its session
and everything descended from it, including children that started sessions of their own), so
terminating it reaches the whole tree; a container over its memory limit is killed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from . import procfs

_log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 0.1


class Watched(Protocol):
    """What the monitor needs from a container."""

    pid: int
    members: dict[int, int]
    rss_bytes: int

    @property
    def exited(self) -> bool: ...

    @property
    def memory_limit(self) -> int | None: ...

    def poll(self) -> None: ...

    def kill_for_memory(self) -> None: ...


class ProcessMonitor:
    """Samples the process trees of the watched containers every `interval` seconds."""

    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        self.interval = interval
        self._watched: set[Watched] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, container: Watched) -> None:
        self._watched.add(container)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def unwatch(self, container: Watched) -> None:
        self._watched.discard(container)
        if not self._watched and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        try:
            self.sample()
        except Exception:  # a bad sample must not stop the monitoring of every other pod
            _log.exception("sampling /proc failed")
        if self._watched:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def sample(self) -> None:
        """Update every watched container's members and memory; kill those over their limit."""
        table = procfs.scan()
        children = procfs.children_of(table)
        by_session: dict[int, list[int]] = {}
        for info in table.values():
            by_session.setdefault(info.sid, []).append(info.pid)
        for container in list(self._watched):
            container.poll()  # exit detection where pidfds are unavailable
            if container.exited:
                continue
            known = [
                pid
                for pid, start in container.members.items()
                if pid in table and table[pid].start_time == start
            ]
            tree = procfs.descendants([*known, *by_session.get(container.pid, ())], children)
            live = [table[pid] for pid in tree if pid in table and table[pid].alive]
            container.members = {info.pid: info.start_time for info in live}
            container.rss_bytes = sum(info.rss_bytes for info in live)
            limit = container.memory_limit
            if limit is not None and container.rss_bytes > limit:
                container.kill_for_memory()
