"""A container's supervisor: starts its command, logs its output, records how it ended.

The executor starts one shim per container (`python -I -S shim.py SPEC`), in a session of its
own, and the shim starts the container's command in another new session. The shim, not the
executor, holds the command's output pipes and is the command's parent, so the container keeps
running, logging and having its exit status recorded when the executor dies; a restarted
executor adopts it from the files the shim writes beside the container's other state:

    <state>.claim   "<shim pid> <shim start time>"   the shim owns this container (written once)
    <state>.pid     "<pid> <start time>"              the command is running
    <state>.exit    {"returncode": N, "fenced": B, "error": "..."}   the command has ended

Fencing: when the executor's heartbeat file holds a deadline (seconds of CLOCK_BOOTTIME) that
has passed, the executor has not synced with the server for long enough that the server may
give the run to someone else: the shim SIGKILLs the container then, so that a job never runs
twice at once. Without a heartbeat file there is no fencing.

Standard library only, and loaded by path, so it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

# Without importing typing, which would slow the start (mypy takes the name as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .logs import LogWriter

TICK = 0.1  # seconds between looks at the heartbeat
DRAIN_SECONDS = 1.0  # output still held by escaped processes is dropped after this


def boottime() -> float:
    """The clock of heartbeat deadlines: shared by every process and counting suspends."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (0 when it does not exist)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0
    return int(data[data.rindex(b")") + 2 :].split()[19])


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def claim(path: Path) -> bool:
    """Record this shim as the container's; False if another shim got there first."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{os.getpid()} {start_time(os.getpid())}")
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink()
    return True


def fence_deadline(heartbeat: str) -> float | None:
    if not heartbeat:
        return None
    try:
        return float(Path(heartbeat).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def marked_processes(marker: dict[str, str]) -> list[int]:
    """Live processes whose environment carries all of `marker` (the container's own)."""
    wanted = {f"{k}={v}".encode() for k, v in marker.items()}
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if wanted.issubset(environ.split(b"\0")):
            found.append(int(name))
    return found


def exited(pid: int) -> bool:
    """Whether the command has exited, without reaping it. Until it is reaped its pid, and
    so its process group's id, cannot be given to another process: killing the group is
    only safe before then (pids are reused quickly: pid_max may be 32768, and database
    servers start every backend as a group leader)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
    except ChildProcessError:
        return True


def kill_container(pid: int, marker: dict[str, str]) -> None:
    """SIGKILL the command's process group (call it only while the command is not yet
    reaped) and every process carrying its marker."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if marker:
        for other in marked_processes(marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(other, signal.SIGKILL)


def tell(line: str) -> None:
    """One status line for the executor that started us (it may be gone)."""
    with contextlib.suppress(OSError):
        os.write(1, f"{line}\n".encode())


class Fence:
    """Kills the container once the executor's heartbeat deadline has passed (once)."""

    def __init__(self, heartbeat: str, pid: int, marker: dict[str, str]) -> None:
        self.heartbeat = heartbeat
        self.pid = pid
        self.marker = marker
        self.fenced = False

    def check(self) -> None:
        if self.fenced:
            return
        deadline = fence_deadline(self.heartbeat)
        if deadline is not None and boottime() > deadline:
            self.fenced = True
            kill_container(self.pid, self.marker)


def load_log_writer(path: Path) -> LogWriter:
    """logs.py's LogWriter for `path`; logs.py is loaded by path, as this module is."""
    logs = importlib.util.spec_from_file_location(
        "_armada_local_logs", Path(__file__).with_name("logs.py")
    )
    assert logs is not None and logs.loader is not None
    module = importlib.util.module_from_spec(logs)
    sys.modules[logs.name] = module
    logs.loader.exec_module(module)
    writer: LogWriter = module.LogWriter(path)
    return writer


def start_command(
    spec: dict[str, Any], log: LogWriter, exit_path: Path
) -> tuple[subprocess.Popen[bytes], int, int] | None:
    """The command started in a session of its own, with its stdout and stderr pipes'
    reading ends; None when it cannot start (the error is logged and recorded as its end)."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        child = subprocess.Popen(
            spec["argv"],
            cwd=spec["cwd"],
            env=spec["env"],
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            start_new_session=True,
            close_fds=True,
            preexec_fn=default_signals,
        )
    except OSError as e:
        error = f"cannot run {spec['argv'][0]!r}: {e.strerror or e}"
        log.write("stderr", f"{error}\n".encode())
        log.close()
        write_atomically(exit_path, json.dumps({"error": error}))
        tell(f"error {error}")
        os.close(out_read)
        os.close(err_read)
        return None
    finally:
        os.close(out_write)
        os.close(err_write)
    return child, out_read, err_read


def follow(
    child: subprocess.Popen[bytes], streams: dict[int, str], log: LogWriter, fence: Fence
) -> int:
    """Log the command's output until both pipes close (or, once it has exited, for at
    most DRAIN_SECONDS more), fencing meanwhile; returns its exit status."""
    pid = child.pid
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    pidfd = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
        selector.register(pidfd, selectors.EVENT_READ)
    returncode: int | None = None
    drain_until = None
    while streams and (drain_until is None or time.monotonic() < drain_until):
        for key, _ in selector.select(TICK):
            if key.fd != pidfd:  # (the command's exit is checked below)
                read_output(key.fd, streams, log, selector)
        if returncode is None:
            fence.check()
            if exited(pid):
                # What the command left behind goes with it, as when a container stops.
                kill_container(pid, fence.marker)
                returncode = child.wait()
                if pidfd is not None:
                    selector.unregister(pidfd)
                    os.close(pidfd)
                drain_until = time.monotonic() + DRAIN_SECONDS
    if returncode is None:  # both pipes closed early: wait for the command itself
        while not exited(pid):
            fence.check()
            time.sleep(TICK)
        kill_container(pid, fence.marker)
        returncode = child.wait()
    for fd in list(streams):
        os.close(fd)
    return returncode


def read_output(
    fd: int, streams: dict[int, str], log: LogWriter, selector: selectors.BaseSelector
) -> None:
    """Log what the pipe `fd` holds; at its end, stop reading it."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if data:
        log.write(streams[fd], data)
    else:
        selector.unregister(fd)
        os.close(fd)
        log.end_stream(streams.pop(fd))


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    state = Path(spec["state"])
    if not claim(state.with_name(state.name + ".claim")):
        tell("claimed")
        return 0
    log = load_log_writer(Path(spec["log"]))
    exit_path = state.with_name(state.name + ".exit")
    started = start_command(spec, log, exit_path)
    if started is None:
        return 0
    child, out_read, err_read = started
    pid = child.pid
    write_atomically(state.with_name(state.name + ".pid"), f"{pid} {start_time(pid)}")
    tell(f"pid {pid} {start_time(pid)}")
    os.close(1)  # nothing more to say; the executor may stop listening

    fence = Fence(spec.get("heartbeat") or "", pid, dict(spec.get("marker") or {}))
    returncode = follow(child, {out_read: "stdout", err_read: "stderr"}, log, fence)
    log.close()
    write_atomically(exit_path, json.dumps({"returncode": returncode, "fenced": fence.fenced}))
    return 0


def default_signals() -> None:
    """A container starts as a pod's process does: no signal blocked or ignored, whatever the
    thread that started its shim had (signal masks and ignored signals survive exec, and a
    container that cannot see SIGTERM is killed at the end of its grace period instead)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # the shim's own handlers must run
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the executor
    sys.exit(main(sys.argv[1]))
