"""Limits the local executor enforces: memory (OOMKilled) and activeDeadlineSeconds."""

from __future__ import annotations

import time

import pytest

from armada_server.executors.local import LocalPodRunner, PodPhase

from .helpers import container, memory_limit, pod, py, results, sh, start

pytestmark = pytest.mark.timeout(60)

ALLOCATE_200MB = """
import time
block = b'x' * (200 * 1024 * 1024)  # written, so resident
print('allocated', flush=True)
time.sleep(10)
"""


async def test_memory_limit_exceeded_is_oom_killed(runner: LocalPodRunner) -> None:
    began = time.monotonic()
    handle = start(
        runner,
        pod(
            py("main", ALLOCATE_200MB, resources=memory_limit("64Mi")),
            container("sidecar", command=["sleep", "30"]),
        ),
    )
    final = await handle.wait()
    assert time.monotonic() - began < 8
    assert (final.phase, final.reason, final.condition) == (
        PodPhase.FAILED,
        "OOMKilled",
        "OOMKilled",
    )
    assert sorted(results(final)) == [("main", 137, "OOMKilled"), ("sidecar", 143, "Error")]
    failure = final.failure()
    assert failure is not None and failure.condition == "OOMKilled"


async def test_memory_of_children_counts(runner: LocalPodRunner) -> None:
    script = (
        f"python_child() {{ '{__import__('sys').executable}' -c \"$1\"; }}; "
        f'python_child "{ALLOCATE_200MB}"; echo survived'
    )
    final = await start(runner, pod(sh("main", script, resources=memory_limit("64Mi")))).wait()
    assert (final.phase, final.condition) == (PodPhase.FAILED, "OOMKilled")
    assert results(final) == [("main", 137, "OOMKilled")]


async def test_within_the_memory_limit(runner: LocalPodRunner) -> None:
    code = "block = b'x' * (20 * 1024 * 1024)"
    final = await start(runner, pod(py("main", code, resources=memory_limit("256Mi")))).wait()
    assert final.phase is PodPhase.SUCCEEDED


async def test_init_container_out_of_memory(runner: LocalPodRunner) -> None:
    spec = pod(
        sh("main", "true"), init=[py("init", ALLOCATE_200MB, resources=memory_limit("64Mi"))]
    )
    final = await start(runner, spec).wait()
    assert (final.phase, final.reason, final.condition) == (
        PodPhase.FAILED,
        "Init:OOMKilled",
        "OOMKilled",
    )
    assert final.containers[0].init_container


async def test_active_deadline_exceeded(runner: LocalPodRunner) -> None:
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: print('terminated', flush=True))\n"
        "time.sleep(60)"
    )
    began = time.monotonic()
    handle = start(
        runner,
        pod(
            container("main", command=["sleep", "60"]),
            py("stubborn", stubborn),
            grace=1,
            deadline=1,
        ),
    )
    final = await handle.wait()
    elapsed = time.monotonic() - began
    # 1 s deadline, then 1 s grace for the one ignoring SIGTERM (never the 60 s of sleep);
    # the upper bound is loose because CI machines can be slow.
    assert 1.9 <= elapsed < 30
    assert (final.phase, final.reason, final.condition) == (
        PodPhase.FAILED,
        "DeadlineExceeded",
        "DeadlineExceeded",
    )
    assert results(final) == [("main", 143, "Error"), ("stubborn", 137, "Error")]
    # It got SIGTERM (a second one, when the first failure stops the rest, is harmless).
    assert {line.text for line in handle.read_logs("stubborn")} == {"terminated"}


async def test_deadline_covers_init_containers(runner: LocalPodRunner) -> None:
    spec = pod(sh("main", "echo never"), init=[sh("setup", "sleep 60")], deadline=1)
    final = await start(runner, spec).wait()
    assert (final.phase, final.condition) == (PodPhase.FAILED, "DeadlineExceeded")
    assert results(final) == [("setup", 143, "Error")]


async def test_a_pod_finishing_in_time_is_unaffected(runner: LocalPodRunner) -> None:
    final = await start(runner, pod(sh("main", "sleep 0.1"), deadline=5)).wait()
    assert (final.phase, final.condition) == (PodPhase.SUCCEEDED, "")
