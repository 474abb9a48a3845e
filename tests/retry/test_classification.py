"""Failure classification into configured categories, and Armada's own ``internal`` ones."""

from __future__ import annotations

import pytest

from armada_core.retry import (
    Classification,
    ClassificationConfig,
    Condition,
    ContainerFailure,
    InternalFailure,
    RetryConfigError,
    RunFailure,
    classify,
    load_classification,
)

CONFIG = load_classification("""
categories:
  - name: oom
    rules:
      - onConditions: [OOMKilled]
        subcategory: kernel
  - name: cuda_error
    rules:
      - onExitCodes: {operator: In, values: [74, 75]}
      - onTerminationMessage: {pattern: "(?i)cuda.*error"}
        subcategory: cuda
  - name: sidecar
    rules:
      - containerName: log-shipper
        onExitCodes: {operator: NotIn, values: [1]}
  - name: image
    rules:
      - onPodEvent: {pattern: "ErrImagePull|ImagePullBackOff"}
        subcategory: pull
  - name: node_failure
    rules:
      - onConditions: [Evicted]
defaultCategory: unknown
""")


def c(name: str, code: int = 1, message: str = "", reason: str = "") -> ContainerFailure:
    return ContainerFailure(name, code, message, reason)


CASES = [
    ("condition", RunFailure((c("main", 137, reason="OOMKilled"),)), ("oom", "kernel")),
    (
        "first match across categories wins",
        RunFailure((c("main", 74, reason="OOMKilled"),)),
        ("oom", "kernel"),
    ),
    ("exit code In", RunFailure((c("main", 74),)), ("cuda_error", "")),
    ("any container may match", RunFailure((c("a", 1), c("b", 75))), ("cuda_error", "")),
    ("message regex", RunFailure((c("main", 1, "CUDA memory error"),)), ("cuda_error", "cuda")),
    ("container scoped", RunFailure((c("main", 3), c("log-shipper", 9))), ("sidecar", "")),
    ("container scoped miss falls to default", RunFailure((c("log-shipper", 1),)), ("unknown", "")),
    (
        "pod event",
        RunFailure(pod_events=("Failed to pull image: ErrImagePull",)),
        ("image", "pull"),
    ),
    ("pod-level condition", RunFailure(condition=Condition.EVICTED), ("node_failure", "")),
    ("default", RunFailure((c("main", 1, "boom"),)), ("unknown", "")),
]


@pytest.mark.parametrize(("failure", "expected"), [x[1:] for x in CASES], ids=[x[0] for x in CASES])
def test_classification(failure: RunFailure, expected: tuple[str, str]) -> None:
    assert classify(failure, CONFIG) == Classification(*expected)


def test_no_default_means_no_label() -> None:
    assert classify(RunFailure((c("main"),)), ClassificationConfig()) is None


@pytest.mark.parametrize("kind", list(InternalFailure))
def test_armadas_own_failures_are_internal(kind: InternalFailure) -> None:
    assert classify(RunFailure((c("main", 74),)), CONFIG, kind) == Classification(
        "internal", kind.value
    )


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        (
            "categories: [{name: internal, rules: [{onConditions: [Evicted]}]}]",
            "categories[0].name",
            "reserved",
        ),
        ("categories: [{rules: [{onConditions: [Evicted]}]}]", "categories[0].name", "required"),
        ("categories: [{name: a, rules: []}]", "categories[0].rules", "at least one rule"),
        (
            "categories: [{name: a, rules: [{subcategory: x}]}]",
            "categories[0].rules[0]",
            "needs at least one of",
        ),
        (
            "categories: [{name: a, rules: [{onExitCodes: {operator: Is, values: [1]}}]}]",
            "categories[0].rules[0].onExitCodes.operator",
            "must be In or NotIn",
        ),
        (
            "categories: [{name: a, rules: [{onPodEvent: {pattern: '['}}]}]",
            "categories[0].rules[0].onPodEvent.pattern",
            "invalid regular expression",
        ),
        (
            "categories: [{name: a, rules: [{onConditions: [Melted]}]}]",
            "categories[0].rules[0].onConditions[0]",
            "unknown condition",
        ),
        (
            "categories: [{name: a, rules: [{containerName: x, onPodEvent: y}]}]",
            "categories[0].rules[0].containerName",
            "needs onExitCodes",
        ),
        (
            "categories:\n - {name: a, rules: [{onConditions: [Evicted]}]}\n"
            " - {name: a, rules: [{onConditions: [Evicted]}]}",
            "categories[1].name",
            "twice",
        ),
        ("defaultSubcategory: x", "defaultSubcategory", "needs defaultCategory"),
        ("categorys: []", "categorys", "did you mean categories?"),
    ],
)
def test_invalid_classification_config(text: str, path: str, problem: str) -> None:
    with pytest.raises(RetryConfigError) as info:
        load_classification(text)
    assert info.value.path == path and problem in info.value.problem
