"""The RetryPolicy YAML resource: every seed example loads, every rejection names its field."""

from __future__ import annotations

import pytest

from armada_core.retry import (
    Action,
    AntiAffinityMode,
    Backoff,
    Condition,
    ExitCodeMatcher,
    ExitCodeOperator,
    MemoryBump,
    RetryConfigError,
    RetryPolicy,
    RetryRule,
    dump_policies,
    format_duration,
    load_policies,
    load_policy,
    parse_duration,
)

from .seed_examples import ALL_SEED_POLICIES, ML_TRAINING, PER_RULE_OVERRIDES, policy_yaml


def test_seed_ml_training_policy_loads_field_by_field() -> None:
    policy = load_policy(ML_TRAINING)
    assert policy == RetryPolicy(
        name="ml-training",
        retry_limit=5,
        default_action=Action.FAIL,
        backoff=Backoff(initial_delay=0.0),
        anti_affinity=AntiAffinityMode.NONE,
        rules=(
            RetryRule(
                Action.RETRY,
                on_conditions=(Condition.PREEMPTED, Condition.EVICTED),
                anti_affinity=AntiAffinityMode.NODE,
            ),
            RetryRule(Action.RETRY, on_conditions=(Condition.OOM_KILLED,), retry_limit=3),
            RetryRule(Action.RETRY, on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (137,))),
            RetryRule(Action.RETRY, on_failure_category=("cuda_error", "infiniband_error")),
        ),
    )


def test_per_rule_overrides_load() -> None:
    [rule] = load_policy(PER_RULE_OVERRIDES).rules
    assert rule.retry_limit == 3
    assert rule.anti_affinity is AntiAffinityMode.NODE
    assert rule.backoff == Backoff(30.0, 300.0, 2.0)


@pytest.mark.parametrize("text", ALL_SEED_POLICIES)
def test_every_seed_example_round_trips_through_yaml(text: str) -> None:
    policy = load_policy(text)
    assert load_policies(dump_policies([policy])) == [policy]


def test_missing_fields_take_the_documented_defaults() -> None:
    policy = load_policy(policy_yaml("bare", "{}"))
    assert policy == RetryPolicy("bare")
    assert policy.retry_limit is None and policy.default_action is Action.FAIL


def test_multi_document_files_load_in_order() -> None:
    text = policy_yaml("a", "retryLimit: 1") + "---\n" + policy_yaml("b", "retryLimit: 2")
    assert [p.name for p in load_policies(text)] == ["a", "b"]


def test_upstream_category_rule_and_mutation_spelling_is_accepted() -> None:
    policy = load_policy(
        policy_yaml(
            "upstream",
            """
retryLimit: 2
defaultAction: Fail
rules:
  - action: Retry
    onCategory: oom
    onSubcategory: small
    mutate:
      affinity:
        avoidSameNode: true
      resources:
        memory:
          factor: 1.5
""",
        )
    )
    [rule] = policy.rules
    assert rule.on_failure_category == ("oom",) and rule.on_failure_subcategory == ("small",)
    assert rule.avoid_same_node and rule.node_anti_affinity is AntiAffinityMode.NODE
    assert rule.memory_bump == MemoryBump(factor=1.5)
    assert load_policies(dump_policies([policy])) == [policy]


def test_bare_pattern_string_is_accepted() -> None:
    [rule] = load_policy(
        policy_yaml(
            "p",
            """
rules:
  - action: Retry
    onTerminationMessage: TRANSIENT
""",
        )
    ).rules
    assert rule.on_termination_message == "TRANSIENT"


RULE = "rules:\n  - action: Retry\n"


def rule_with(extra: str) -> str:
    return RULE + "".join(f"    {line}\n" for line in extra.strip("\n").splitlines())


