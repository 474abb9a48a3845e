"""One container as local processes: its main process, everything under it, and its output.

The main process leads a new session (so a new process group), standing in for a container's
PID 1. When it exits, whatever it left behind is killed, as when a container stops. No thread
is used: exit is noticed through a pidfd and output through non-blocking pipes, both on the
event loop, so a server can run many containers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

from armada_core.jobs.model import ContainerResult

from . import procfs
from .logs import LogWriter
from .messages import termination_message
from .plan import ContainerPlan

START_ERROR = "StartError"
START_ERROR_EXIT_CODE = 128  # what container runtimes report when the process cannot start
OUTPUT_DRAIN_SECONDS = 1.0
_READ_SIZE = 64 * 1024
_DRAIN_READS = 16


class ContainerProcess:
    """A started (or failed-to-start) container; `on_exit` is called once when it exits."""

    def __init__(self, plan: ContainerPlan, on_exit: Callable[[], None]) -> None:
        self.plan = plan
        self.pid = 0
        self.members: dict[int, int] = {}  # pid -> start time of every process it is known to own
        self.rss_bytes = 0
        self.oom_killed = False
        self.start_error = ""
        self._on_exit = on_exit
        self._popen: subprocess.Popen[bytes] | None = None
        self._returncode: int | None = None
        self._pidfd: int | None = None
        self._streams: dict[int, str] = {}
        self._log: LogWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exited = asyncio.Event()
        self._drained = asyncio.Event()

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

    def start(self) -> bool:
        """Start the main process; False (with `start_error` set) when it cannot be started."""
        loop = self._loop = asyncio.get_running_loop()
        self._log = LogWriter(self.plan.log_path)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            self._popen = subprocess.Popen(
                self.plan.argv, cwd=self.plan.cwd, env=dict(self.plan.env),
                stdin=subprocess.DEVNULL, stdout=out_write, stderr=err_write,
                start_new_session=True, close_fds=True)
        except OSError as e:
            os.close(out_read)
            os.close(err_read)
            self.start_error = f"cannot run {self.plan.argv[0]!r}: {e.strerror or e}"
            self._log.write("stderr", f"{self.start_error}\n".encode())
            self._log.close()
            self._drained.set()
            self._exited.set()
            return False
        finally:
            os.close(out_write)
            os.close(err_write)
        self.pid = self._popen.pid
        info = procfs.read_process(self.pid)
        if info is not None:
            self.members[self.pid] = info.start_time
        for fd, stream in ((out_read, "stdout"), (err_read, "stderr")):
            os.set_blocking(fd, False)
            self._streams[fd] = stream
            loop.add_reader(fd, self._read, fd)
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # no pidfds (old kernel, seccomp): the monitor polls instead
            self._pidfd = None
        else:
            loop.add_reader(self._pidfd, self.poll)
        return True

    def poll(self) -> None:
        """Notice the main process's exit (reaping it), and kill what it left behind."""
        if self._popen is None or self.exited:
            return
        code = self._popen.poll()
        if code is None:
            return
        self._returncode = code
        if self._pidfd is not None and self._loop is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        # Still marked running, so the group is signalled too: it exists while any member lives,
        # so its id cannot have been reused yet.
        self.signal(signal.SIGKILL)
        self._exited.set()
        self._on_exit()

    def signal(self, sig: int) -> None:
        """Send `sig` to everything of the container: its process group, every process seen
        in its tree, and any process carrying its marker variables (double-forked daemons).

        Once the main process has been reaped its pid (the group id) may be reused, so the
        group is no longer signalled; the other processes are each identified by their start
        time or their environment.
        """
        if self._popen is None:
            return
        if not self.exited:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
        targets = {info.pid: info for info in procfs.processes_with_env(self.plan.marker)}
        for pid, start_time in self.members.items():
            info = procfs.read_process(pid)
            if info is not None and info.start_time == start_time and info.alive:
                targets[pid] = info
        for pid, info in targets.items():
            if not self.exited and info.pgid == self.pid:
                continue  # just signalled through its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill_for_memory(self) -> None:
        """Over its memory limit: kill it at once, as the kernel's OOM killer would."""
        self.oom_killed = True
        self.signal(signal.SIGKILL)

    async def finished(self) -> None:
        """Wait for the exit and for the output to be written (dropped after a short wait
        if a process that escaped the container still holds the pipes)."""
        await self._exited.wait()
        if not self._drained.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), OUTPUT_DRAIN_SECONDS)
        self.close()

    def close(self) -> None:
        """Stop reading output and close the log; idempotent."""
        for fd in list(self._streams):
            for _ in range(_DRAIN_READS):  # whatever is already in the pipe, within reason
                if not self._read(fd):
                    break
            self._close_stream(fd)
        if self._log is not None:
            self._log.close()

    def reap(self, timeout: float) -> None:
        """Blocking wait for a killed main process, for shutdown paths that cannot await."""
        if self._popen is not None and not self.exited:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout)
            self.poll()

    def result(self) -> ContainerResult:
        code = self.exit_code
        if self.start_error:
            reason = START_ERROR
        elif self.oom_killed:
            reason = "OOMKilled"
        else:
            reason = "Completed" if code == 0 else "Error"
        message = self.start_error or termination_message(self.plan, code)
        return ContainerResult(name=self.name, exit_code=code, message=message, reason=reason,
                               init_container=self.plan.init)

    def _read(self, fd: int) -> bool:
        """Copy what the pipe holds to the log; False once it is empty or closed."""
        stream = self._streams.get(fd)
        if stream is None:
            return False
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._close_stream(fd)
            return False
        if self._log is not None:
            self._log.write(stream, data)
        return True

    def _close_stream(self, fd: int) -> None:
        stream = self._streams.pop(fd, None)
        if stream is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(fd)
        os.close(fd)
        if self._log is not None:
            self._log.end_stream(stream)
        if not self._streams:
            self._drained.set()
