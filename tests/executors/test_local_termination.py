"""Stopping local pods: graceful termination, SIGKILL after the grace period, whole trees."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import time
from pathlib import Path

import pytest

from armada_server.executors.local import LocalPodRunner, PodPhase, PodStatus

from .helpers import (
    alive,
    container,
    pod,
    processes_under,
    py,
    results,
    sh,
    start,
    wait_for_output,
)

pytestmark = pytest.mark.timeout(60)

TRAPS_SIGTERM = """
import signal, sys, time, os
def bye(*_):
    print('bye', flush=True)
    open(os.environ['ARMADA_TERMINATION_MESSAGE_PATH'], 'w').write('checkpointed')
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print('ready', flush=True)
time.sleep(60)
"""

IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print('ready', flush=True)
time.sleep(60)
"""


async def test_graceful_termination_is_honoured(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(py("main", TRAPS_SIGTERM), grace=10))
    await wait_for_output(handle, "main", "ready")
    began = time.monotonic()
    handle.terminate()
    final = await handle.wait()
    assert time.monotonic() - began < 5  # exited on SIGTERM, long before the 10 s grace
    assert (final.phase, final.reason) == (PodPhase.KILLED, "Killed")
    assert results(final) == [("main", 0, "Completed")]
    assert final.containers[0].message == "checkpointed"
    assert [line.text for line in handle.read_logs("main")] == ["ready", "bye"]
    assert final.failure() is None


async def test_sigkill_after_the_grace_period(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(py("main", IGNORES_SIGTERM), grace=30))
    await wait_for_output(handle, "main", "ready")
    began = time.monotonic()
    handle.terminate(grace_seconds=0.5)
    final = await handle.wait()
    assert 0.45 <= time.monotonic() - began < 5
    assert final.phase is PodPhase.KILLED
    assert results(final) == [("main", 137, "Error")]


async def test_pod_grace_period_applies_by_default(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(py("main", IGNORES_SIGTERM), grace=1))
    await wait_for_output(handle, "main", "ready")
    began = time.monotonic()
    handle.terminate()
    await handle.wait()
    assert 0.95 <= time.monotonic() - began < 5


async def test_terminating_again_can_shorten_the_grace_period(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(py("main", IGNORES_SIGTERM), grace=30))
    await wait_for_output(handle, "main", "ready")
    began = time.monotonic()
    handle.terminate()
    await asyncio.sleep(0.2)
    handle.terminate(grace_seconds=60)  # never extends
    handle.terminate(grace_seconds=0)
    final = await handle.wait()
    assert time.monotonic() - began < 5
    assert results(final) == [("main", 137, "Error")]


TREE = """
sleep 61 & echo "child $!"
(sleep 62 & echo "grandchild $!"; wait) &
setsid sleep 63 & echo "own-session $!"
(setsid sleep 64 & echo "daemon $!") ; # its parent exits at once: a double-forked daemon
echo ready
wait
"""


async def test_terminating_kills_the_whole_process_tree(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(sh("main", TREE), grace=1))
    await wait_for_output(handle, "main", "ready")
    await asyncio.sleep(0.3)  # a few samples of the process tree
    pids = {
        line.text.split()[0]: int(line.text.split()[1])
        for line in handle.read_logs("main")
        if line.text != "ready"
    }
    assert set(pids) == {"child", "grandchild", "own-session", "daemon"}
    assert all(alive(pid) for pid in pids.values())
    handle.terminate()
    final = await handle.wait()
    assert final.phase is PodPhase.KILLED
    assert {name: pid for name, pid in pids.items() if alive(pid)} == {}
    assert processes_under(runner.sandbox_root) == []


async def test_terminating_during_init_containers(runner: LocalPodRunner) -> None:
    statuses: list[PodStatus] = []
    handle = start(
        runner,
        pod(sh("main", "echo never"), init=[sh("setup", "echo ready; sleep 30")]),
        statuses=statuses,
    )
    await wait_for_output(handle, "setup", "ready")
    handle.terminate()
    final = await handle.wait()
    assert final.phase is PodPhase.KILLED
    assert results(final) == [("setup", 143, "Error")]
    assert [s.phase for s in statuses] == [PodPhase.PENDING, PodPhase.KILLED]