REJECTIONS = [
    (
        "bad operator",
        rule_with("onExitCodes: {operator: Equals, values: [1]}"),
        "spec.rules[0].onExitCodes.operator",
        "must be In or NotIn",
    ),
    (
        "third rule operator",
        "rules:\n"
        + "".join("  - action: Retry\n    onConditions: [Evicted]\n" for _ in range(2))
        + "  - action: Retry\n    onExitCodes: {operator: in, values: [1]}\n",
        "spec.rules[2].onExitCodes.operator",
        "must be In or NotIn, not 'in'",
    ),
    (
        "no exit code values",
        rule_with("onExitCodes: {operator: In, values: []}"),
        "spec.rules[0].onExitCodes.values",
        "at least one exit code",
    ),
    (
        "missing values",
        rule_with("onExitCodes: {operator: In}"),
        "spec.rules[0].onExitCodes.values",
        "is required",
    ),
    (
        "non-integer exit code",
        rule_with("onExitCodes: {operator: In, values: [one]}"),
        "spec.rules[0].onExitCodes.values[0]",
        "must be an integer",
    ),
    (
        "exit code out of range",
        rule_with("onExitCodes: {operator: In, values: [4294967296]}"),
        "spec.rules[0].onExitCodes.values[0]",
        "32-bit",
    ),
    (
        "unknown condition",
        rule_with("onConditions: [OOMKilled, Oom]"),
        "spec.rules[0].onConditions[1]",
        "unknown condition 'Oom'",
    ),
    (
        "bad regex",
        rule_with("onTerminationMessage: {pattern: '(unclosed'}"),
        "spec.rules[0].onTerminationMessage.pattern",
        "invalid regular expression",
    ),
    (
        "empty regex",
        rule_with("onTerminationMessage: {pattern: ''}"),
        "spec.rules[0].onTerminationMessage.pattern",
        "must not be empty",
    ),
    ("no matcher", RULE, "spec.rules[0]", "needs at least one of onExitCodes"),
    (
        "missing action",
        "rules:\n  - onConditions: [Evicted]\n",
        "spec.rules[0].action",
        "is required",
    ),
    (
        "bad action",
        "rules:\n  - action: retry\n    onConditions: [Evicted]\n",
        "spec.rules[0].action",
        "must be Retry or Fail, not 'retry'",
    ),
    ("bad default action", "defaultAction: Maybe", "spec.defaultAction", "must be Retry or Fail"),
    ("negative policy limit", "retryLimit: -1", "spec.retryLimit", "at least 0"),
    ("string policy limit", "retryLimit: five", "spec.retryLimit", "must be an integer"),
    (
        "negative rule limit",
        rule_with("onConditions: [Evicted]\nretryLimit: -2"),
        "spec.rules[0].retryLimit",
        "at least 0",
    ),
    (
        "bad duration",
        "backoff: {initialDelay: soon}",
        "spec.backoff.initialDelay",
        "must be a duration",
    ),
    ("negative duration", "backoff: {maxDelay: -5}", "spec.backoff.maxDelay", "non-negative"),
    (
        "shrinking multiplier",
        "backoff: {multiplier: 0.5}",
        "spec.backoff.multiplier",
        "at least 1.0",
    ),
    (
        "rule backoff multiplier",
        rule_with("onConditions: [Evicted]\nbackoff: {multiplier: 0.9}"),
        "spec.rules[0].backoff.multiplier",
        "at least 1.0",
    ),
    (
        "bad anti-affinity mode",
        "antiAffinity: {mode: zone}",
        "spec.antiAffinity.mode",
        "must be none or node, not 'zone'",
    ),
    ("anti-affinity without mode", "antiAffinity: {}", "spec.antiAffinity.mode", "is required"),
    (
        "unknown spec field",
        "retryLimt: 3",
        "spec.retryLimt",
        "unknown field (did you mean retryLimit?)",
    ),
    (
        "unknown rule field",
        rule_with("onExitCode: {operator: In, values: [1]}"),
        "spec.rules[0].onExitCode",
        "did you mean onExitCodes?",
    ),
    (
        "subcategory alone",
        rule_with("onFailureSubcategory: small"),
        "spec.rules[0]",
        "needs at least one of",
    ),
    (
        "subcategory without category",
        rule_with("onConditions: [Evicted]\nonFailureSubcategory: small"),
        "spec.rules[0].onFailureSubcategory",
        "needs onFailureCategory",
    ),
    (
        "both category spellings",
        rule_with("onCategory: a\nonFailureCategory: [b]"),
        "spec.rules[0].onCategory",
        "either onFailureCategory or onCategory",
    ),
    (
        "empty category",
        rule_with("onFailureCategory: ['']"),
        "spec.rules[0].onFailureCategory[0]",
        "must not be empty",
    ),
    (
        "containerName without container matcher",
        rule_with("onFailureCategory: [oom]\ncontainerName: main"),
        "spec.rules[0].containerName",
        "needs onExitCodes, onConditions or onTerminationMessage",
    ),
    (
        "empty containerName",
        rule_with("onConditions: [OOMKilled]\ncontainerName: ''"),
        "spec.rules[0].containerName",
        "must not be empty",
    ),
    (
        "includeInitContainers not boolean",
        rule_with("onConditions: [OOMKilled]\nincludeInitContainers: 'yes'"),
        "spec.rules[0].includeInitContainers",
        "must be true or false",
    ),
    (
        "retryLimit on Fail",
        "rules:\n  - action: Fail\n    onConditions: [Evicted]\n    retryLimit: 2\n",
        "spec.rules[0].retryLimit",
        "only allowed when action is Retry",
    ),
    (
        "backoff on Fail",
        "rules:\n  - action: Fail\n    onConditions: [Evicted]\n    backoff: {initialDelay: 1s}\n",
        "spec.rules[0].backoff",
        "only allowed",
    ),
    (
        "bump with both",
        rule_with(
            "onFailureCategory: [oom]\nmutate: {resources: {memory: {static: 1Gi, factor: 2}}}"
        ),
        "spec.rules[0].mutate.resources.memory",
        "exactly one of static and factor",
    ),
    (
        "bump with neither",
        rule_with("onFailureCategory: [oom]\nmutate: {resources: {memory: {}}}"),
        "spec.rules[0].mutate.resources.memory",
        "exactly one of static and factor",
    ),
    (
        "bump factor 1",
        rule_with("onFailureCategory: [oom]\nmutate: {resources: {memory: {factor: 1.0}}}"),
        "spec.rules[0].mutate.resources.memory.factor",
        "greater than 1.0",
    ),
    (
        "bump bad quantity",
        rule_with("onFailureCategory: [oom]\nmutate: {resources: {memory: {static: many}}}"),
        "spec.rules[0].mutate.resources.memory.static",
        "invalid static quantity 'many'",
    ),
    (
        "bump negative",
        rule_with("onFailureCategory: [oom]\nmutate: {resources: {memory: {static: -1Gi}}}"),
        "spec.rules[0].mutate.resources.memory.static",
        "must be positive",
    ),
    (
        "avoidSameNode against mode none",
        rule_with(
            "onFailureCategory: [oom]\nantiAffinity: {mode: none}\n"
            "mutate: {affinity: {avoidSameNode: true}}"
        ),
        "spec.rules[0].mutate.affinity.avoidSameNode",
        "conflicts with antiAffinity.mode none",
    ),
    ("rules not a list", "rules: {action: Retry}", "spec.rules", "must be a list"),
]


