"""Checks a policy must pass however it arrived (YAML file, gRPC request, database row)."""

from __future__ import annotations

import re

from armada_core.scheduling.model import parse_quantity

from .errors import RetryConfigError
from .matching import compiled
from .policy import (
    Action,
    AntiAffinityMode,
    Backoff,
    ExitCodeMatcher,
    MemoryBump,
    RetryPolicy,
    RetryRule,
)
from .reading import join

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_INT32 = range(-(2**31), 2**31)
_MAX_NAME = 63


def validate_name(name: str, path: str = "metadata.name") -> None:
    """Policy names are DNS labels so they can appear in annotations and CLI arguments."""
    if not name:
        raise RetryConfigError(path, "must not be empty")
    if len(name) > _MAX_NAME:
        raise RetryConfigError(path, f"must be at most {_MAX_NAME} characters")
    if not _NAME.match(name):
        raise RetryConfigError(
            path,
            f"{name!r} is invalid: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit",
        )


def validate_backoff(backoff: Backoff, path: str) -> None:
    for attr, key in (("initial_delay", "initialDelay"), ("max_delay", "maxDelay")):
        value = getattr(backoff, attr)
        if value is not None and not value >= 0:
            raise RetryConfigError(join(path, key), "must be a non-negative duration")
    if backoff.multiplier is not None and not backoff.multiplier >= 1:
        raise RetryConfigError(
            join(path, "multiplier"), f"must be at least 1.0, not {backoff.multiplier}"
        )


def validate_memory_bump(bump: MemoryBump, path: str) -> None:
    if (bump.static is None) == (bump.factor is None):
        raise RetryConfigError(path, "must set exactly one of static and factor")
    if bump.factor is not None and not bump.factor > 1.0:
        raise RetryConfigError(join(path, "factor"), f"must be greater than 1.0, not {bump.factor}")
    if bump.static is not None:
        if bump.static.strip().startswith("-"):
            raise RetryConfigError(join(path, "static"), "must be positive")
        try:
            amount = parse_quantity(bump.static)
        except ValueError:
            raise RetryConfigError(
                join(path, "static"), f"invalid static quantity {bump.static!r}"
            ) from None
        if amount <= 0:
            raise RetryConfigError(join(path, "static"), "must be positive")


def validate_exit_codes(matcher: ExitCodeMatcher, path: str) -> None:
    if not matcher.values:
        raise RetryConfigError(join(path, "values"), "must list at least one exit code")
    for i, code in enumerate(matcher.values):
        if code not in _INT32:
            raise RetryConfigError(
                join(join(path, "values"), i), f"{code} is outside the 32-bit exit code range"
            )


def validate_pattern(pattern: str, path: str) -> None:
    """``path`` names the pattern field itself."""
    if not pattern:
        raise RetryConfigError(path, "must not be empty")
    try:
        compiled(pattern)
    except re.error as exc:
        raise RetryConfigError(path, f"invalid regular expression: {exc}") from None


def validate_rule(rule: RetryRule, path: str) -> None:
    container_matchers = (
        rule.on_exit_codes is not None
        or bool(rule.on_conditions)
        or rule.on_termination_message is not None
    )
    if not container_matchers and not rule.on_failure_category:
        raise RetryConfigError(
            path,
            "needs at least one of onExitCodes, onConditions, "
            "onTerminationMessage or onFailureCategory",
        )
    if rule.on_exit_codes is not None:
        validate_exit_codes(rule.on_exit_codes, join(path, "onExitCodes"))
    if rule.on_termination_message is not None:
        validate_pattern(
            rule.on_termination_message, join(join(path, "onTerminationMessage"), "pattern")
        )
    for key, names in (
        ("onFailureCategory", rule.on_failure_category),
        ("onFailureSubcategory", rule.on_failure_subcategory),
    ):
        for i, name in enumerate(names):
            if not name:
                raise RetryConfigError(join(join(path, key), i), "must not be empty")
    if rule.on_failure_subcategory and not rule.on_failure_category:
        raise RetryConfigError(
            join(path, "onFailureSubcategory"),
            "needs onFailureCategory: a subcategory narrows a category",
        )
    if rule.container_name is not None:
        if not rule.container_name:
            raise RetryConfigError(join(path, "containerName"), "must not be empty")
        if not container_matchers:
            raise RetryConfigError(
                join(path, "containerName"),
                "needs onExitCodes, onConditions or onTerminationMessage to apply to",
            )
    if rule.retry_limit is not None and rule.retry_limit < 0:
        raise RetryConfigError(join(path, "retryLimit"), "must be at least 0")
    validate_backoff(rule.backoff, join(path, "backoff"))
    if rule.memory_bump is not None:
        validate_memory_bump(rule.memory_bump, join(path, "mutate.resources.memory"))
    if rule.avoid_same_node and rule.anti_affinity is AntiAffinityMode.NONE:
        raise RetryConfigError(
            join(path, "mutate.affinity.avoidSameNode"), "conflicts with antiAffinity.mode none"
        )
    if rule.action is Action.FAIL:
        for key, present in (
            ("retryLimit", rule.retry_limit is not None),
            ("backoff", not rule.backoff.empty),
            ("antiAffinity", rule.anti_affinity is not None),
            ("mutate", rule.avoid_same_node or rule.memory_bump is not None),
        ):
            if present:
                raise RetryConfigError(join(path, key), "only allowed when action is Retry")


def validate_policy(policy: RetryPolicy, path: str = "spec") -> None:
    """Raise RetryConfigError naming the first invalid field."""
    validate_name(policy.name)
    if policy.retry_limit is not None and policy.retry_limit < 0:
        raise RetryConfigError(join(path, "retryLimit"), "must be at least 0")
    validate_backoff(policy.backoff, join(path, "backoff"))
    for i, rule in enumerate(policy.rules):
        validate_rule(rule, join(join(path, "rules"), i))
