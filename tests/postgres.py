"""A real PostgreSQL server for the test session, started from the installed binaries.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user. Each test
that asks for a database gets a new, empty one. The server keeps its files in memory (/dev/shm)
when there is room: creating a database is then a matter of milliseconds rather than a copy of
its template to disk, and nothing of it needs to outlive the session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SEARCH = ["/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"]
#: Memory the files may use: the server's databases take a few hundred megabytes for a session.
IN_MEMORY = Path("/dev/shm")
IN_MEMORY_FREE = 4 << 30


def find_bin(name: str) -> str | None:
    for d in SEARCH:
        if (Path(d) / name).exists():
            return str(Path(d) / name)
    return shutil.which(name)


def data_parent() -> str | None:
    """Where the server's directory goes: IN_MEMORY if it has room, else the temporary one."""
    try:
        roomy = shutil.disk_usage(IN_MEMORY).free >= IN_MEMORY_FREE
    except OSError:
        roomy = False
    return str(IN_MEMORY) if roomy else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self) -> None:
        initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise FileNotFoundError("PostgreSQL binaries (initdb, pg_ctl) not found")
        self.pg_ctl = pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="armada-pg-", dir=data_parent()))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            [
                initdb,
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        )
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            [
                pg_ctl,
                "-D",
                str(self.data),
                "-o",
                opts,
                "-l",
                str(self.root / "log"),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        self._counter = 0

    def _run(self, argv: list[str]) -> None:
        if self.as_postgres:
            cmd = " ".join(_quote(a) for a in argv)
            argv = ["su", "postgres", "-s", "/bin/sh", "-c", cmd]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        self._counter += 1
        name = f"test_{self._counter}"
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"
