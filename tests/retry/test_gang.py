"""Gangs are retried as a whole, as a new generation, or fail together."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from armada_core.retry import (
    Condition,
    ContainerFailure,
    GangGenerationKey,
    RetryHistory,
    RetrySettings,
    RunFailure,
    evaluate_gang,
    load_policy,
)

from .seed_examples import ANTI_AFFINITY, INFRA, ML_OOM, ML_TRAINING

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ON = RetrySettings(enabled=True, global_max_retries=20)
POLICIES = [load_policy(INFRA), load_policy(ML_OOM)]


def preempted(node: str) -> RunFailure:
    return RunFailure(condition=Condition.PREEMPTED, node=node, termination_grace_period=30)


def test_gang_retry_is_one_retry_of_a_new_generation() -> None:
    decision = evaluate_gang(
        "g",
        {"a": preempted("n1"), "b": preempted("n2")},
        member_ids=["a", "b", "c"],
        policies=POLICIES,
        settings=ON,
        now=NOW,
    )
    assert decision.retry
    assert decision.history.total_retries == 1
    assert decision.history.rule_retries == {"infra/rules[0]": 1}
    assert decision.history.gang_generation == 1 and decision.history.run_count == 2
    assert decision.generation == GangGenerationKey("g", 1)
    assert decision.pod_names == {"a": "armada-a-0-1", "b": "armada-b-0-1", "c": "armada-c-0-1"}
    assert decision.retry_after == NOW + timedelta(seconds=30)


def test_each_rule_a_generation_used_is_counted_once() -> None:
    oom = RunFailure(containers=(ContainerFailure("main", 137, reason="OOMKilled"),))
    decision = evaluate_gang("g", {"a": preempted("n1"), "b": oom}, policies=POLICIES, settings=ON)
    assert decision.history.rule_retries == {"infra/rules[0]": 1, "ml-training/rules[0]": 1}
    assert decision.history.total_retries == 1


def test_gang_fails_when_any_member_failure_is_not_retryable() -> None:
    crash = RunFailure(containers=(ContainerFailure("main", 1),))
    decision = evaluate_gang(
        "g",
        {"a": preempted("n1"), "b": crash},
        policies=POLICIES,
        settings=ON,
        history=RetryHistory(gang_generation=2),
    )
    assert not decision.retry
    assert "member b" in decision.reason
    assert decision.generation == GangGenerationKey("g", 2)
    assert decision.history == RetryHistory(gang_generation=2)


def test_gang_generations_exhaust_the_rule_limit() -> None:
    history = RetryHistory()
    generations = []
    for _ in range(12):
        d = evaluate_gang(
            "g",
            {"a": preempted("n1")},
            member_ids=["a", "b"],
            policies=POLICIES,
            settings=ON,
            history=history,
        )
        if not d.retry:
            break
        generations.append(d.generation.generation)
        history = d.history
    assert generations == list(range(1, 11))


def test_gang_avoids_each_failed_members_node_when_the_rule_says_so() -> None:
    decision = evaluate_gang(
        "g",
        {"a": preempted("n1"), "b": preempted("n2")},
        policies=[load_policy(ANTI_AFFINITY)],
        settings=ON,
    )
    assert decision.avoid_nodes == ("n1", "n2")


def test_gang_memory_bumps_are_per_member() -> None:
    policy = load_policy(ML_TRAINING)
    decision = evaluate_gang("g", {"a": preempted("n1")}, policies=[policy], settings=ON)
    assert decision.memory_bumps == {}


def test_gang_release_waits_for_every_member() -> None:
    decision = evaluate_gang(
        "g", {"a": preempted("n1"), "b": preempted("n2")}, policies=POLICIES, settings=ON, now=NOW
    )
    assert decision.released(NOW + timedelta(seconds=3)) == NOW + timedelta(seconds=3)


def test_legacy_gang_retries_returned_leases_only() -> None:
    legacy = RetrySettings(enabled=False)
    returned = RunFailure(returned_lease=True)
    d = evaluate_gang("g", {"a": returned, "b": returned}, policies=[], settings=legacy)
    assert d.retry and d.pod_names == {"a": "armada-a-0", "b": "armada-b-0"}
    d = evaluate_gang("g", {"a": returned, "b": preempted("n")}, policies=POLICIES, settings=legacy)
    assert not d.retry
