"""The termination grace period: how long a stopped pod may take before it is killed.

Seed 000: a job that sets no grace period gets the server's default, and a grace period of 0
(which would force-delete the pod) becomes 1 s. Every reader of a pod's grace period (submission,
storage, the retry engine, the executors) goes through `grace_period_seconds`, so the default and
the floor are defined once.
"""

from __future__ import annotations

from typing import Literal, Protocol

DEFAULT_GRACE_PERIOD_SECONDS = 1
MINIMUM_GRACE_PERIOD_SECONDS = 1


class _HasGracePeriod(Protocol):
    terminationGracePeriodSeconds: int

    def HasField(self, field_name: Literal["terminationGracePeriodSeconds"]) -> bool: ...


def grace_period_seconds(pod_spec: _HasGracePeriod | None) -> int:
    """The pod's grace period as the server enforces it: the default when unset, at least 1 s."""
    if pod_spec is None or not pod_spec.HasField("terminationGracePeriodSeconds"):
        return DEFAULT_GRACE_PERIOD_SECONDS
    return max(pod_spec.terminationGracePeriodSeconds, MINIMUM_GRACE_PERIOD_SECONDS)
