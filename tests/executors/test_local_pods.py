"""How a local pod ends: outcomes, termination messages, init containers, failing siblings."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from armada_core.api.k8s import core_v1_pb2 as k8s
from armada_core.jobs.model import ContainerResult
from armada_server.executors.local import LocalPodRunner, PodPhase, PodStatus
from armada_server.executors.local.container import ContainerProcess

from .helpers import alive, container, pod, py, results, sh, start, wait_for_output

pytestmark = pytest.mark.timeout(60)


@dataclass(frozen=True)
class Case:
    id: str
    spec: k8s.PodSpec
    phase: PodPhase
    reason: str
    containers: list[ContainerResult] = field(default_factory=list)
    message_contains: str = ""


def secret_env() -> k8s.EnvVar:
    ref = k8s.SecretKeySelector(key="password")
    ref.localObjectReference.name = "db"
    return k8s.EnvVar(name="PASSWORD", valueFrom=k8s.EnvVarSource(secretKeyRef=ref))


CASES = [
    Case(
        "succeeds",
        pod(sh("main", "echo hello")),
        PodPhase.SUCCEEDED,
        "Completed",
        [ContainerResult("main", 0, "", "Completed")],
    ),
    Case(
        "exit code and termination message",
        pod(sh("main", "echo 'disk full' > /dev/termination-log; exit 3")),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 3, "disk full\n", "Error")],
        "container main exited with code 3",
    ),
    Case(
        "message through the environment variable",
        pod(sh("main", 'printf TRANSIENT > "$ARMADA_TERMINATION_MESSAGE_PATH"; exit 1')),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 1, "TRANSIENT", "Error")],
    ),
    Case(
        "custom terminationMessagePath is mapped into the sandbox",
        pod(
            sh("main", "printf custom > /my/message; exit 2", terminationMessagePath="/my/message")
        ),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 2, "custom", "Error")],
    ),
    Case(
        "message truncated at 4 KiB",
        pod(
            py(
                "main",
                "import os; open(os.environ['ARMADA_TERMINATION_MESSAGE_PATH'], 'w')"
                ".write('x' * 10000); raise SystemExit(1)",
            )
        ),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 1, "x" * 4096, "Error")],
    ),
    Case(
        "FallbackToLogsOnError uses the log tail after a failure",
        pod(
            sh(
                "main",
                "echo first; echo second >&2; exit 4",
                terminationMessagePolicy="FallbackToLogsOnError",
            )
        ),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 4, "first\nsecond", "Error")],
    ),
    Case(
        "FallbackToLogsOnError prefers the file",
        pod(
            sh(
                "main",
                "echo noise; printf file > /dev/termination-log; exit 4",
                terminationMessagePolicy="FallbackToLogsOnError",
            )
        ),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 4, "file", "Error")],
    ),
    Case(
        "FallbackToLogsOnError ignores the logs on success",
        pod(sh("main", "echo fine", terminationMessagePolicy="FallbackToLogsOnError")),
        PodPhase.SUCCEEDED,
        "Completed",
        [ContainerResult("main", 0, "", "Completed")],
    ),
    Case(
        "the File policy never reads logs",
        pod(sh("main", "echo oops; exit 4")),
        PodPhase.FAILED,
        "Error",
        [ContainerResult("main", 4, "", "Error")],
    ),
    Case(
        "args alone are the command",
        pod(container("main", args=["sh", "-c", "exit 0"])),
        PodPhase.SUCCEEDED,
        "Completed",
        [ContainerResult("main", 0, "", "Completed")],
    ),
    Case(
        "command replaces the entrypoint and args are appended",
        pod(container("main", command=["sh", "-c", 'test "$0 $1" = "a b"'], args=["a", "b"])),
        PodPhase.SUCCEEDED,
        "Completed",
        [ContainerResult("main", 0, "", "Completed")],
    ),
    Case(
        "neither command nor args",
        pod(container("main")),
        PodPhase.FAILED,
        "CreateContainerError",
        [],
        "neither command nor args",
    ),
    Case(
        "executable not found",
        pod(container("main", command=["no-such-program-xyz"])),
        PodPhase.FAILED,
        "StartError",
        [
            ContainerResult(
                "main",
                128,
                "cannot run 'no-such-program-xyz': No such file or directory",
                "StartError",
            )
        ],
        "no-such-program-xyz",
    ),
    Case(
        "secrets cannot be read locally",
        pod(container("main", command=["true"], env=[secret_env()])),
        PodPhase.FAILED,
        "CreateContainerConfigError",
        [],
        "secret 'db'",
    ),
    Case("no containers", pod(), PodPhase.FAILED, "InvalidPodSpec", [], "no containers"),
    Case(
        "sidecar init containers are not supported",
        pod(sh("main", "true"), init=[sh("proxy", "sleep 60", restartPolicy="Always")]),
        PodPhase.FAILED,
        "InvalidPodSpec",
        [],
        "sidecar",
    ),
    Case(
        "unknown terminationMessagePolicy",
        pod(sh("main", "true", terminationMessagePolicy="Sometimes")),
        PodPhase.FAILED,
        "InvalidPodSpec",
        [],
        "'Sometimes'",
    ),
    Case(
        "duplicate container names",
        pod(sh("a", "true"), init=[sh("a", "true")]),
        PodPhase.FAILED,
        "InvalidPodSpec",
        [],
        "two containers are named 'a'",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_outcome(runner: LocalPodRunner, case: Case) -> None:
    statuses: list[PodStatus] = []
    final = await start(runner, case.spec, statuses=statuses).wait()
    assert (final.phase, final.reason) == (case.phase, case.reason), final
    assert list(final.containers) == case.containers
    assert case.message_contains in final.message
    assert statuses[-1] == final
    if case.phase is PodPhase.FAILED:
        failure = final.failure()
        assert failure is not None and failure.containers == final.containers
        assert case.reason in failure.reason
    else:
        assert final.failure() is None


async def test_transitions_pending_running_then_final(runner: LocalPodRunner) -> None:
    statuses: list[PodStatus] = []
    handle = start(runner, pod(sh("main", "true"), init=[sh("setup", "true")]), statuses=statuses)
    assert handle.status.phase is PodPhase.PENDING  # the sandbox exists before start returns
    assert handle.sandbox.is_dir()
    await handle.wait()
    assert [s.phase for s in statuses] == [PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED]
    assert all(s.job_id == handle.job_id and s.run_id == handle.run_id for s in statuses)
    assert handle.done and handle not in runner.active


async def test_running_is_stamped_when_the_container_started_not_when_seen(
    runner: LocalPodRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy executor sees a container start late (here the thread that spawned it hands it
    over half a second later): the running status still carries the process's start time, so
    a run's duration is the process's."""
    spawn = ContainerProcess._spawn

    def late(self: ContainerProcess, *args: object) -> object:
        spawned = spawn(self, *args)  # type: ignore[arg-type]
        time.sleep(0.5)
        return spawned

    monkeypatch.setattr(ContainerProcess, "_spawn", late)
    statuses: list[PodStatus] = []
    written = tmp_path / "started"
    handle = start(
        runner, pod(sh("main", f"date +%s.%N > {written}; sleep 0.2")), statuses=statuses
    )
    await handle.wait()
    [running] = [s for s in statuses if s.phase is PodPhase.RUNNING]
    began = float(written.read_text())
    assert abs(running.time.timestamp() - began) < 0.1, (running.time.timestamp(), began)


