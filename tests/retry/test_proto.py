"""Policies to and from ``api.RetryPolicy``: lossless for ours, upstream meaning for theirs."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from armada_core.api import submit_pb2
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
    load_policy,
    policy_from_proto,
    policy_to_proto,
)

from .seed_examples import ALL_SEED_POLICIES

EVERYTHING = RetryPolicy(
    name="everything",
    retry_limit=0,
    default_action=Action.RETRY,
    backoff=Backoff(1.0, 60.0, 1.5),
    anti_affinity=AntiAffinityMode.NODE,
    rules=(
        RetryRule(
            Action.RETRY,
            on_exit_codes=ExitCodeMatcher(ExitCodeOperator.NOT_IN, (1, 2)),
            on_conditions=(Condition.OOM_KILLED, Condition.UNSCHEDULABLE),
            on_termination_message="TRANSIENT",
            on_failure_category=("a", "b"),
            on_failure_subcategory=("x",),
            container_name="main",
            include_init_containers=True,
            retry_limit=0,
            backoff=Backoff(None, 5.0),
            anti_affinity=AntiAffinityMode.NONE,
        ),
        RetryRule(
            Action.RETRY,
            on_failure_category=("oom",),
            on_failure_subcategory=("s", "t"),
            avoid_same_node=True,
            memory_bump=MemoryBump(static="512Mi"),
        ),
        RetryRule(Action.RETRY, on_failure_category=("oom",), memory_bump=MemoryBump(factor=1.25)),
        RetryRule(Action.FAIL, on_conditions=(Condition.DEADLINE_EXCEEDED,)),
    ),
)


@pytest.mark.parametrize(
    "policy", [EVERYTHING, *map(load_policy, ALL_SEED_POLICIES)], ids=lambda p: p.name
)
def test_round_trip_through_bytes(policy: RetryPolicy) -> None:
    data = policy_to_proto(policy).SerializeToString(deterministic=True)
    assert policy_from_proto(submit_pb2.RetryPolicy.FromString(data)) == policy


def test_absent_policy_limit_is_marked_and_zero_limits_survive() -> None:
    unset = policy_to_proto(RetryPolicy("a"))
    assert unset.retry_limit == 0 and unset.retry_limit_unset
    zero = policy_to_proto(RetryPolicy("a", retry_limit=0))
    assert zero.retry_limit == 0 and not zero.retry_limit_unset
    assert policy_from_proto(zero).retry_limit == 0
    assert policy_from_proto(unset).retry_limit is None


def test_single_category_travels_in_the_upstream_field() -> None:
    msg = policy_to_proto(EVERYTHING)
    assert msg.rules[1].on_category == "oom" and not msg.rules[1].match_categories
    assert list(msg.rules[1].match_subcategories) == ["s", "t"]
    assert msg.rules[0].on_category == "" and list(msg.rules[0].match_categories) == ["a", "b"]
    assert msg.rules[0].on_subcategory == "x"
    assert msg.rules[1].mutate.affinity.avoid_same_node
    assert msg.rules[1].mutate.resources.memory.static == "512Mi"


def test_upstream_message_reads_with_upstream_meaning() -> None:
    msg = json_format.ParseDict(
        {
            "name": "upstream",
            "retry_limit": 3,
            "default_action": "RETRY_ACTION_FAIL",
            "rules": [
                {
                    "action": "RETRY_ACTION_RETRY",
                    "on_category": "oom",
                    "on_subcategory": "small",
                    "mutate": {
                        "affinity": {"avoid_same_node": True},
                        "resources": {"memory": {"factor": 1.5}},
                    },
                }
            ],
        },
        submit_pb2.RetryPolicy(),
    )
    policy = policy_from_proto(msg)
    assert policy == RetryPolicy(
        "upstream",
        retry_limit=3,
        default_action=Action.FAIL,
        rules=(
            RetryRule(
                Action.RETRY,
                on_failure_category=("oom",),
                on_failure_subcategory=("small",),
                avoid_same_node=True,
                memory_bump=MemoryBump(factor=1.5),
            ),
        ),
    )
    assert (
        policy_from_proto(
            submit_pb2.RetryPolicy(name="zero", default_action=submit_pb2.RETRY_ACTION_RETRY)
        ).retry_limit
        == 0
    )


def test_extension_fields_use_numbers_from_100() -> None:
    for message in (submit_pb2.RetryPolicy, submit_pb2.RetryRule):
        upstream = {
            "name",
            "retry_limit",
            "default_action",
            "rules",
            "action",
            "on_category",
            "on_subcategory",
            "mutate",
        }
        for field in message.DESCRIPTOR.fields:
            if field.name not in upstream or (
                message is submit_pb2.RetryRule and field.name == "retry_limit"
            ):
                assert field.number >= 100, field.full_name


@pytest.mark.parametrize(
    ("msg", "path", "problem"),
    [
        (submit_pb2.RetryPolicy(name="p"), "spec.defaultAction", "must be Fail or Retry"),
        (
            submit_pb2.RetryPolicy(name="p", default_action=1, rules=[submit_pb2.RetryRule()]),
            "spec.rules[0].action",
            "must be Fail or Retry",
        ),
        (
            submit_pb2.RetryPolicy(
                name="p",
                default_action=1,
                rules=[
                    submit_pb2.RetryRule(
                        action=2, exit_code_operator="Equals", exit_code_values=[1]
                    )
                ],
            ),
            "spec.rules[0].onExitCodes.operator",
            "must be In or NotIn",
        ),
        (
            submit_pb2.RetryPolicy(
                name="p",
                default_action=1,
                rules=[submit_pb2.RetryRule(action=2, match_conditions=["Oom"])],
            ),
            "spec.rules[0].onConditions[0]",
            "unknown condition",
        ),
        (
            submit_pb2.RetryPolicy(
                name="p", default_action=1, rules=[submit_pb2.RetryRule(action=2)]
            ),
            "spec.rules[0]",
            "needs at least one of",
        ),
        (
            submit_pb2.RetryPolicy(name="p", default_action=1, anti_affinity_mode="zone"),
            "spec.antiAffinity.mode",
            "must be none or node",
        ),
        (submit_pb2.RetryPolicy(name="", default_action=1), "metadata.name", "must not be empty"),
    ],
)
def test_invalid_messages_are_rejected_with_the_field(
    msg: submit_pb2.RetryPolicy, path: str, problem: str
) -> None:
    with pytest.raises(RetryConfigError) as info:
        policy_from_proto(msg)
    assert info.value.path == path and problem in info.value.problem


def test_memory_bump_with_neither_field_is_rejected() -> None:
    msg = submit_pb2.RetryPolicy(
        name="p", default_action=1, rules=[submit_pb2.RetryRule(action=2, on_category="oom")]
    )
    msg.rules[0].mutate.resources.memory.SetInParent()
    with pytest.raises(RetryConfigError, match="exactly one of static and factor"):
        policy_from_proto(msg)
