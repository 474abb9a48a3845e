"""Scheduler-wide retry settings (``scheduling.retryPolicy``), reloadable at runtime."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import RetryConfigError
from .policy import Backoff
from .reading import boolean, integer, join, load_documents, mapping, string
from .validation import validate_backoff, validate_name
from .yaml_format import parse_backoff

#: The seed's example defaults: no delay, doubling, capped at ten minutes.
BUILTIN_BACKOFF = Backoff(initial_delay=0.0, max_delay=600.0, multiplier=2.0)


@dataclass(frozen=True)
class RetrySettings:
    """Global settings, not policy definitions.

    With ``enabled`` false only returned leases are retried, while the job has had fewer than
    ``max_attempted_runs`` runs (the legacy behaviour); policies are ignored. Lowering
    ``global_max_retries`` at runtime fails every job already at or over it on its next
    evaluation.
    """

    enabled: bool = False
    global_max_retries: int = 20
    default_policy_name: str | None = None
    default_backoff: Backoff = field(default_factory=lambda: BUILTIN_BACKOFF)
    max_attempted_runs: int = 5

    def __post_init__(self) -> None:
        if self.global_max_retries < 0:
            raise RetryConfigError("retryPolicy.globalMaxRetries", "must be at least 0")
        if self.max_attempted_runs < 1:
            raise RetryConfigError("retryPolicy.maxAttemptedRuns", "must be at least 1")
        complete = self.default_backoff.over(BUILTIN_BACKOFF)
        validate_backoff(complete, "retryPolicy.defaultBackoff")
        object.__setattr__(self, "default_backoff", complete)


_KEYS = ("enabled", "globalMaxRetries", "defaultPolicyName", "defaultBackoff", "maxAttemptedRuns")


def settings_from_mapping(data: Mapping[str, Any], path: str = "retryPolicy") -> RetrySettings:
    """Settings from the ``retryPolicy`` block of the scheduler configuration."""
    block = mapping(data, path, _KEYS)
    name = None
    if block.get("defaultPolicyName"):
        name = string(block["defaultPolicyName"], join(path, "defaultPolicyName"))
        validate_name(name, join(path, "defaultPolicyName"))
    backoff = BUILTIN_BACKOFF
    if "defaultBackoff" in block:
        backoff = parse_backoff(block["defaultBackoff"], join(path, "defaultBackoff"))
        validate_backoff(backoff, join(path, "defaultBackoff"))
    defaults = RetrySettings()
    return RetrySettings(
        enabled=boolean(block.get("enabled", False), join(path, "enabled")),
        global_max_retries=integer(
            block.get("globalMaxRetries", defaults.global_max_retries),
            join(path, "globalMaxRetries"),
            minimum=0,
        ),
        default_policy_name=name,
        default_backoff=backoff,
        max_attempted_runs=integer(
            block.get("maxAttemptedRuns", defaults.max_attempted_runs),
            join(path, "maxAttemptedRuns"),
            minimum=1,
        ),
    )


def settings_from_yaml(text: str) -> RetrySettings:
    """Settings from a scheduler configuration file (``scheduling: retryPolicy: ...``);
    a file without that block gives the defaults (feature disabled)."""
    documents = load_documents(text)
    if not documents:
        return RetrySettings()
    root = documents[0]
    if not isinstance(root, Mapping):
        raise RetryConfigError("", "the configuration must be a mapping")
    scheduling = root.get("scheduling") or {}
    if not isinstance(scheduling, Mapping):
        raise RetryConfigError("scheduling", "must be a mapping")
    if "retryPolicy" not in scheduling:
        return RetrySettings()
    return settings_from_mapping(scheduling["retryPolicy"], "scheduling.retryPolicy")
