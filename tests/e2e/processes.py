"""Real processes for end-to-end tests: servers and executors started from the virtualenv,
their output in files the test reads while they run, SIGKILL and SIGTERM on demand."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

BIN = Path(sys.executable).parent
LISTENING = re.compile(r"listening on (\S+):(\d+)")
LEADER = "this replica is now the scheduling leader"


# --- processes ------------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, parents first (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        tree.append(current)
        todo += children.get(current, [])
    return tree


class Process:
    """A command whose output goes to a file the test can read while it runs.

    `env` replaces the environment it inherits; `new_session` starts it in a session (and
    process group) of its own, so nothing sent to the test's group reaches it."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        new_session: bool = False,
    ) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._out = self.log.open("wb")
        self.popen = subprocess.Popen(
            argv,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=log_dir,
            env=dict(env) if env is not None else None,
            start_new_session=new_session,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float = 60) -> re.Match[str]:
        """The first match of `pattern` in the output, waiting for it to appear."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.output())
            if match:
                return match
            if self.popen.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited ({self.popen.returncode}) before "
                    f"printing {regex.pattern!r}:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} did not print {regex.pattern!r} in {timeout}s:\n{self.output()}"
                )
            time.sleep(0.05)

    def kill(self, *, tree: bool = False) -> None:
        """SIGKILL: the process gets no chance to clean anything up. With `tree`, every
        process it started goes with it (as when its machine or container goes away)."""
        if self.popen.poll() is None:
            for pid in process_tree(self.popen.pid) if tree else [self.popen.pid]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self.popen.wait(30)

    def stop(self) -> None:
        """SIGTERM (graceful), then SIGKILL if it does not finish in time."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._out.close()


def start_server(
    start: Callable[..., Process], name: str, tmp_path: Path, database_url: str, **settings: object
) -> tuple[Process, str]:
    """`armada-server --executor none` with a short config file; returns it and its address."""
    config = tmp_path / f"{name}.yaml"
    config.write_text("".join(f"{key}: {value}\n" for key, value in settings.items()))
    server = start(
        name,
        str(BIN / "armada-server"),
        "--config",
        str(config),
        "--port",
        "0",
        "--http-port",
        "0",
        "--executor",
        "none",
        "--database-url",
        database_url,
    )
    match = server.wait_for(LISTENING, timeout=120)
    return server, f"{match.group(1)}:{match.group(2)}"


def server_arguments(addresses: str | Sequence[str]) -> list[str]:
    """`--server` argument(s) for an executor that should fail over between `addresses`.

    Several addresses go in the form `armada-executor --server` declares (repeated, or one
    comma-separated value). An executor that takes a single address gets gRPC's own
    multi-address target (`ipv4:HOST:PORT,HOST:PORT`), whose channel moves to the next
    address when the one it uses goes away.
    """
    if isinstance(addresses, str):
        return ["--server", addresses]
    if len(addresses) == 1:
        return ["--server", addresses[0]]
    from armada_server.executor_cli import build_parser

    [action] = [a for a in build_parser()._actions if "--server" in a.option_strings]
    if isinstance(action, argparse._AppendAction):
        return [arg for address in addresses for arg in ("--server", address)]
    if action.nargs in ("+", "*"):
        return ["--server", *addresses]
    if "comma" in (action.help or "") or "several" in (action.help or ""):
        return ["--server", ",".join(addresses)]
    return ["--server", "ipv4:" + ",".join(addresses)]


def start_executor(
    start: Callable[..., Process],
    name: str,
    address: str | Sequence[str],
    kind: str,
    tmp_path: Path,
    *nodes: str,
    interval: float = 0.2,
    pool: str = "default",
    sandbox: Path | None = None,
    executor_id: str | None = None,
) -> Process:
    """`armada-executor` syncing with `address` (or failing over between several); its id
    is `executor_id` (default: `name`), its pods live in `sandbox` (default: `<name>-pods`
    under `tmp_path`)."""
    argv = [
        str(BIN / "armada-executor"),
        *server_arguments(address),
        "--id",
        executor_id or name,
        "--kind",
        kind,
        "--pool",
        pool,
        "--interval",
        str(interval),
        "--sandbox-dir",
        str(sandbox or tmp_path / f"{name}-pods"),
    ]
    for group in nodes:
        argv += ["--nodes", group]
    executor = start(name, *argv)
    executor.wait_for("syncing with", timeout=120)
    return executor


def processes_mentioning(text: str) -> list[int]:
    """Pids of this user's processes whose environment contains `text` (pods of the local
    executor have their sandbox directory in theirs; the executor itself does not)."""
    found = []
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            data = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours
            continue
        if needle in data:
            found.append(int(entry.name))
    return found


def kill_leftovers(text: str) -> list[int]:
    """SIGKILL every process (and its process group) mentioning `text`; returns their pids."""
    pids = processes_mentioning(text)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while processes_mentioning(text) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids


def wait_until(
    condition: Callable[[], object], timeout: float, what: str, interval: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