async def test_unrunnable_pod_fails_without_pending(runner: LocalPodRunner) -> None:
    statuses: list[PodStatus] = []
    final = await start(runner, pod(container("main")), statuses=statuses).wait()
    assert [s.phase for s in statuses] == [PodPhase.FAILED]
    assert "image 'ignored:latest' is ignored" in final.message


async def test_init_containers_run_in_order_before_the_rest(runner: LocalPodRunner) -> None:
    spec = pod(
        sh("main", "cat order"),
        init=[sh("first", "sleep 0.2; echo first >> order"), sh("second", "echo second >> order")],
    )
    handle = start(runner, spec)
    final = await handle.wait()
    assert final.phase is PodPhase.SUCCEEDED
    assert results(final) == [
        ("first", 0, "Completed"),
        ("second", 0, "Completed"),
        ("main", 0, "Completed"),
    ]
    assert [c.init_container for c in final.containers] == [True, True, False]
    assert [line.text for line in handle.read_logs("main")] == ["first", "second"]


async def test_failing_init_container_fails_the_pod(runner: LocalPodRunner) -> None:
    spec = pod(
        sh("main", "echo should not run"),
        init=[
            sh("fetch", "echo 'cannot fetch' > /dev/termination-log; exit 5"),
            sh("never", "true"),
        ],
    )
    statuses: list[PodStatus] = []
    handle = start(runner, spec, statuses=statuses)
    final = await handle.wait()
    assert (final.phase, final.reason) == (PodPhase.FAILED, "Init:Error")
    assert final.containers == (ContainerResult("fetch", 5, "cannot fetch\n", "Error", True),)
    assert [s.phase for s in statuses] == [PodPhase.PENDING, PodPhase.FAILED]
    assert handle.read_logs("main") == []


