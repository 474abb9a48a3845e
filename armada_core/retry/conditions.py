"""The failure conditions a rule can name (seed 001, "Condition Matching")."""

from __future__ import annotations

from enum import StrEnum


class Condition(StrEnum):
    OOM_KILLED = "OOMKilled"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    UNSCHEDULABLE = "Unschedulable"


#: Conditions that belong to one container; the others describe the whole pod. A rule scoped
#: with containerName sees a container-level condition only on that container.
CONTAINER_CONDITIONS: frozenset[Condition] = frozenset({Condition.OOM_KILLED})


def parse_condition(text: str) -> Condition:
    """The condition spelled exactly as in the seed; ValueError lists the valid spellings."""
    try:
        return Condition(text)
    except ValueError:
        valid = ", ".join(c.value for c in Condition)
        raise ValueError(f"unknown condition {text!r} (expected one of {valid})") from None
