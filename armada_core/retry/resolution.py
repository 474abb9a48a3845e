"""Which policies apply to a job (seed 001, "Policy Resolution and Composition")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from armada_core.jobs import annotations as ann

from .policy import RetryPolicy

#: The annotation naming the policies a job asks for, comma-separated.
RETRY_POLICY_ANNOTATION = ann.RETRY_POLICY


def parse_policy_annotation(value: str) -> tuple[str, ...]:
    """Names in the annotation value: comma-separated, whitespace and empties ignored."""
    return tuple(name.strip() for name in value.split(",") if name.strip())


def effective_policy_names(
    queue_policies: Iterable[str],
    annotations: Mapping[str, str],
    default_policy_name: str | None,
) -> tuple[str, ...]:
    """Queue policies first, then the job's annotation (it can add, never remove); the default
    policy only when neither names anything. Repeated names keep their first position."""
    names: list[str] = []
    for name in [
        *queue_policies,
        *parse_policy_annotation(annotations.get(RETRY_POLICY_ANNOTATION, "")),
    ]:
        if name not in names:
            names.append(name)
    if not names and default_policy_name:
        names.append(default_policy_name)
    return tuple(names)


@dataclass(frozen=True)
class ResolvedPolicies:
    """The policies in force, in order, and the names that matched no stored policy (the
    server rejects those at submission; a policy deleted later is simply skipped)."""

    policies: tuple[RetryPolicy, ...]
    missing: tuple[str, ...]


def resolve_policies(
    queue_policies: Sequence[str],
    annotations: Mapping[str, str],
    catalogue: Mapping[str, RetryPolicy],
    default_policy_name: str | None,
) -> ResolvedPolicies:
    names = effective_policy_names(queue_policies, annotations, default_policy_name)
    return ResolvedPolicies(
        policies=tuple(catalogue[n] for n in names if n in catalogue),
        missing=tuple(n for n in names if n not in catalogue),
    )