async def test_one_failing_container_stops_the_others(runner: LocalPodRunner) -> None:
    spec = pod(
        container("worker", command=["sleep", "30"]),
        py(
            "trapper",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)",
        ),
        sh("broken", "while [ ! -e go ]; do sleep 0.02; done; exit 2"),
        grace=5,
    )
    handle = start(runner, spec)
    await wait_for_output(handle, "trapper", "ready")
    began = time.monotonic()
    (handle.sandbox / "work" / "go").touch()
    final = await handle.wait()
    assert time.monotonic() - began < 4  # stopped by SIGTERM, not the 5 s grace period
    assert (final.phase, final.reason) == (PodPhase.FAILED, "Error")
    assert final.message == "container broken exited with code 2"
    assert sorted(results(final)) == [
        ("broken", 2, "Error"),
        ("trapper", 7, "Error"),
        ("worker", 143, "Error"),
    ]


async def test_pod_succeeds_only_when_every_container_does(runner: LocalPodRunner) -> None:
    spec = pod(sh("quick", "true"), sh("slow", "sleep 0.3"))
    final = await start(runner, spec).wait()
    assert final.phase is PodPhase.SUCCEEDED
    assert results(final) == [("quick", 0, "Completed"), ("slow", 0, "Completed")]


async def test_background_children_die_with_their_container(runner: LocalPodRunner) -> None:
    # A container ends when its main process does, whatever it left running.
    handle = start(runner, pod(sh("main", "sleep 60 & echo $!")))
    began = time.monotonic()
    final = await handle.wait()
    assert final.phase is PodPhase.SUCCEEDED and time.monotonic() - began < 5
    child = int(handle.read_logs("main")[0].text)
    assert not alive(child)


async def test_same_run_cannot_start_twice(runner: LocalPodRunner) -> None:
    spec = pod(container("main", command=["sleep", "5"]))
    handle = runner.start("j", "r", "armada-j-0", "default", "node-1", spec)
    with pytest.raises(ValueError, match="already running"):
        runner.start("j", "r", "armada-j-0", "default", "node-1", spec)
    handle.terminate(0)
    assert (await handle.wait()).phase is PodPhase.KILLED


async def test_names_that_would_escape_the_sandbox_are_refused(runner: LocalPodRunner) -> None:
    with pytest.raises(ValueError, match="file name"):
        runner.start("j", "r", "../evil", "default", "node-1", pod(sh("main", "true")))


async def test_exits_are_noticed_without_pidfds(
    runner: LocalPodRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kernels before 5.3 (or seccomp profiles) have no pidfd_open: the monitor polls instead.
    def unavailable(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr("os.pidfd_open", unavailable)
    final = await start(runner, pod(sh("a", "exit 0"), sh("b", "sleep 0.2; exit 4"))).wait()
    assert results(final) == [("a", 0, "Completed"), ("b", 4, "Error")]
