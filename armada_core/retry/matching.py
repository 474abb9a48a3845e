"""Whether a rule matches a failed run (seed 001, "Rule Types" and "Container Targeting")."""

from __future__ import annotations

import re
from functools import lru_cache

from .conditions import CONTAINER_CONDITIONS, Condition
from .failure import ContainerFailure, RunFailure
from .policy import RetryRule


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> re.Pattern[str]:
    """Patterns are validated at load time; caching keeps evaluation cheap on hot paths."""
    return re.compile(pattern)


def message_matches(pattern: str, message: str) -> bool:
    """Search semantics, like Go's MatchString: ".*TRANSIENT.*" and "TRANSIENT" agree."""
    return compiled(pattern).search(message) is not None


def observed_conditions(
    failure: RunFailure, container: ContainerFailure | None, *, scoped: bool
) -> set[Condition]:
    """Pod-level conditions always count; a container-level one (OOMKilled) reported for the
    whole pod counts only for rules that do not target a container."""
    seen: set[Condition] = set()
    if failure.condition is not None and (
        not scoped or failure.condition not in CONTAINER_CONDITIONS
    ):
        seen.add(failure.condition)
    if container is not None and container.condition is not None:
        seen.add(container.condition)
    return seen


def rule_matches(rule: RetryRule, failure: RunFailure) -> bool:
    """All matchers the rule sets must agree; a rule with none never matches."""
    if not (
        rule.on_exit_codes
        or rule.on_conditions
        or rule.on_termination_message
        or rule.on_failure_category
    ):
        return False
    if rule.on_failure_category and failure.category not in rule.on_failure_category:
        return False
    if rule.on_failure_subcategory and failure.subcategory not in rule.on_failure_subcategory:
        return False
    init = rule.include_init_containers
    scoped = rule.container_name is not None
    if scoped:
        container = failure.named(rule.container_name or "", init)
        if container is None:
            return False
        message_sources: tuple[ContainerFailure, ...] = (container,)
    else:
        container = failure.first_failed(init)
        message_sources = failure.candidates(init)
    if rule.on_exit_codes is not None and (
        container is None or not rule.on_exit_codes.matches(container.exit_code)
    ):
        return False
    if rule.on_conditions and not observed_conditions(
        failure, container, scoped=scoped
    ).intersection(rule.on_conditions):
        return False
    pattern = rule.on_termination_message
    return pattern is None or any(message_matches(pattern, c.message) for c in message_sources)
