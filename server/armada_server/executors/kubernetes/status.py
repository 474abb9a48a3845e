"""What a pod's status means for its Armada run: a pure function, tested as a table.

Kubernetes says a lot about a pod (phase, conditions, container states, reasons); the run
needs one of: still pending, running on a node, succeeded, failed (with per-container exit
codes, termination messages, the condition retry policies match and a failure category), or
handed back because it never started. Problems that may clear up by themselves (an image that
cannot be pulled yet, no room in the cluster yet) are reported as `STUCK` with how to end it
should they last; the backend owns the clock and decides when they have lasted too long.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from armada_core.api import executor_pb2
from armada_core.retry import (
    ClassificationConfig,
    Condition,
    ContainerFailure,
    RunFailure,
    classify,
)
from armada_core.retry.classification import INTERNAL, InternalFailure


class State(StrEnum):
    PENDING = "pending"
    STUCK = "stuck"  # pending with a problem: `problem` says which, `failure`/`returned` how
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETURNED = "returned"  # never started: the lease goes back, the job is not at fault
    UNKNOWN = "unknown"  # the node stopped reporting: nothing to say yet


#: Waiting reasons of a container whose image cannot be pulled.
IMAGE_PULL = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "RegistryUnavailable",
        "InvalidImageName",
        "SignatureValidationFailed",
    }
)
#: Waiting reasons of a container that cannot be created as specified.
CONTAINER_CONFIG = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)
#: Waiting reasons that will not clear up by waiting.
HOPELESS = frozenset({"InvalidImageName", "ErrImageNeverPull"})
#: Pod reasons that say the pod was stopped by the cluster rather than by its containers.
_POD_CONDITIONS = {
    "Evicted": Condition.EVICTED,
    "DeadlineExceeded": Condition.DEADLINE_EXCEEDED,
    "Preempting": Condition.EVICTED,
    "NodeShutdown": Condition.EVICTED,
    "Terminated": Condition.EVICTED,
}
#: Built-in categories, used when the operator's classification has no rule that matches.
IMAGE_PULL_CATEGORY = "image-pull"
CONTAINER_CONFIG_CATEGORY = "container-config"


@dataclass(frozen=True)
class Observation:
    state: State
    node: str = ""
    uid: str = ""
    #: For FAILED, and for STUCK pods with a failure problem (image pull, container config).
    failure: executor_pb2.RunUpdate.Failed | None = None
    #: For RETURNED, and for STUCK pods that go back to the queue (unschedulable).
    reason: str = ""
    #: For STUCK: `image-pull`, `container-config` or `unschedulable`.
    problem: str = ""
    #: STUCK, but waiting will not help: end it now.
    hopeless: bool = False
    pod_events: tuple[str, ...] = field(default=())


def _get(obj: Any, *path: str) -> Any:
    for name in path:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def _containers(pod: Any) -> list[executor_pb2.ContainerResult]:
    """How each container ended (init containers first), for those that have ended."""
    out = []
    for statuses, init in (
        (_get(pod, "status", "init_container_statuses"), True),
        (_get(pod, "status", "container_statuses"), False),
    ):
        for s in statuses or []:
            end = _get(s, "state", "terminated") or _get(s, "last_state", "terminated")
            if end is None:
                waiting = _get(s, "state", "waiting")
                if (
                    waiting is not None
                    and waiting.reason
                    and waiting.reason != "PodInitializing"
                    and waiting.reason != "ContainerCreating"
                ):
                    out.append(
                        executor_pb2.ContainerResult(
                            name=s.name,
                            reason=waiting.reason,
                            message=waiting.message or "",
                            init_container=init,
                        )
                    )
                continue
            out.append(
                executor_pb2.ContainerResult(
                    name=s.name,
                    exit_code=end.exit_code or 0,
                    reason=end.reason or "",
                    message=(end.message or "").strip(),
                    init_container=init,
                )
            )
    return out


def _started(pod: Any) -> bool:
    for statuses in (
        _get(pod, "status", "init_container_statuses"),
        _get(pod, "status", "container_statuses"),
    ):
        for s in statuses or []:
            if (
                _get(s, "state", "running")
                or _get(s, "state", "terminated")
                or _get(s, "last_state", "terminated")
            ):
                return True
    return False


def _condition(pod: Any, kind: str) -> Any:
    for c in _get(pod, "status", "conditions") or []:
        if c.type == kind:
            return c
    return None


def _events(pod: Any) -> tuple[str, ...]:
    """The pod's reasons and messages, for classification rules' `onPodEvent`."""
    texts = [_get(pod, "status", "reason"), _get(pod, "status", "message")]
    for c in _get(pod, "status", "conditions") or []:
        if c.status != "True":
            texts += [c.reason, c.message]
    for statuses in (
        _get(pod, "status", "init_container_statuses"),
        _get(pod, "status", "container_statuses"),
    ):
        for s in statuses or []:
            waiting = _get(s, "state", "waiting")
            if waiting is not None:
                texts += [waiting.reason, waiting.message]
    return tuple(t for t in texts if t)


def _waiting_problem(pod: Any) -> tuple[str, str, str, bool] | None:
    """(problem, waiting reason, text, hopeless) for a container that cannot start."""
    for statuses in (
        _get(pod, "status", "init_container_statuses"),
        _get(pod, "status", "container_statuses"),
    ):
        for s in statuses or []:
            waiting = _get(s, "state", "waiting")
            reason = _get(waiting, "reason") or ""
            if reason in IMAGE_PULL or reason in CONTAINER_CONFIG:
                kind = "image-pull" if reason in IMAGE_PULL else "container-config"
                text = f"container {s.name}: {reason}"
                if waiting.message:
                    text += f": {waiting.message}"
                return kind, reason, text, reason in HOPELESS
    return None


def classified(
    failure: executor_pb2.RunUpdate.Failed,
    classification: ClassificationConfig,
    pod_events: tuple[str, ...] = (),
    *,
    default: str = "",
    default_sub: str = "",
) -> executor_pb2.RunUpdate.Failed:
    """The failure labelled by the operator's categories, else by the built-in default."""
    try:
        condition = Condition(failure.condition) if failure.condition else None
    except ValueError:
        condition = None
    run = RunFailure(
        containers=tuple(
            ContainerFailure(c.name, c.exit_code, c.message, c.reason, c.init_container)
            for c in failure.containers
        ),
        condition=condition,
        pod_events=pod_events,
        message=failure.reason,
    )
    label = classify(run, classification)
    out = executor_pb2.RunUpdate.Failed()
    out.CopyFrom(failure)
    if label is not None:
        out.category, out.subcategory = label.category, label.subcategory
    elif default:
        out.category, out.subcategory = default, default_sub
    return out


