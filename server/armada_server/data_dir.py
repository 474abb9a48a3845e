"""What a server keeps only for itself, and the locks that keep it to one server.

With no settings the server keeps its SQLite database (`armada.db`) and the local executor's
pods (`pods/`) in its data directory, `$XDG_DATA_HOME/armada-server`: that state outlives the
process, so every later run on the machine starts from it. Two servers must not share an
SQLite file (each would take itself for the scheduling leader) nor a pod sandbox (each would
adopt and fence the other's pods), so a server holds an exclusive lock on each for its life:
`<data dir>/server.lock` for what is in its data directory, `<path>.lock` beside a database
file or sandbox elsewhere. A PostgreSQL database takes no lock: replicas share it by design.

The locks are flock(2) locks on files that stay behind: the kernel releases them when the
process ends however it ends (SIGKILL included), so a stale file never blocks a start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from armada_server.storage.database import sqlite_file

LOCK_NAME = "server.lock"


@dataclass(frozen=True)
class Private:
    """A path only one server may use, and the setting that gives a server another."""

    what: str  # e.g. "SQLite database"
    path: Path
    setting: str  # e.g. "--database-url sqlite:///PATH"


def private_paths(database_url: str, sandbox_dir: Path | None) -> list[Private]:
    """What a server with this database and (local executor) pod sandbox keeps for itself."""
    found = []
    database = sqlite_file(database_url)
    if database is not None:
        found.append(Private("SQLite database", database, "--database-url sqlite:///PATH"))
    if sandbox_dir is not None:
        found.append(Private("pod sandbox", sandbox_dir, "--sandbox-dir DIR"))
    return found


class InUse(OSError):
    """Another live server holds the lock: the message names the path, the holder and what
    to do."""


@dataclass(frozen=True)
class Lock:
    """One lock file and the private paths it guards; `data_dir` when it is the data
    directory's own lock."""

    file: Path
    guards: tuple[Private, ...]
    data_dir: Path | None = None

    def refusal(self, holder: str) -> str:
        """Why a server cannot start while `holder` (e.g. "pid 12") holds this lock."""
        by = f"another armada-server ({holder})" if holder else "another armada-server"
        if self.data_dir is not None:
            kept = " and ".join(f"its {p.what}" for p in self.guards)
            return (
                f"the data directory {self.data_dir} is in use by {by}, which keeps {kept} "
                f"there (lock {self.file}); stop that server, or give this one another data "
                "directory: --data-dir DIR (or data_dir: in the config file)"
            )
        [private] = self.guards
        return (
            f"the {private.what} {private.path} is in use by {by} (lock {self.file}); stop "
            f"that server, or give this one another: {private.setting}"
        )


def _inside(path: Path, directory: Path) -> bool:
    return path.absolute().resolve().is_relative_to(directory.absolute().resolve())


def plan_locks(data_dir: Path, private: list[Private]) -> list[Lock]:
    """The data directory's lock for the private paths in it (none if there are none), and
    one beside each private path elsewhere."""
    inside = tuple(p for p in private if _inside(p.path, data_dir))
    locks = [Lock(data_dir / LOCK_NAME, inside, data_dir)] if inside else []
    for p in private:
        if p not in inside:
            path = p.path.absolute()
            locks.append(Lock(path.with_name(path.name + ".lock"), (p,)))
    return locks


class ServerLocks:
    """Holds `locks` from `acquire()` to `release()` (or the end of the process)."""

    def __init__(self, locks: list[Lock]) -> None:
        self.locks = locks
        self._held: list[int] = []

    def acquire(self) -> None:
        """Take every lock, or none: InUse names the first one another server holds."""
        try:
            for lock in self.locks:
                self._held.append(_take(lock))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        while self._held:
            os.close(self._held.pop())  # closing the descriptor releases its flock


def _take(lock: Lock) -> int:
    """The open descriptor holding `lock`, with this process's pid written in the file."""
    lock.file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock.file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise InUse(lock.refusal(holder)) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _holder(fd: int) -> str:
    """The holder as it wrote itself in the file ("pid N"); empty when not known."""
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 64, 0).decode().strip()
        return f"pid {int(text)}"
    return ""
