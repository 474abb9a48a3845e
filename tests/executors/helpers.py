"""Building pod specs and watching real processes for the local executor's tests."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from armada_core.api.k8s import core_v1_pb2 as k8s
from armada_server.executors.local import LocalPodRunner, PodHandle, PodStatus

PYTHON = sys.executable
_ids = itertools.count()


def container(
    name: str,
    *,
    command: Iterable[str] = (),
    args: Iterable[str] = (),
    env: Mapping[str, str] | Iterable[k8s.EnvVar] = (),
    **fields: object,
) -> k8s.Container:
    """A container; `env` as a plain mapping or as EnvVar messages."""
    variables = (
        [k8s.EnvVar(name=n, value=v) for n, v in env.items()]
        if isinstance(env, Mapping)
        else list(env)
    )
    return k8s.Container(
        name=name,
        image="ignored:latest",
        command=list(command),
        args=list(args),
        env=variables,
        **fields,
    )


def sh(name: str, script: str, **fields: object) -> k8s.Container:
    return container(name, command=["sh", "-c", script], **fields)


def py(name: str, code: str, **fields: object) -> k8s.Container:
    return container(name, command=[PYTHON, "-c", code], **fields)


def pod(
    *containers: k8s.Container,
    init: Iterable[k8s.Container] = (),
    grace: int = 1,
    deadline: int | None = None,
) -> k8s.PodSpec:
    spec = k8s.PodSpec(
        containers=list(containers), initContainers=list(init), terminationGracePeriodSeconds=grace
    )
    if deadline is not None:
        spec.activeDeadlineSeconds = deadline
    return spec


def memory_limit(quantity: str) -> k8s.ResourceRequirements:
    resources = k8s.ResourceRequirements()
    resources.limits["memory"].string = quantity
    return resources


def start(
    runner: LocalPodRunner,
    spec: k8s.PodSpec,
    *,
    statuses: list[PodStatus] | None = None,
    **kwargs: object,
) -> PodHandle:
    """Start `spec` under fresh ids; transitions are appended to `statuses` when given."""
    n = next(_ids)
    return runner.start(
        f"job{n}",
        f"run{n}",
        f"armada-job{n}-0",
        "default",
        "node-1",
        spec,
        on_status=statuses.append if statuses is not None else None,
        **kwargs,
    )  # type: ignore[arg-type]


async def wait_for_output(
    handle: PodHandle, container: str, text: str, timeout: float = 10.0
) -> None:
    """Until `container` has logged a line containing `text`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not any(text in line.text for line in handle.read_logs(container)):
        if loop.time() > end:
            raise AssertionError(
                f"{container} never printed {text!r}: {handle.read_logs(container)}"
            )
        await asyncio.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def processes_under(root: Path) -> list[tuple[int, str]]:
    """Live processes (pid, command line) started in a sandbox below `root`, found by /proc
    alone: every container process carries ARMADA_SANDBOX in its environment."""
    prefix = f"ARMADA_SANDBOX={root}/".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or not alive(int(name)):
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(var.startswith(prefix) for var in environ):
            found.append((int(name), cmdline))
    return found


def results(status: PodStatus) -> list[tuple[str, int, str]]:
    """(name, exit code, reason) of each finished container."""
    return [(c.name, c.exit_code, c.reason) for c in status.containers]
