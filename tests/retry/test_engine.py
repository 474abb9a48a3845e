"""The retry engine: limits, counters, backoff, anti-affinity, naming, legacy mode."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armada_core.retry import (
    Action,
    AntiAffinityMode,
    Backoff,
    Classification,
    Condition,
    ContainerFailure,
    MemoryBump,
    RetryHistory,
    RetryPolicy,
    RetryRule,
    RetrySettings,
    RunFailure,
    Verdict,
    apply_memory_bump,
    backoff_delay,
    evaluate,
    load_policy,
)

from .seed_examples import (
    ANTI_AFFINITY,
    BACKOFF_LEVELS,
    CONTAINER_TARGETING,
    DEFAULT_ACTION,
    INFRA,
    ML_OOM,
    ML_TRAINING,
    PER_RULE_OVERRIDES,
    TERMINATION_MESSAGE,
    policy_yaml,
)

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ON = RetrySettings(enabled=True, global_max_retries=20)
PREEMPTED = RunFailure(condition=Condition.PREEMPTED, node="node-a")
EVICTED = RunFailure(condition=Condition.EVICTED, node="node-b")
OOM = RunFailure(containers=(ContainerFailure("main", 137, reason="OOMKilled"),), node="node-c")
CRASH = RunFailure(containers=(ContainerFailure("main", 1, message="bug"),), node="node-d")


def run_until_failure(
    policies: list[RetryPolicy], failures: list[RunFailure], cfg: RetrySettings = ON
) -> tuple[int, RetryHistory, Verdict]:
    """Feed failures until one is not retried; return how many were retried."""
    history = RetryHistory()
    for i, failure in enumerate(failures):
        decision = evaluate("job", failure, policies=policies, settings=cfg, history=history)
        if not decision.retry:
            return i, history, decision.verdict
        history = decision.history
    return len(failures), history, Verdict.RETRY


# --- the seed's worked example -------------------------------------------------------------

WORKED = [load_policy(INFRA), load_policy(ML_OOM)]


@pytest.mark.parametrize(
    ("failure", "rule", "limit"),
    [
        (PREEMPTED, "infra/rules[0]", 10),
        (OOM, "ml-training/rules[0]", 3),
    ],
)
def test_worked_example_table(failure: RunFailure, rule: str, limit: int) -> None:
    decision = evaluate("job", failure, policies=WORKED, settings=ON)
    assert decision.retry and decision.rule_key == rule and decision.limit == limit


def test_preempted_ten_times_and_oom_three_times_independently() -> None:
    failures = [PREEMPTED] * 10 + [OOM] * 3
    retried, history, _ = run_until_failure(WORKED, failures)
    assert retried == 13
    assert history.rule_retries == {"infra/rules[0]": 10, "ml-training/rules[0]": 3}
    assert history.total_retries == 13
    # The eleventh preemption and the fourth OOM each fail the job.
    for extra, rule in ((PREEMPTED, "infra/rules[0]"), (OOM, "ml-training/rules[0]")):
        decision = evaluate("job", extra, policies=WORKED, settings=ON, history=history)
        assert not decision.retry and decision.verdict is Verdict.FAIL_RULE_LIMIT
        assert decision.rule_key == rule


def test_interleaved_failures_count_separately() -> None:
    failures = [PREEMPTED, OOM] * 3 + [PREEMPTED] * 7
    retried, history, _ = run_until_failure(WORKED, [*failures, PREEMPTED])
    assert retried == len(failures)
    assert history.rule_retries["infra/rules[0]"] == 10


def test_global_cap_bounds_the_total() -> None:
    cap = RetrySettings(enabled=True, global_max_retries=12)
    retried, history, verdict = run_until_failure(WORKED, [PREEMPTED] * 10 + [OOM] * 3, cap)
    assert (retried, history.total_retries, verdict) == (12, 12, Verdict.FAIL_GLOBAL_LIMIT)


def test_lowering_the_global_cap_fails_jobs_over_it_on_next_evaluation() -> None:
    _, history, _ = run_until_failure(WORKED, [PREEMPTED] * 8)
    assert history.total_retries == 8
    lowered = RetrySettings(enabled=True, global_max_retries=5)
    decision = evaluate("job", PREEMPTED, policies=WORKED, settings=lowered, history=history)
    assert not decision.retry and decision.verdict is Verdict.FAIL_GLOBAL_LIMIT
    assert "8/5" in decision.reason
    assert decision.history == history
    killed = RetrySettings(enabled=True, global_max_retries=0)
    assert not evaluate("job", PREEMPTED, policies=WORKED, settings=killed).retry


def test_effective_limit_falls_back_rule_then_policy_then_global() -> None:
    no_limits = load_policy(
        policy_yaml("open", "rules:\n  - action: Retry\n    onConditions: [Evicted]\n")
    )
    cfg = RetrySettings(enabled=True, global_max_retries=4)
    assert evaluate("j", EVICTED, policies=[no_limits], settings=cfg).limit == 4
    assert run_until_failure([no_limits], [EVICTED] * 9, cfg)[0] == 4
    assert evaluate("j", OOM, policies=[load_policy(ML_OOM)], settings=ON).limit == 3
    assert evaluate("j", EVICTED, policies=[load_policy(INFRA)], settings=ON).limit == 10


def test_rule_limit_zero_never_retries() -> None:
    policy = RetryPolicy(
        "p", rules=(RetryRule(Action.RETRY, on_conditions=(Condition.EVICTED,), retry_limit=0),)
    )
    decision = evaluate("j", EVICTED, policies=[policy], settings=ON)
    assert decision.verdict is Verdict.FAIL_RULE_LIMIT and "(0/0)" in decision.reason


# --- rule order, default action, policy composition ----------------------------------------


def test_first_match_wins_across_concatenated_policies() -> None:
    fail_oom = RetryPolicy(
        "strict", rules=(RetryRule(Action.FAIL, on_conditions=(Condition.OOM_KILLED,)),)
    )
    decision = evaluate("j", OOM, policies=[fail_oom, load_policy(ML_TRAINING)], settings=ON)
    assert not decision.retry and decision.verdict is Verdict.FAIL_RULE
    assert decision.rule_key == "strict/rules[0]"
    decision = evaluate("j", OOM, policies=[load_policy(ML_TRAINING), fail_oom], settings=ON)
    assert decision.retry and decision.rule_key == "ml-training/rules[1]"


def test_ml_training_policy_rules() -> None:
    policy = [load_policy(ML_TRAINING)]
    cases = {
        "preempted": (PREEMPTED, "ml-training/rules[0]", 5),
        "oom": (OOM, "ml-training/rules[1]", 3),
        "exit 137 without OOM": (
            RunFailure(containers=(ContainerFailure("m", 137),)),
            "ml-training/rules[2]",
            5,
        ),
        "cuda category": (RunFailure(category="cuda_error"), "ml-training/rules[3]", 5),
    }
    for name, (failure, key, limit) in cases.items():
        decision = evaluate("j", failure, policies=policy, settings=ON)
        assert (decision.retry, decision.rule_key, decision.limit) == (True, key, limit), name
    unmatched = evaluate("j", CRASH, policies=policy, settings=ON)
    assert unmatched.verdict is Verdict.FAIL_DEFAULT and not unmatched.retry


def test_default_action_retry_uses_its_own_counter() -> None:
    policy = load_policy(DEFAULT_ACTION)
    decision = evaluate("j", CRASH, policies=[policy], settings=ON)
    assert decision.retry and decision.rule_key == "tolerant/default"
    assert decision.history.rule_retries == {"tolerant/default": 1}
    exit2 = RunFailure(containers=(ContainerFailure("main", 2),))
    assert evaluate("j", exit2, policies=[policy], settings=ON).verdict is Verdict.FAIL_RULE


def test_default_action_comes_from_the_first_policy() -> None:
    fail_first = [RetryPolicy("q"), load_policy(DEFAULT_ACTION)]
    assert evaluate("j", CRASH, policies=fail_first, settings=ON).verdict is Verdict.FAIL_DEFAULT


def test_no_policy_in_force_fails() -> None:
    decision = evaluate("j", CRASH, policies=[], settings=ON)
    assert decision.verdict is Verdict.FAIL_NO_POLICY and not decision.retry


def test_container_targeting_example() -> None:
    policy = [load_policy(CONTAINER_TARGETING)]
    main_killed = RunFailure(
        containers=(ContainerFailure("main", 137), ContainerFailure("log-shipper", 0))
    )
    assert evaluate("j", main_killed, policies=policy, settings=ON).retry
    sidecar_oom = RunFailure(
        containers=(
            ContainerFailure("main", 0),
            ContainerFailure("log-shipper", 137, reason="OOMKilled"),
        )
    )
    decision = evaluate("j", sidecar_oom, policies=policy, settings=ON)
    assert decision.verdict is Verdict.FAIL_RULE and decision.rule_key == "targeting/rules[1]"


def test_termination_message_example() -> None:
    policy = [load_policy(TERMINATION_MESSAGE)]
    transient = RunFailure(containers=(ContainerFailure("main", 1, message="TRANSIENT: retry"),))
    assert evaluate("j", transient, policies=policy, settings=ON).retry
    assert not evaluate("j", CRASH, policies=policy, settings=ON).retry


def test_upstream_category_only_rule() -> None:
    policy = RetryPolicy(
        "up",
        retry_limit=2,
        rules=(
            RetryRule(
                Action.RETRY,
                on_failure_category=("transient",),
                on_failure_subcategory=("node-failure",),
            ),
        ),
    )
    hit = RunFailure(category="transient", subcategory="node-failure")
    miss = RunFailure(category="transient", subcategory="other")
    assert run_until_failure([policy], [hit] * 5)[0] == 2
    assert evaluate("j", miss, policies=[policy], settings=ON).verdict is Verdict.FAIL_DEFAULT


# --- backoff ------------------------------------------------------------------------------


def test_backoff_formula() -> None:
    b = Backoff(10.0, 300.0, 2.0)
    assert [backoff_delay(b, n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert backoff_delay(Backoff(0.0, 600.0, 2.0), 5) == 0
    assert backoff_delay(b, 0) == 0
    assert backoff_delay(Backoff(1.0, 60.0, 10.0), 10_000) == 60


def test_backoff_levels_most_specific_wins() -> None:
    policy = [load_policy(BACKOFF_LEVELS)]
    history = RetryHistory()
    evicted_delays, oom_delays = [], []
    for _ in range(4):
        d = evaluate("j", EVICTED, policies=policy, settings=ON, history=history)
        evicted_delays.append(d.delay)
        history = d.history
    for _ in range(6):
        d = evaluate("j", OOM, policies=policy, settings=ON, history=history)
        oom_delays.append(d.delay)
        history = d.history
    assert evicted_delays == [30, 90, 270, 600]  # rule: 30s * 3^n, cap 10m
    assert oom_delays == [10, 20, 40, 80, 160, 300]  # policy: 10s * 2^n, cap 5m


def test_global_default_backoff_fills_unset_fields() -> None:
    cfg = RetrySettings(enabled=True, default_backoff=Backoff(5.0, 15.0, 2.0))
    policy = RetryPolicy(
        "p",
        backoff=Backoff(initial_delay=4.0),
        rules=(
            RetryRule(
                Action.RETRY, on_conditions=(Condition.EVICTED,), backoff=Backoff(multiplier=3.0)
            ),
        ),
    )
    history, delays = RetryHistory(), []
    for _ in range(3):
        d = evaluate("j", EVICTED, policies=[policy], settings=cfg, history=history)
        delays.append(d.delay)
        history = d.history
    assert delays == [4, 12, 15]


def test_retry_after_is_now_plus_delay() -> None:
    policy = [load_policy(PER_RULE_OVERRIDES)]
    decision = evaluate("j", OOM, policies=policy, settings=ON, now=NOW)
    assert decision.retry_after == NOW + timedelta(seconds=30)
    assert not decision.awaiting_termination


@settings(max_examples=200, deadline=None)
@given(
    initial=st.floats(0, 1e4),
    cap=st.floats(0, 1e5),
    multiplier=st.floats(1, 10),
    n=st.integers(1, 2000),
)
def test_backoff_is_monotone_and_capped(
    initial: float, cap: float, multiplier: float, n: int
) -> None:
    b = Backoff(initial, cap, multiplier)
    assert 0 <= backoff_delay(b, n) <= cap
    assert backoff_delay(b, n) <= backoff_delay(b, n + 1)


# --- preemption and graceful termination ---------------------------------------------------


def test_preemption_waits_for_the_grace_period_unless_termination_is_confirmed() -> None:
    policy = [load_policy(INFRA)]
    failure = RunFailure(condition=Condition.PREEMPTED, node="n", termination_grace_period=60)
    decision = evaluate("j", failure, policies=policy, settings=ON, now=NOW)
    assert decision.delay == 60 and decision.backoff_delay == 0
    assert decision.awaiting_termination
    assert decision.retry_after == NOW + timedelta(seconds=60)
    assert decision.released(NOW + timedelta(seconds=5)) == NOW + timedelta(seconds=5)
    assert decision.released(NOW + timedelta(seconds=90)) == NOW + timedelta(seconds=60)


def test_preemption_delay_is_max_of_backoff_and_grace() -> None:
    policy = RetryPolicy(
        "p",
        backoff=Backoff(30.0, 600.0, 2.0),
        rules=(RetryRule(Action.RETRY, on_conditions=(Condition.PREEMPTED,)),),
    )
    short = RunFailure(condition=Condition.PREEMPTED, termination_grace_period=10)
    long = RunFailure(condition=Condition.PREEMPTED, termination_grace_period=100)
    d = evaluate("j", short, policies=[policy], settings=ON, now=NOW)
    assert d.delay == 30 and not d.awaiting_termination
    d = evaluate("j", long, policies=[policy], settings=ON, now=NOW)
    assert d.delay == 100 and d.awaiting_termination
    # Confirmation clears the termination hold, but the backoff still applies.
    assert d.released(NOW + timedelta(seconds=1)) == NOW + timedelta(seconds=30)


def test_grace_period_only_delays_preemption() -> None:
    failure = RunFailure(condition=Condition.EVICTED, termination_grace_period=100)
    d = evaluate("j", failure, policies=[load_policy(INFRA)], settings=ON, now=NOW)
    assert d.delay == 0 and d.retry_after == NOW


# --- anti-affinity ------------------------------------------------------------------------


def test_anti_affinity_example() -> None:
    policy = [load_policy(ANTI_AFFINITY)]
    assert evaluate("j", PREEMPTED, policies=policy, settings=ON).avoid_node == "node-a"
    assert evaluate("j", EVICTED, policies=policy, settings=ON).avoid_node == "node-b"
    assert evaluate("j", OOM, policies=policy, settings=ON).avoid_node is None


def test_only_the_most_recent_failed_node_is_avoided() -> None:
    policy = [load_policy(ANTI_AFFINITY)]
    history, avoided = RetryHistory(), []
    for node in ("n1", "n2", "n3"):
        failure = RunFailure(condition=Condition.EVICTED, node=node)
        d = evaluate("j", failure, policies=policy, settings=ON, history=history)
        avoided.append(d.avoid_node)
        history = d.history
    assert avoided == ["n1", "n2", "n3"]


def test_policy_level_anti_affinity_is_inherited_and_rule_can_override() -> None:
    policy = RetryPolicy(
        "p",
        anti_affinity=AntiAffinityMode.NODE,
        rules=(
            RetryRule(Action.RETRY, on_conditions=(Condition.EVICTED,)),
            RetryRule(
                Action.RETRY,
                on_conditions=(Condition.OOM_KILLED,),
                anti_affinity=AntiAffinityMode.NONE,
            ),
        ),
    )
    assert evaluate("j", EVICTED, policies=[policy], settings=ON).avoid_node == "node-b"
    assert evaluate("j", OOM, policies=[policy], settings=ON).avoid_node is None


def test_upstream_avoid_same_node_means_node_mode() -> None:
    policy = RetryPolicy(
        "p", rules=(RetryRule(Action.RETRY, on_failure_category=("x",), avoid_same_node=True),)
    )
    failure = RunFailure(category="x", node="bad-node")
    assert evaluate("j", failure, policies=[policy], settings=ON).avoid_node == "bad-node"


# --- mutations, naming, counters ----------------------------------------------------------


def test_memory_bump_is_carried_and_applies() -> None:
    bump = MemoryBump(factor=1.5)
    policy = RetryPolicy(
        "p", rules=(RetryRule(Action.RETRY, on_failure_category=("oom",), memory_bump=bump),)
    )
    decision = evaluate("j", RunFailure(category="oom"), policies=[policy], settings=ON)
    assert decision.memory_bump == bump
    gib = 2**30
    assert apply_memory_bump(bump, gib) == 1536 * 2**20
    assert apply_memory_bump(bump, apply_memory_bump(bump, gib)) == int(2.25 * gib)
    assert apply_memory_bump(MemoryBump(static="512Mi"), gib) == 1536 * 2**20
    default_retry = RetryPolicy("d", default_action=Action.RETRY)
    assert evaluate("j", CRASH, policies=[default_retry], settings=ON).memory_bump is None


def test_retry_pod_names_follow_run_index() -> None:
    policy = [load_policy(INFRA)]
    history, names = RetryHistory(), []
    for _ in range(3):
        d = evaluate("abc", PREEMPTED, policies=policy, settings=ON, history=history)
        names.append((d.next_run_index, d.pod_name))
        history = d.history
    assert names == [(1, "armada-abc-0-1"), (2, "armada-abc-0-2"), (3, "armada-abc-0-3")]


def test_counters_are_not_mutated_in_place() -> None:
    history = RetryHistory(rule_retries={"infra/rules[0]": 1}, total_retries=1, run_count=2)
    d = evaluate("j", PREEMPTED, policies=[load_policy(INFRA)], settings=ON, history=history)
    assert history.rule_retries == {"infra/rules[0]": 1}
    assert d.history.rule_retries == {"infra/rules[0]": 2} and d.history.run_count == 3


CONDITION_FAILURES = st.sampled_from(
    [PREEMPTED, EVICTED, OOM, CRASH, RunFailure(category="cuda_error")]
)


@settings(max_examples=100, deadline=None)
@given(failures=st.lists(CONDITION_FAILURES, max_size=40), cap=st.integers(0, 25))
def test_counters_never_exceed_limits(failures: list[RunFailure], cap: int) -> None:
    policies = [load_policy(ML_TRAINING), *WORKED]
    cfg = RetrySettings(enabled=True, global_max_retries=cap)
    history = RetryHistory()
    for failure in failures:
        d = evaluate("j", failure, policies=policies, settings=cfg, history=history)
        if d.retry:
            assert d.limit is not None
            assert d.history.rule_retries[d.rule_key or ""] <= d.limit
            history = d.history
        else:
            assert d.history == history
        assert history.total_retries <= cap
        assert history.total_retries == sum(history.rule_retries.values())


# --- legacy mode and returned leases -------------------------------------------------------

LEGACY = RetrySettings(enabled=False, max_attempted_runs=3)
RETURNED = RunFailure(returned_lease=True, node="n1")


def test_legacy_retries_only_returned_leases_up_to_max_attempted_runs() -> None:
    policies = [load_policy(ML_TRAINING)]
    assert (
        evaluate("j", OOM, policies=policies, settings=LEGACY).verdict is Verdict.FAIL_NOT_RETURNED
    )
    history, verdicts = RetryHistory(), []
    for _ in range(3):
        d = evaluate("j", RETURNED, policies=policies, settings=LEGACY, history=history)
        verdicts.append(d.verdict)
        history = d.history if d.retry else history
    assert verdicts == [
        Verdict.RETRY_RETURNED_LEASE,
        Verdict.RETRY_RETURNED_LEASE,
        Verdict.FAIL_MAX_RUNS,
    ]
    failed = evaluate("j", RETURNED, policies=policies, settings=LEGACY, history=history)
    assert failed.classification == Classification("internal", "max_runs_exceeded")


def test_legacy_keeps_legacy_pod_names() -> None:
    d = evaluate("abc", RETURNED, policies=[], settings=LEGACY, history=RetryHistory(run_count=2))
    assert d.retry and d.pod_name == "armada-abc-0" and d.next_run_index == 2


def test_returned_lease_with_feature_on_spends_no_policy_budget() -> None:
    d = evaluate("abc", RETURNED, policies=[load_policy(INFRA)], settings=ON, now=NOW)
    assert d.verdict is Verdict.RETRY_RETURNED_LEASE
    assert d.history.total_retries == 0 and d.history.rule_retries == {}
    assert d.pod_name == "armada-abc-0-1" and d.retry_after == NOW and d.avoid_node == "n1"