def _failure(pod: Any, classification: ClassificationConfig) -> executor_pb2.RunUpdate.Failed:
    containers = _containers(pod)
    reason = _get(pod, "status", "reason") or ""
    message = _get(pod, "status", "message") or ""
    condition = _POD_CONDITIONS.get(reason)
    if condition is None and any(c.reason == "OOMKilled" for c in containers):
        condition = Condition.OOM_KILLED
    disruption = _condition(pod, "DisruptionTarget")
    if condition is None and disruption is not None and disruption.status == "True":
        condition = Condition.EVICTED
        reason, message = reason or disruption.reason or "", message or disruption.message or ""
    if reason:
        text = f"{reason}: {message}" if message else reason
    else:
        failed = next(
            (c for c in containers if c.exit_code != 0 or c.reason not in ("", "Completed")), None
        )
        if failed is None:
            text = "the pod failed"
        else:
            text = f"container {failed.name} exited with code {failed.exit_code}"
            if failed.reason:
                text += f" ({failed.reason})"
            if failed.message:
                text += f": {failed.message}"
    failure = executor_pb2.RunUpdate.Failed(
        reason=text, containers=containers, condition=condition.value if condition else ""
    )
    return classified(failure, classification, _events(pod))


def observe(pod: Any, classification: ClassificationConfig | None = None) -> Observation:
    """What a pod (a `kubernetes.client.V1Pod`) says about its run."""
    classification = classification or ClassificationConfig()
    phase = _get(pod, "status", "phase") or "Pending"
    node = _get(pod, "spec", "node_name") or ""
    uid = _get(pod, "metadata", "uid") or ""
    events = _events(pod)
    if phase == "Succeeded":
        return Observation(State.SUCCEEDED, node, uid, pod_events=events)
    if phase == "Failed":
        reason = _get(pod, "status", "reason") or ""
        if not _started(pod) and reason not in _POD_CONDITIONS:
            # Refused by the kubelet (OutOfcpu, NodeAffinity, ...): nothing ran.
            message = _get(pod, "status", "message") or ""
            text = f"{reason}: {message}" if message else (reason or "the pod failed to start")
            return Observation(State.RETURNED, node, uid, reason=text, pod_events=events)
        return Observation(
            State.FAILED, node, uid, failure=_failure(pod, classification), pod_events=events
        )
    if phase == "Running":
        return Observation(State.RUNNING, node, uid, pod_events=events)
    if phase == "Unknown":
        return Observation(State.UNKNOWN, node, uid, pod_events=events)
    scheduled = _condition(pod, "PodScheduled")
    if (
        scheduled is not None
        and scheduled.status == "False"
        and scheduled.reason == "Unschedulable"
    ):
        text = "Unschedulable"
        if scheduled.message:
            text += f": {scheduled.message}"
        return Observation(
            State.STUCK, node, uid, reason=text, problem="unschedulable", pod_events=events
        )
    problem = _waiting_problem(pod)
    if problem is not None:
        kind, waiting, text, hopeless = problem
        category = IMAGE_PULL_CATEGORY if kind == "image-pull" else CONTAINER_CONFIG_CATEGORY
        failure = classified(
            executor_pb2.RunUpdate.Failed(reason=text, containers=_containers(pod)),
            classification,
            events,
            default=category,
            default_sub=waiting,
        )
        return Observation(
            State.STUCK,
            node,
            uid,
            failure=failure,
            problem=kind,
            hopeless=hopeless,
            pod_events=events,
        )
    return Observation(State.PENDING, node, uid, pod_events=events)


def vanished(last: Any, classification: ClassificationConfig | None = None) -> Observation:
    """The run's pod was deleted by someone else. `last` is the pod as last seen."""
    classification = classification or ClassificationConfig()
    node = _get(last, "spec", "node_name") or ""
    if last is None or (not _started(last) and _get(last, "status", "phase") != "Running"):
        return Observation(State.RETURNED, node, reason="the pod was deleted before it started")
    disruption = _condition(last, "DisruptionTarget")
    if disruption is not None and disruption.status == "True":
        failure = executor_pb2.RunUpdate.Failed(
            reason=f"{disruption.reason}: {disruption.message or 'the pod was deleted'}",
            containers=_containers(last),
            condition=Condition.EVICTED.value,
        )
        return Observation(
            State.FAILED, node, failure=classified(failure, classification, _events(last))
        )
    failure = executor_pb2.RunUpdate.Failed(
        reason="the pod was deleted by someone other than Armada",
        containers=_containers(last),
        category=INTERNAL,
        subcategory=InternalFailure.POD_MISSING.value,
    )
    return Observation(State.FAILED, node, failure=failure)
