"""Many local pods at once in one process, on one event loop, without leaking anything."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from pathlib import Path

import pytest

from armada_server.executors.local import LocalPodRunner, PodPhase

from .helpers import pod, processes_under, sh, start, wait_for_output

pytestmark = pytest.mark.timeout(60)


def open_fds() -> dict[str, str]:
    """This process's descriptors and what each points at (a file, ``pipe:[..]``, a pidfd)."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own, or closed meanwhile
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return found


async def leaked_fds(before: dict[str, str], sandbox: Path) -> dict[str, str]:
    """Descriptors of the kinds pods use (pipes, pidfds, files in the sandbox) opened since
    ``before`` and still open after a grace for collection: other tests' threads may open and
    close unrelated descriptors meanwhile, so only these kinds count."""

    def ours() -> dict[str, str]:
        return {
            fd: target
            for fd, target in open_fds().items()
            if before.get(fd) != target
            and (
                target.startswith(("pipe:", "anon_inode:[pidfd]"))
                or target.startswith(str(sandbox))
            )
        }

    for _ in range(50):
        gc.collect()
        if not (leaked := ours()):
            return leaked
        await asyncio.sleep(0.1)
    return leaked


async def test_twenty_pods_concurrently(runner: LocalPodRunner, tmp_path: Path) -> None:
    threads, fds = set(threading.enumerate()), open_fds()
    gate = tmp_path / "go"
    script = (
        'echo "$ARMADA_RUN_ID"; while [ ! -e "$GATE" ]; do sleep 0.02; done; exit $(( ${CODE} ))'
    )
    handles = [
        start(
            runner,
            pod(
                sh("main", script, env={"CODE": str(i % 3), "GATE": str(gate)}),
                sh(
                    "sidecar",
                    'while [ ! -e "$GATE" ]; do sleep 0.02; done',
                    env={"GATE": str(gate)},
                ),
            ),
        )
        for i in range(20)
    ]
    for handle in handles:
        await wait_for_output(handle, "main", handle.run_id)
        while handle.status.phase is not PodPhase.RUNNING:  # every container has started
            await asyncio.sleep(0.01)
    # Every pod is running at the same time, all on this thread.
    assert len(runner.active) == 20
    assert (
        len([1 for _, cmd in processes_under(runner.sandbox_root) if cmd.startswith("sh -c")]) == 40
    )
    # No thread per process (nor per pod): only the event loop's bounded pool, which forks
    # the containers' shims; other tests' threads may end meanwhile.
    extra = set(threading.enumerate()) - threads
    assert all(t.name.startswith("asyncio_") for t in extra), extra
    assert len(extra) <= min(32, (os.cpu_count() or 1) + 4)  # the default pool's bound
    gate.touch()
    finals = await asyncio.gather(*(h.wait() for h in handles))
    for i, (handle, final) in enumerate(zip(handles, finals, strict=True)):
        assert final.phase is (PodPhase.SUCCEEDED if i % 3 == 0 else PodPhase.FAILED)
        assert [c.name for c in final.containers] == ["main", "sidecar"]
        assert final.containers[0].exit_code == i % 3
        assert [line.text for line in handle.read_logs("main")] == [handle.run_id]
    assert runner.active == ()
    assert await leaked_fds(fds, tmp_path) == {}  # pipes, pidfds and log files all closed
