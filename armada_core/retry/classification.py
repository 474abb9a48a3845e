"""Failure classification: label a failed run with a category and subcategory.

Executors classify with operator-configured categories (conditions, exit codes, termination
messages, pod events); retry rules then match on the label. Failures caused by Armada itself
are labelled ``internal`` so that policies and integrations can tell them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .conditions import Condition
from .errors import RetryConfigError
from .failure import ContainerFailure, RunFailure
from .matching import message_matches, observed_conditions
from .policy import ExitCodeMatcher
from .reading import join, load_documents, mapping, sequence, string
from .validation import validate_exit_codes, validate_pattern
from .yaml_format import parse_conditions, parse_exit_codes, parse_pattern

INTERNAL = "internal"


class InternalFailure(StrEnum):
    """Armada's own failures, the subcategories of ``internal``."""

    LEASE_EXPIRED = "lease_expired"
    POD_MISSING = "pod_missing"
    MAX_RUNS_EXCEEDED = "max_runs_exceeded"


@dataclass(frozen=True)
class Classification:
    category: str
    subcategory: str = ""


def internal(kind: InternalFailure) -> Classification:
    return Classification(INTERNAL, kind.value)


@dataclass(frozen=True)
class CategoryRule:
    """All matchers set must agree; containerName scopes the container-level ones."""

    on_conditions: tuple[Condition, ...] = ()
    on_exit_codes: ExitCodeMatcher | None = None
    on_termination_message: str | None = None
    on_pod_event: str | None = None
    container_name: str | None = None
    subcategory: str = ""

    def matches(self, failure: RunFailure) -> bool:
        containers: Sequence[ContainerFailure | None] = (
            [c for c in failure.containers if c.name == self.container_name]
            if self.container_name is not None
            else [*failure.containers, None]
        )
        # Unlike a retry rule, a category rule may be satisfied by any container; the
        # trailing None lets pod-level facts match a pod whose containers say nothing.
        if self.on_pod_event is not None and not any(
            message_matches(self.on_pod_event, e) for e in failure.pod_events
        ):
            return False
        if (
            self.on_exit_codes is None
            and not self.on_conditions
            and self.on_termination_message is None
        ):
            return self.on_pod_event is not None
        return any(self._container_matches(failure, c) for c in containers)

    def _container_matches(self, failure: RunFailure, container: ContainerFailure | None) -> bool:
        if self.on_exit_codes is not None and (
            container is None or not self.on_exit_codes.matches(container.exit_code)
        ):
            return False
        if self.on_conditions and not observed_conditions(
            failure, container, scoped=self.container_name is not None
        ).intersection(self.on_conditions):
            return False
        return self.on_termination_message is None or (
            container is not None
            and message_matches(self.on_termination_message, container.message)
        )


@dataclass(frozen=True)
class Category:
    name: str
    rules: tuple[CategoryRule, ...]


@dataclass(frozen=True)
class ClassificationConfig:
    """Categories in order; the first rule that matches, across categories, labels the run.
    Unmatched runs get the default category, or none when it is empty."""

    categories: tuple[Category, ...] = ()
    default_category: str = ""
    default_subcategory: str = ""


def classify(
    failure: RunFailure,
    config: ClassificationConfig,
    internal_failure: InternalFailure | None = None,
) -> Classification | None:
    """The run's label. Armada's own failures are ``internal`` whatever the configuration."""
    if internal_failure is not None:
        return internal(internal_failure)
    for category in config.categories:
        for rule in category.rules:
            if rule.matches(failure):
                return Classification(category.name, rule.subcategory)
    if config.default_category:
        return Classification(config.default_category, config.default_subcategory)
    return None


_RULE_KEYS = (
    "onConditions",
    "onExitCodes",
    "onTerminationMessage",
    "onPodEvent",
    "containerName",
    "subcategory",
)


def _rule(value: Any, path: str) -> CategoryRule:
    data = mapping(value, path, _RULE_KEYS)

    def pattern(key: str) -> str | None:
        if key not in data:
            return None
        text = parse_pattern(data[key], join(path, key))
        validate_pattern(text, join(join(path, key), "pattern"))
        return text

    rule = CategoryRule(
        on_conditions=parse_conditions(data["onConditions"], join(path, "onConditions"))
        if "onConditions" in data
        else (),
        on_exit_codes=parse_exit_codes(data["onExitCodes"], join(path, "onExitCodes"))
        if "onExitCodes" in data
        else None,
        on_termination_message=pattern("onTerminationMessage"),
        on_pod_event=pattern("onPodEvent"),
        container_name=string(data["containerName"], join(path, "containerName"))
        if "containerName" in data
        else None,
        subcategory=string(data.get("subcategory", ""), join(path, "subcategory")),
    )
    if rule.on_exit_codes is not None:
        validate_exit_codes(rule.on_exit_codes, join(path, "onExitCodes"))
    container_matchers = (
        rule.on_conditions
        or rule.on_exit_codes is not None
        or rule.on_termination_message is not None
    )
    if not container_matchers and rule.on_pod_event is None:
        raise RetryConfigError(
            path,
            "needs at least one of onConditions, onExitCodes, onTerminationMessage or onPodEvent",
        )
    if rule.container_name is not None and not container_matchers:
        raise RetryConfigError(
            join(path, "containerName"),
            "needs onExitCodes, onConditions or onTerminationMessage to apply to",
        )
    return rule


def _category(value: Any, path: str) -> Category:
    data = mapping(value, path, ("name", "rules"))
    if "name" not in data:
        raise RetryConfigError(join(path, "name"), "is required")
    name = string(data["name"], join(path, "name"))
    if not name:
        raise RetryConfigError(join(path, "name"), "must not be empty")
    if name == INTERNAL:
        raise RetryConfigError(
            join(path, "name"), f"{INTERNAL!r} is reserved for Armada's own failures"
        )
    if "rules" not in data:
        raise RetryConfigError(join(path, "rules"), "is required")
    rules = sequence(data["rules"], join(path, "rules"), _rule)
    if not rules:
        raise RetryConfigError(join(path, "rules"), "must list at least one rule")
    return Category(name, rules)


def classification_from_mapping(data: Any, path: str = "") -> ClassificationConfig:
    """Config from ``{categories: [...], defaultCategory, defaultSubcategory}``."""
    block = mapping(data, path, ("categories", "defaultCategory", "defaultSubcategory"))
    categories = sequence(block.get("categories", []), join(path, "categories"), _category)
    seen: set[str] = set()
    for i, category in enumerate(categories):
        if category.name in seen:
            raise RetryConfigError(
                join(join(join(path, "categories"), i), "name"),
                f"category {category.name!r} is defined twice",
            )
        seen.add(category.name)
    default = string(block.get("defaultCategory", ""), join(path, "defaultCategory"))
    default_sub = string(block.get("defaultSubcategory", ""), join(path, "defaultSubcategory"))
    if default_sub and not default:
        raise RetryConfigError(join(path, "defaultSubcategory"), "needs defaultCategory")
    return ClassificationConfig(categories, default, default_sub)


def load_classification(text: str) -> ClassificationConfig:
    """Config from YAML text; an empty text configures no categories."""
    documents = load_documents(text)
    return classification_from_mapping(documents[0]) if documents else ClassificationConfig()