async def test_terminating_before_anything_started(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(sh("main", "echo never")))
    handle.terminate()
    final = await handle.wait()
    assert (final.phase, final.containers) == (PodPhase.KILLED, ())
    assert handle.read_logs("main") == []


async def test_terminating_a_finished_pod_changes_nothing(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(sh("main", "true")))
    final = await handle.wait()
    handle.terminate(0)
    assert (await handle.wait()) == final and final.phase is PodPhase.SUCCEEDED


async def test_a_failure_first_is_not_turned_into_killed(runner: LocalPodRunner) -> None:
    broken = sh("broken", "while [ ! -e go ]; do sleep 0.02; done; exit 9")
    handle = start(runner, pod(broken, py("slow", IGNORES_SIGTERM), grace=30))
    await wait_for_output(handle, "slow", "ready")
    (handle.sandbox / "work" / "go").touch()
    await asyncio.sleep(0.5)  # broken has exited: the pod is failing, slow ignores SIGTERM
    assert not handle.done
    handle.terminate(0)  # the cancel comes second: it only brings the SIGKILL forward
    final = await handle.wait()
    assert (final.phase, final.reason) == (PodPhase.FAILED, "Error")
    assert sorted(results(final)) == [("broken", 9, "Error"), ("slow", 137, "Error")]


async def test_shutdown_leaves_no_process_behind(runner: LocalPodRunner) -> None:
    handles = [
        start(runner, pod(sh("main", TREE), container("other", command=["sleep", "60"]), grace=30))
        for _ in range(3)
    ]
    for handle in handles:
        await wait_for_output(handle, "main", "ready")
    assert len(processes_under(runner.sandbox_root)) >= 3 * 6
    await runner.shutdown(grace_seconds=0.2)
    assert [h.status.phase for h in handles] == [PodPhase.KILLED] * 3
    assert runner.active == ()
    assert processes_under(runner.sandbox_root) == []


async def test_kill_all_is_immediate(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(py("main", IGNORES_SIGTERM), grace=30))
    await wait_for_output(handle, "main", "ready")
    runner.kill_all()
    final = await handle.wait()
    # Nobody asked to stop the pod: to its supervisor the container just died of SIGKILL.
    assert (final.phase, results(final)) == (PodPhase.FAILED, [("main", 137, "Error")])


def test_a_closing_event_loop_leaves_no_process_behind(tmp_path: Path) -> None:
    """asyncio.run cancels what is still running when its main coroutine returns."""
    pods = LocalPodRunner(tmp_path / "pods")
    statuses: list[PodStatus] = []

    async def leave_early() -> None:
        handle = start(pods, pod(sh("main", TREE), grace=30), statuses=statuses)
        await wait_for_output(handle, "main", "ready")

    asyncio.run(leave_early())
    assert processes_under(pods.sandbox_root) == []
    assert (statuses[-1].phase, statuses[-1].reason) == (PodPhase.FAILED, "ExecutorStopped")


async def test_a_failing_status_callback_changes_nothing(runner: LocalPodRunner) -> None:
    def broken(status: PodStatus) -> None:
        raise RuntimeError("bug in the caller")

    handle = runner.start(
        "j", "r", "armada-j-0", "default", "node-1", pod(sh("main", "true")), on_status=broken
    )
    assert (await handle.wait()).phase is PodPhase.SUCCEEDED


async def test_containers_see_sigterm_whatever_the_executor_blocks_or_ignores(
    runner: LocalPodRunner,
) -> None:
    """Signal masks and ignored signals survive exec: a container must not inherit those of
    the thread that started its shim (a library in the executor's process may have set
    them), or SIGTERM never reaches it and it is killed at the end of its grace period."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    ignored = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        # A pool made now: its threads inherit the blocked mask, the ignored SIGTERM.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            asyncio.get_running_loop().set_default_executor(pool)
            handle = start(runner, pod(sh("main", "echo ready; sleep 30")))
            await wait_for_output(handle, "main", "ready")
            handle.terminate(grace_seconds=20)
            final = await handle.wait()
    finally:
        signal.signal(signal.SIGTERM, ignored)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    assert results(final) == [("main", 143, "Error")]  # SIGTERM, not the grace's SIGKILL