@pytest.mark.parametrize(
    ("spec", "path", "problem"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS]
)
def test_rejections_name_the_field(spec: str, path: str, problem: str) -> None:
    with pytest.raises(RetryConfigError) as info:
        load_policy(policy_yaml("p", spec))
    assert info.value.path == path
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{path}: ")


DOCUMENT_REJECTIONS = [
    ("wrong kind", "kind: Queue\nmetadata: {name: p}\n", "kind", "must be RetryPolicy"),
    (
        "wrong apiVersion",
        "apiVersion: v2\nkind: RetryPolicy\nmetadata: {name: p}\n",
        "apiVersion",
        "must be armadaproject.io/v1",
    ),
    ("no name", "kind: RetryPolicy\nmetadata: {}\n", "metadata.name", "is required"),
    ("no metadata", "kind: RetryPolicy\n", "metadata.name", "is required"),
    (
        "uppercase name",
        "kind: RetryPolicy\nmetadata: {name: MyPolicy}\n",
        "metadata.name",
        "is invalid",
    ),
    (
        "trailing dash",
        "kind: RetryPolicy\nmetadata: {name: policy-}\n",
        "metadata.name",
        "is invalid",
    ),
    (
        "long name",
        "kind: RetryPolicy\nmetadata: {name: " + "a" * 64 + "}\n",
        "metadata.name",
        "at most 63 characters",
    ),
    ("not a mapping", "- just\n- a list\n", "", "must be a mapping"),
    ("broken YAML", "kind: [RetryPolicy\n", "line 2", "not valid YAML"),
]


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [r[1:] for r in DOCUMENT_REJECTIONS],
    ids=[r[0] for r in DOCUMENT_REJECTIONS],
)
def test_document_rejections(text: str, path: str, problem: str) -> None:
    with pytest.raises(RetryConfigError) as info:
        load_policy(text)
    assert info.value.path == path
    assert problem in info.value.problem


def test_errors_in_later_documents_say_which_document() -> None:
    text = policy_yaml("a", "{}") + "---\n" + policy_yaml("b", "retryLimit: x")
    with pytest.raises(RetryConfigError, match=r"^document 2: spec.retryLimit: "):
        load_policies(text)


def test_duplicate_names_are_rejected() -> None:
    text = policy_yaml("a", "{}") + "---\n" + policy_yaml("a", "{}")
    with pytest.raises(RetryConfigError, match="defined twice"):
        load_policies(text)


def test_load_policy_wants_exactly_one() -> None:
    with pytest.raises(RetryConfigError, match="found 0"):
        load_policy("")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0s", 0.0),
        ("30s", 30.0),
        ("5m", 300.0),
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        (45, 45.0),
        (2.5, 2.5),
    ],
)
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5", "5 m", "-1s", True, None])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_duration_spelling() -> None:
    assert [format_duration(s) for s in (0, 30, 90, 300, 3600, 5400, 0.25)] == [
        "0s",
        "30s",
        "1m30s",
        "5m",
        "1h",
        "1h30m",
        "250ms",
    ]
