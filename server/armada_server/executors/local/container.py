"""One container as local processes: its main process, everything under it, and its output.

The main process leads a new session (so a new process group), standing in for a container's
PID 1. It is started, logged and waited for by a shim (shim.py), a small process of its own,
so that the container outlives the executor: a restarted executor adopts it (`adopt`) from the
files the shim keeps in the sandbox, and learns its exit status from them. When the main process
exits, whatever it left behind is killed, as when a container stops. No thread is used: the
shim's exit is noticed through a pidfd on the event loop, so a server can run many containers
at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from armada_core.jobs.model import ContainerResult

from . import procfs
from .messages import termination_message
from .plan import ContainerPlan

START_ERROR = "StartError"
START_ERROR_EXIT_CODE = 128  # what container runtimes report when the process cannot start
SHIM = Path(__file__).with_name("shim.py")
STATUS_SECONDS = 30.0  # how long a shim may take to say whether the command started
ADOPT_SECONDS = 5.0  # how long an adopted shim may take to record the command's pid
LOST = "the container's supervisor ended without recording how the container ended"


def _suffixed(stem: Path, suffix: str) -> Path:
    return stem.with_name(stem.name + suffix)


def _read_pair(path: Path) -> tuple[int, int] | None:
    try:
        first, second = path.read_text().split()
        return int(first), int(second)
    except (OSError, ValueError):
        return None


class ContainerProcess:
    """A started (or failed-to-start) container; `on_exit` is called once when it exits.

    `state` is the stem of its state files in the sandbox; `heartbeat` the executor's heartbeat
    file, which the shim watches for fencing (None: no fencing).
    """

    def __init__(
        self,
        plan: ContainerPlan,
        on_exit: Callable[[], None],
        *,
        state: Path,
        heartbeat: Path | None = None,
    ) -> None:
        self.plan = plan
        self.pid = 0
        self.members: dict[int, int] = {}  # pid -> start time of every process it is known to own
        self.rss_bytes = 0
        self.oom_killed = False
        self.fenced = False  # killed by its shim: the executor had not synced for too long
        self.lost = False  # its shim vanished without saying how it ended
        self.start_error = ""
        self._on_exit = on_exit
        self._state = state
        self._heartbeat = heartbeat
        self._pid_start = 0
        #: When its process started (None until it has).
        self.started_at: datetime | None = None
        self._shim: subprocess.Popen[bytes] | None = None  # when we started it
        self._shim_pid = 0
        self._shim_start = 0
        self._returncode: int | None = None
        self._pidfd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exited = asyncio.Event()

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def memory_limit(self) -> int | None:
        return self.plan.memory_limit

    @property
    def exited(self) -> bool:
        return self._exited.is_set()

    @property
    def exit_code(self) -> int:
        """The exit status as Kubernetes reports it: 128 + the signal for a killed process."""
        if self.start_error:
            return START_ERROR_EXIT_CODE
        code = self._returncode
        if code is None:
            raise RuntimeError(f"container {self.name} has not exited")
        return 128 - code if code < 0 else code

    # --- starting and adopting -----------------------------------------------------------------

    async def start(self) -> bool:
        """Start the main process through a shim; False (with `start_error` set) when it
        cannot be started."""
        self._loop = asyncio.get_running_loop()
        spec: dict[str, object] = {
            "argv": list(self.plan.argv),
            "env": dict(self.plan.env),
            "cwd": str(self.plan.cwd),
            "log": str(self.plan.log_path),
            "state": str(self._state),
            "marker": self.plan.marker,
            "heartbeat": str(self._heartbeat) if self._heartbeat else "",
        }
        spec_path = _suffixed(self._state, ".spec.json")
        try:
            # Off the event loop: forking takes milliseconds, and a hundred pods starting at
            # once must not hold up the executor's syncs (its pods fence themselves when
            # syncs stop).
            shim = await self._loop.run_in_executor(None, self._spawn, spec, spec_path)
        except OSError as e:
            return self._failed_to_start(f"cannot start the container's supervisor: {e}")
        self._shim = shim
        self._shim_pid = shim.pid
        info = procfs.read_process(self._shim_pid)
        self._shim_start = info.start_time if info is not None else 0
        line = await self._status_line()
        word, _, rest = line.partition(" ")
        if word == "pid":
            pid, start = (int(x) for x in rest.split())
            self._running(pid, start)
            return True
        if word == "claimed":  # a shim of an earlier executor got there first: adopt it
            self._shim = None
            return await self.adopt() != "absent" and not self.start_error
        self._reap_shim()
        if word == "error":
            return self._failed_to_start(rest)
        return self._failed_to_start(
            f"the container's supervisor failed (see {_suffixed(self._state, '.shim.log')})"
        )

    def _spawn(self, spec: dict[str, object], spec_path: Path) -> subprocess.Popen[bytes]:
        spec_path.write_text(json.dumps(spec))
        with open(_suffixed(self._state, ".shim.log"), "ab") as errors:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", str(SHIM), str(spec_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                start_new_session=True,
                close_fds=True,
                env={"ARMADA_SHIM": str(self._state)},
            )

    async def adopt(self) -> str:
        """Take over a container a shim already supervises (the executor restarted).

        Returns "absent" when no shim ever claimed it (start it), else "running" or
        "exited" (its result recorded, or lost if its shim died without recording it).
        """
        loop = self._loop = asyncio.get_running_loop()
        claim = _read_pair(_suffixed(self._state, ".claim"))
        if claim is None:
            if not _suffixed(self._state, ".claim").exists():
                return "absent"
            await asyncio.sleep(0.05)  # being written by a shim that is starting
            claim = _read_pair(_suffixed(self._state, ".claim")) or (0, 0)
        self._shim_pid, self._shim_start = claim
        give_up = loop.time() + ADOPT_SECONDS
        while True:
            if _suffixed(self._state, ".exit").exists():
                self._finish()
                return "exited"
            pid = _read_pair(_suffixed(self._state, ".pid"))
            if pid is not None:
                self._running(*pid)
                return "exited" if self.exited else "running"
            if not self._shim_alive() or loop.time() > give_up:
                self._kill_shim()
                self._finish()
                return "exited"
            await asyncio.sleep(0.02)

    def _running(self, pid: int, start: int) -> None:
        self.pid, self._pid_start = pid, start
        self.started_at = procfs.started_at(start)
        if procfs.is_running(pid, start):
            self.members[pid] = start
        assert self._loop is not None
        try:
            self._pidfd = os.pidfd_open(self._shim_pid)
        except OSError:  # no pidfds (old kernel, seccomp): the monitor polls instead
            self._pidfd = None
        else:
            self._loop.add_reader(self._pidfd, self.poll)
        self.poll()  # an adopted shim may have ended before the pidfd was opened

    async def _status_line(self) -> str:
        """The shim's first line of output ("pid ...", "error ..." or "claimed")."""
        assert self._shim is not None and self._shim.stdout is not None and self._loop
        loop = self._loop
        fd = self._shim.stdout.fileno()
        os.set_blocking(fd, False)
        data = bytearray()
        done: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            data.extend(chunk)
            if (not chunk or b"\n" in data) and not done.done():
                done.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await asyncio.wait_for(done, STATUS_SECONDS)
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(fd)
            self._shim.stdout.close()
        return bytes(data).split(b"\n", 1)[0].decode(errors="replace")

    def _failed_to_start(self, message: str) -> bool:
        self.start_error = message
        self._exited.set()
        return False

    # --- exiting -------------------------------------------------------------------------------

    def _shim_alive(self) -> bool:
        if self._shim is not None:
            return self._shim.poll() is None
        return bool(self._shim_pid) and procfs.is_running(self._shim_pid, self._shim_start)

    def _kill_shim(self) -> None:
        if self._shim_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._shim_pid, signal.SIGKILL)
        self._reap_shim()

    def _reap_shim(self) -> None:
        if self._shim is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._shim.wait(5)

    def poll(self) -> None:
        """Notice the shim's exit (it has recorded how the container ended)."""
        if self.exited or not self._shim_pid or self._shim_alive():
            return
        self._finish()

    def _finish(self) -> None:
        """The container has ended: read how, and kill whatever it left behind."""
        if self.exited:
            return
        if self._pidfd is not None and self._loop is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        try:
            record = json.loads(_suffixed(self._state, ".exit").read_text())
        except (OSError, ValueError):
            record = None
        if record is None:
            self.lost = True
            self._returncode = -signal.SIGKILL
        elif record.get("error"):
            self.start_error = str(record["error"])
        else:
            self._returncode = int(record.get("returncode", -signal.SIGKILL))
            self.fenced = bool(record.get("fenced"))
        if _suffixed(self._state, ".oom").exists():
            self.oom_killed = True
        self.signal(signal.SIGKILL)
        self._exited.set()
        self._on_exit()

    def signal(self, sig: int) -> None:
        """Send `sig` to everything of the container: its process group, every process seen
        in its tree, and any process carrying its marker variables (double-forked daemons).

        The group is signalled only while its leader is verifiably the container's main
        process (same start time): once the shim has reaped it, its pid may be reused. The
        other processes are each identified by their start time or their environment.
        """
        if not self.pid:
            return
        leader = procfs.is_running(self.pid, self._pid_start)
        if leader:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
        targets = {info.pid: info for info in procfs.processes_with_env(self.plan.marker)}
        for pid, start_time in self.members.items():
            info = procfs.read_process(pid)
            if info is not None and info.start_time == start_time and info.alive:
                targets[pid] = info
        for pid, info in targets.items():
            if leader and info.pgid == self.pid:
                continue  # just signalled through its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill_for_memory(self) -> None:
        """Over its memory limit: kill it at once, as the kernel's OOM killer would."""
        self.oom_killed = True
        with contextlib.suppress(OSError):  # remembered for an executor that adopts it
            _suffixed(self._state, ".oom").touch()
        self.signal(signal.SIGKILL)

    async def finished(self) -> None:
        """Wait for the exit (the shim has written the output to the log by then)."""
        await self._exited.wait()

    def close(self) -> None:
        """Stop watching the shim; idempotent."""
        if self._pidfd is not None and self._loop is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def reap(self, timeout: float) -> None:
        """Blocking wait for a killed container's shim, for shutdown paths that cannot await."""
        end = time.monotonic() + timeout
        while not self.exited and self._shim_alive() and time.monotonic() < end:
            time.sleep(0.01)
        self.poll()

    def result(self) -> ContainerResult:
        code = self.exit_code
        if self.start_error:
            reason = START_ERROR
        elif self.oom_killed:
            reason = "OOMKilled"
        else:
            reason = "Completed" if code == 0 else "Error"
        message = self.start_error or (LOST if self.lost else termination_message(self.plan, code))
        return ContainerResult(
            name=self.name,
            exit_code=code,
            message=message,
            reason=reason,
            init_container=self.plan.init,
        )
