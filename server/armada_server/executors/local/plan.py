"""From a PodSpec to what to execute: argv, environment, directory and limits per container.

Everything that can be wrong with a pod on this executor is found here, before any process
starts, so an unrunnable pod fails at once with a reason instead of half-starting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from armada_core.api.k8s import core_v1_pb2
from armada_core.jobs.grace import grace_period_seconds
from armada_core.scheduling.model import parse_quantity

from .environment import (
    CONFIG_ERROR,
    PodIdentity,
    UnresolvableVariable,
    container_environment,
    expand,
)
from .sandbox import Sandbox

DEFAULT_MESSAGE_PATH = "/dev/termination-log"
MESSAGE_PATH_VARIABLE = "ARMADA_TERMINATION_MESSAGE_PATH"
# Set in every process of a pod, and inherited by everything they start: how the executor finds
# a container's processes even after they left its process tree.
SANDBOX_VARIABLE = "ARMADA_SANDBOX"
CONTAINER_VARIABLE = "ARMADA_CONTAINER_NAME"
FALLBACK_TO_LOGS = "FallbackToLogsOnError"

INVALID_SPEC = "InvalidPodSpec"
CREATE_ERROR = "CreateContainerError"

_CONTAINER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class UnrunnablePod(Exception):
    """The pod cannot run on this executor; `reason` is a Kubernetes-style reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ContainerPlan:
    """How to run one container."""

    name: str
    init: bool
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    message_path: Path
    message_policy: str  # "File" or "FallbackToLogsOnError"
    memory_limit: int | None  # bytes

    @property
    def marker(self) -> dict[str, str]:
        """The variables that mark this container's processes."""
        return {name: self.env[name] for name in (SANDBOX_VARIABLE, CONTAINER_VARIABLE)}


@dataclass(frozen=True)
class PodPlan:
    """How to run a pod: init containers one after another, then the rest together."""

    init_containers: tuple[ContainerPlan, ...]
    containers: tuple[ContainerPlan, ...]
    grace_seconds: float
    deadline_seconds: float | None


def plan_pod(
    pod_spec: core_v1_pb2.PodSpec,
    sandbox: Sandbox,
    identity: PodIdentity,
    *,
    base_env: Mapping[str, str],
    fixed_env: Mapping[str, str],
    allocatable: Mapping[str, str],
) -> PodPlan:
    """The plan for `pod_spec`, or UnrunnablePod saying what stops it running here.

    `base_env` is what an image would provide (a container's env may override it);
    `fixed_env` is set by the executor after the container's env and cannot be overridden.
    """
    if not pod_spec.containers:
        raise UnrunnablePod(INVALID_SPEC, "the pod has no containers")
    names: set[str] = set()
    for c in (*pod_spec.initContainers, *pod_spec.containers):
        if not _CONTAINER_NAME.match(c.name):
            raise UnrunnablePod(
                INVALID_SPEC,
                f"container name {c.name!r} is not a DNS label "
                "(lower-case letters, digits and '-')",
            )
        if c.name in names:
            raise UnrunnablePod(INVALID_SPEC, f"two containers are named {c.name!r}")
        names.add(c.name)
    for c in pod_spec.initContainers:
        if c.restartPolicy == "Always":
            raise UnrunnablePod(
                INVALID_SPEC,
                f"init container {c.name!r} is a sidecar "
                "(restartPolicy Always): not supported locally",
            )

    def plan(c: core_v1_pb2.Container, init: bool) -> ContainerPlan:
        return _plan_container(
            c, init, pod_spec, sandbox, identity, base_env, fixed_env, allocatable
        )

    deadline = (
        float(pod_spec.activeDeadlineSeconds)
        if pod_spec.HasField("activeDeadlineSeconds") and pod_spec.activeDeadlineSeconds > 0
        else None
    )
    return PodPlan(
        init_containers=tuple(plan(c, True) for c in pod_spec.initContainers),
        containers=tuple(plan(c, False) for c in pod_spec.containers),
        grace_seconds=float(grace_period_seconds(pod_spec)),
        deadline_seconds=deadline,
    )


def _plan_container(
    c: core_v1_pb2.Container,
    init: bool,
    pod_spec: core_v1_pb2.PodSpec,
    sandbox: Sandbox,
    identity: PodIdentity,
    base_env: Mapping[str, str],
    fixed_env: Mapping[str, str],
    allocatable: Mapping[str, str],
) -> ContainerPlan:
    where = f"{'init container' if init else 'container'} {c.name!r}"
    if not c.command and not c.args:
        raise UnrunnablePod(
            CREATE_ERROR,
            f"{where} has neither command nor args: the local "
            f"executor does not run images (image "
            f"{c.image!r} is ignored), so it needs a command",
        )
    message_file = sandbox.message_path(c.name)
    visible_path = c.terminationMessagePath or DEFAULT_MESSAGE_PATH
    fixed = {
        **fixed_env,
        SANDBOX_VARIABLE: str(sandbox.path),
        CONTAINER_VARIABLE: c.name,
        MESSAGE_PATH_VARIABLE: str(message_file),
    }
    base = {**base_env, **fixed}
    try:
        env = container_environment(c, pod_spec, identity, base=base, allocatable=allocatable)
    except UnresolvableVariable as e:
        raise UnrunnablePod(CONFIG_ERROR, str(e)) from None
    env.update(fixed)

    def local(text: str) -> str:
        # The path the container was told to write its message to becomes the sandbox file.
        return text.replace(visible_path, str(message_file))

    env = {name: local(value) for name, value in env.items()}
    argv = tuple(local(expand(arg, env)) for arg in (*c.command, *c.args))
    policy = c.terminationMessagePolicy or "File"
    if policy not in ("File", FALLBACK_TO_LOGS):
        raise UnrunnablePod(INVALID_SPEC, f"{where}: unknown terminationMessagePolicy {policy!r}")
    return ContainerPlan(
        name=c.name,
        init=init,
        argv=argv,
        env=env,
        cwd=_working_dir(c.workingDir, sandbox, where),
        log_path=sandbox.log_path(c.name),
        message_path=message_file,
        message_policy=policy,
        memory_limit=_memory_limit(c, where),
    )


def _working_dir(requested: str, sandbox: Sandbox, where: str) -> Path:
    """Absolute directories are the node's own; others are created inside the sandbox."""
    if requested.startswith("/"):
        path = Path(requested)
        if not path.is_dir():
            raise UnrunnablePod(
                CREATE_ERROR, f"{where}: workingDir {requested} does not exist on this node"
            )
        return path
    root = sandbox.work_dir
    path = (root / requested).resolve() if requested else root
    if path != root.resolve() and root.resolve() not in path.parents:
        raise UnrunnablePod(
            CREATE_ERROR, f"{where}: workingDir {requested!r} leaves the pod's sandbox"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UnrunnablePod(CREATE_ERROR, f"{where}: cannot create workingDir: {e}") from None
    return path


def _memory_limit(c: core_v1_pb2.Container, where: str) -> int | None:
    if "memory" not in c.resources.limits:
        return None
    text = c.resources.limits["memory"].string
    try:
        return parse_quantity(text)
    except ValueError:
        raise UnrunnablePod(
            INVALID_SPEC, f"{where}: memory limit {text!r} is not a quantity"
        ) from None
