"""Global settings and which policies apply to a job."""

from __future__ import annotations

import pytest

from armada_core.retry import (
    BUILTIN_BACKOFF,
    RETRY_POLICY_ANNOTATION,
    Backoff,
    RetryConfigError,
    RetryPolicy,
    RetrySettings,
    effective_policy_names,
    pod_name,
    resolve_policies,
    settings_from_yaml,
)

from .seed_examples import SCHEDULER_CONFIG


def test_seed_scheduler_config() -> None:
    assert settings_from_yaml(SCHEDULER_CONFIG) == RetrySettings(
        enabled=True,
        global_max_retries=20,
        default_policy_name="default",
        default_backoff=Backoff(0.0, 600.0, 2.0),
    )


def test_defaults_are_the_legacy_behaviour() -> None:
    s = settings_from_yaml("scheduling: {}")
    assert not s.enabled and s.default_backoff == BUILTIN_BACKOFF and s.max_attempted_runs == 5


def test_partial_default_backoff_is_completed() -> None:
    s = settings_from_yaml("scheduling:\n  retryPolicy:\n    defaultBackoff: {maxDelay: 1m}\n")
    assert s.default_backoff == Backoff(0.0, 60.0, 2.0)


@pytest.mark.parametrize(
    ("block", "path", "problem"),
    [
        ("enabled: yes please", "scheduling.retryPolicy.enabled", "true or false"),
        ("globalMaxRetries: -1", "scheduling.retryPolicy.globalMaxRetries", "at least 0"),
        ("maxAttemptedRuns: 0", "scheduling.retryPolicy.maxAttemptedRuns", "at least 1"),
        ("defaultPolicyName: Bad_Name", "scheduling.retryPolicy.defaultPolicyName", "is invalid"),
        (
            "defaultBackoff: {multiplier: 0}",
            "scheduling.retryPolicy.defaultBackoff.multiplier",
            "at least 1.0",
        ),
        ("globalMaxRetry: 3", "scheduling.retryPolicy.globalMaxRetry", "did you mean"),
    ],
)
def test_invalid_settings(block: str, path: str, problem: str) -> None:
    with pytest.raises(RetryConfigError) as info:
        settings_from_yaml(f"scheduling:\n  retryPolicy:\n    {block}\n")
    assert info.value.path == path and problem in info.value.problem


CATALOGUE = {n: RetryPolicy(n) for n in ("infra", "ml-training", "extra-retry", "default")}


@pytest.mark.parametrize(
    ("queue", "annotation", "expected"),
    [
        (["infra", "ml-training"], "extra-retry", ["infra", "ml-training", "extra-retry"]),
        (["infra"], None, ["infra"]),
        ([], "extra-retry", ["extra-retry"]),
        ([], None, ["default"]),
        ([], " , ", ["default"]),
        (["infra"], "infra, extra-retry", ["infra", "extra-retry"]),
    ],
)
def test_policies_are_additive(
    queue: list[str], annotation: str | None, expected: list[str]
) -> None:
    annotations = {RETRY_POLICY_ANNOTATION: annotation} if annotation is not None else {}
    resolved = resolve_policies(queue, annotations, CATALOGUE, "default")
    assert [p.name for p in resolved.policies] == expected
    assert resolved.missing == ()


def test_missing_policies_are_reported_and_skipped() -> None:
    resolved = resolve_policies(["infra", "gone"], {}, CATALOGUE, "default")
    assert [p.name for p in resolved.policies] == ["infra"] and resolved.missing == ("gone",)
    assert effective_policy_names([], {}, None) == ()


@pytest.mark.parametrize(
    ("run", "enabled", "name"),
    [
        (0, True, "armada-j1-0"),
        (1, True, "armada-j1-0-1"),
        (7, True, "armada-j1-0-7"),
        (0, False, "armada-j1-0"),
        (3, False, "armada-j1-0"),
    ],
)
def test_pod_naming(run: int, enabled: bool, name: str) -> None:
    assert pod_name("j1", run, unique_per_run=enabled) == name
