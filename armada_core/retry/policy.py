"""Retry policies as immutable values: the resource of seed 001 plus upstream's mutations."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .conditions import Condition


class Action(StrEnum):
    RETRY = "Retry"
    FAIL = "Fail"


class AntiAffinityMode(StrEnum):
    NONE = "none"
    NODE = "node"


class ExitCodeOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"


@dataclass(frozen=True)
class ExitCodeMatcher:
    operator: ExitCodeOperator
    values: tuple[int, ...]

    def matches(self, exit_code: int) -> bool:
        """Exit code 0 is proto3's "not set", so it never matches, whatever the operator."""
        if exit_code == 0:
            return False
        return (exit_code in self.values) == (self.operator is ExitCodeOperator.IN)


@dataclass(frozen=True)
class Backoff:
    """A possibly partial backoff; unset fields inherit from the next level up."""

    initial_delay: float | None = None
    max_delay: float | None = None
    multiplier: float | None = None

    def over(self, fallback: Backoff) -> Backoff:
        """Field by field: this level's value where set, else the fallback's."""
        return Backoff(
            self.initial_delay if self.initial_delay is not None else fallback.initial_delay,
            self.max_delay if self.max_delay is not None else fallback.max_delay,
            self.multiplier if self.multiplier is not None else fallback.multiplier,
        )

    @property
    def empty(self) -> bool:
        return self.initial_delay is None and self.max_delay is None and self.multiplier is None


@dataclass(frozen=True)
class MemoryBump:
    """Upstream's memory mutation: exactly one of ``static`` (added) or ``factor`` (> 1)."""

    static: str | None = None
    factor: float | None = None


@dataclass(frozen=True)
class RetryRule:
    """One rule. Every matcher it sets must match (AND); containerName and
    includeInitContainers narrow which containers the container-level matchers read."""

    action: Action
    on_exit_codes: ExitCodeMatcher | None = None
    on_conditions: tuple[Condition, ...] = ()
    on_termination_message: str | None = None
    on_failure_category: tuple[str, ...] = ()
    on_failure_subcategory: tuple[str, ...] = ()
    container_name: str | None = None
    include_init_containers: bool = False
    retry_limit: int | None = None
    backoff: Backoff = field(default_factory=Backoff)
    anti_affinity: AntiAffinityMode | None = None
    avoid_same_node: bool = False
    memory_bump: MemoryBump | None = None

    @property
    def node_anti_affinity(self) -> AntiAffinityMode | None:
        """The rule's own anti-affinity; upstream's avoidSameNode means mode node."""
        if self.anti_affinity is not None:
            return self.anti_affinity
        return AntiAffinityMode.NODE if self.avoid_same_node else None


@dataclass(frozen=True)
class RetryPolicy:
    """A named policy. ``retry_limit`` None means rules fall back to globalMaxRetries."""

    name: str
    retry_limit: int | None = None
    default_action: Action = Action.FAIL
    backoff: Backoff = field(default_factory=Backoff)
    anti_affinity: AntiAffinityMode | None = None
    rules: tuple[RetryRule, ...] = ()


def rule_key(policy: RetryPolicy, index: int | None) -> str:
    """The counter key of a rule (``None``: the policy's default action)."""
    return f"{policy.name}/default" if index is None else f"{policy.name}/rules[{index}]"
