"""What the retry engine and the classifier know about one failed run."""

from __future__ import annotations

from dataclasses import dataclass

from .conditions import Condition

#: Container termination reasons that are not failures on their own.
_BENIGN_REASONS = frozenset({"", "Completed"})


@dataclass(frozen=True)
class ContainerFailure:
    """One container's end as the executor reported it.

    ``reason`` is Kubernetes' termination reason (``OOMKilled``, ``Error``, ...); ``init``
    marks init containers, which rules skip unless they set includeInitContainers.
    """

    name: str
    exit_code: int = 0
    message: str = ""
    reason: str = ""
    init: bool = False

    @property
    def failed(self) -> bool:
        return self.exit_code != 0 or self.reason not in _BENIGN_REASONS

    @property
    def condition(self) -> Condition | None:
        """The container-level condition its reason names, if any."""
        try:
            return Condition(self.reason)
        except ValueError:
            return None


@dataclass(frozen=True)
class RunFailure:
    """A failed run: the containers in pod order plus pod-level facts.

    ``condition`` is the pod-level condition (Evicted, Preempted, ...; OOMKilled when the
    executor only knows the pod was OOM-killed). ``returned_lease`` marks runs handed back by
    Armada rather than failed by the job: lease returned or expired, or preemption that marked
    the run returned; only these are retried in legacy mode. ``termination_grace_period`` is
    the pod's terminationGracePeriodSeconds, used to delay preemption retries.
    """

    containers: tuple[ContainerFailure, ...] = ()
    condition: Condition | None = None
    category: str = ""
    subcategory: str = ""
    node: str | None = None
    termination_grace_period: float = 0.0
    returned_lease: bool = False
    pod_events: tuple[str, ...] = ()
    message: str = ""

    def candidates(self, include_init: bool) -> tuple[ContainerFailure, ...]:
        """The containers a rule may look at."""
        return tuple(c for c in self.containers if include_init or not c.init)

    def first_failed(self, include_init: bool) -> ContainerFailure | None:
        """The container a rule without containerName judges (seed 001's current behaviour)."""
        return next((c for c in self.candidates(include_init) if c.failed), None)

    def named(self, name: str, include_init: bool) -> ContainerFailure | None:
        return next((c for c in self.candidates(include_init) if c.name == name), None)
