"""Reading the process table from /proc.

The local executor has no cgroups (they need root or a delegated hierarchy), so it learns which
processes belong to a container, and how much memory they use, from /proc alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

_DEAD_STATES = frozenset("ZXx")


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process as /proc/<pid>/stat describes it."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_time: int  # clock ticks since boot: with the pid, identifies a process for good
    rss_bytes: int

    @property
    def alive(self) -> bool:
        """False for zombies: they are dead and only wait for their parent to reap them."""
        return self.state not in _DEAD_STATES


def read_process(pid: int) -> ProcessInfo | None:
    """The process `pid`, or None when it does not exist (any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name sits in parentheses and may itself contain spaces and parentheses.
    fields = data[data.rindex(b")") + 2 :].split()
    return ProcessInfo(
        pid=pid,
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        state=fields[0].decode(),
        start_time=int(fields[19]),
        rss_bytes=int(fields[21]) * PAGE_SIZE,
    )


def scan() -> dict[int, ProcessInfo]:
    """Every process on the machine, by pid."""
    table: dict[int, ProcessInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_process(int(name))
            if info is not None:
                table[info.pid] = info
    return table


def children_of(table: Mapping[int, ProcessInfo]) -> dict[int, list[int]]:
    """Parent pid -> its children's pids."""
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    return children


def descendants(roots: Iterable[int], children: Mapping[int, list[int]]) -> set[int]:
    """The roots and everything below them."""
    found = set(roots)
    frontier = list(found)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def is_running(pid: int, start_time: int) -> bool:
    """Whether that very process (not a later one that reused its pid) is still alive."""
    info = read_process(pid)
    return info is not None and info.start_time == start_time and info.alive


def processes_with_env(variables: Mapping[str, str]) -> list[ProcessInfo]:
    """Live processes whose environment has all of `variables` (only our own user's are
    readable), however far they have moved from where they were started."""
    wanted = {f"{name}={value}".encode() for name, value in variables.items()}
    found = []
    for info in scan().values():
        if info.pid == os.getpid() or not info.alive:
            continue
        try:
            with open(f"/proc/{info.pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if wanted.issubset(environ.split(b"\0")):
            found.append(info)
    return found


_TICKS = os.sysconf("SC_CLK_TCK")


def started_at(start_time: int) -> datetime:
    """When a process whose `start_time` (clock ticks since boot) is that started, in wall
    time: to the clock tick (10 ms), however late its starter looked."""
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_time / _TICKS
    return datetime.now(UTC) - timedelta(seconds=max(age, 0.0))
