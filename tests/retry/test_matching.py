"""Rule matching: exit codes, conditions, messages, categories and container targeting."""

from __future__ import annotations

import pytest

from armada_core.retry import (
    Action,
    Condition,
    ContainerFailure,
    ExitCodeMatcher,
    ExitCodeOperator,
    RetryRule,
    RunFailure,
    rule_matches,
)

IN_137 = ExitCodeMatcher(ExitCodeOperator.IN, (137, 143))
NOT_IN_1 = ExitCodeMatcher(ExitCodeOperator.NOT_IN, (1,))


def run(*containers: ContainerFailure, **kw: object) -> RunFailure:
    return RunFailure(containers=containers, **kw)  # type: ignore[arg-type]


MAIN_137 = ContainerFailure("main", 137)
SIDECAR_OOM = ContainerFailure("log-shipper", 137, reason="OOMKilled")
INIT_FAIL = ContainerFailure("setup", 42, message="TRANSIENT network", init=True)

CASES = [
    # (name, rule, run, matches)
    ("In matches", RetryRule(Action.RETRY, on_exit_codes=IN_137), run(MAIN_137), True),
    (
        "In misses",
        RetryRule(Action.RETRY, on_exit_codes=IN_137),
        run(ContainerFailure("main", 1)),
        False,
    ),
    ("NotIn matches", RetryRule(Action.RETRY, on_exit_codes=NOT_IN_1), run(MAIN_137), True),
    (
        "NotIn misses",
        RetryRule(Action.RETRY, on_exit_codes=NOT_IN_1),
        run(ContainerFailure("main", 1)),
        False,
    ),
    (
        "exit 0 never matches NotIn",
        RetryRule(Action.RETRY, on_exit_codes=NOT_IN_1),
        run(ContainerFailure("main", 0, reason="Error")),
        False,
    ),
    (
        "exit 0 never matches In even if listed",
        RetryRule(Action.RETRY, on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (0,))),
        run(ContainerFailure("main", 0, reason="Error")),
        False,
    ),
    ("no containers, no exit code", RetryRule(Action.RETRY, on_exit_codes=NOT_IN_1), run(), False),
    (
        "first failed container decides",
        RetryRule(Action.RETRY, on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (1,))),
        run(ContainerFailure("ok", 0), ContainerFailure("a", 1), ContainerFailure("b", 137)),
        True,
    ),
    (
        "later failed container is not looked at",
        RetryRule(Action.RETRY, on_exit_codes=IN_137),
        run(ContainerFailure("a", 1), ContainerFailure("b", 137)),
        False,
    ),
    (
        "containerName targets that container",
        RetryRule(Action.RETRY, on_exit_codes=IN_137, container_name="b"),
        run(ContainerFailure("a", 1), ContainerFailure("b", 137)),
        True,
    ),
    (
        "containerName for a container that did not report",
        RetryRule(Action.RETRY, on_exit_codes=IN_137, container_name="zzz"),
        run(MAIN_137),
        False,
    ),
    (
        "sidecar OOM rule ignores main's exit",
        RetryRule(Action.FAIL, on_conditions=(Condition.OOM_KILLED,), container_name="log-shipper"),
        run(MAIN_137),
        False,
    ),
    (
        "sidecar OOM rule sees sidecar OOM",
        RetryRule(Action.FAIL, on_conditions=(Condition.OOM_KILLED,), container_name="log-shipper"),
        run(ContainerFailure("main", 143), SIDECAR_OOM),
        True,
    ),
    (
        "pod-level OOM does not count for a targeted rule",
        RetryRule(Action.FAIL, on_conditions=(Condition.OOM_KILLED,), container_name="log-shipper"),
        run(
            ContainerFailure("main", 137),
            ContainerFailure("log-shipper", 1),
            condition=Condition.OOM_KILLED,
        ),
        False,
    ),
    (
        "pod-level OOM counts for an untargeted rule",
        RetryRule(Action.RETRY, on_conditions=(Condition.OOM_KILLED,)),
        run(condition=Condition.OOM_KILLED),
        True,
    ),
    (
        "pod-level eviction counts for a targeted rule",
        RetryRule(Action.RETRY, on_conditions=(Condition.EVICTED,), container_name="main"),
        run(MAIN_137, condition=Condition.EVICTED),
        True,
    ),
    (
        "container OOM reason is a condition",
        RetryRule(Action.RETRY, on_conditions=(Condition.OOM_KILLED,)),
        run(ContainerFailure("main", 137, reason="OOMKilled")),
        True,
    ),
    (
        "wrong condition",
        RetryRule(Action.RETRY, on_conditions=(Condition.PREEMPTED,)),
        run(MAIN_137, condition=Condition.EVICTED),
        False,
    ),
    (
        "each seed condition",
        RetryRule(Action.RETRY, on_conditions=tuple(Condition)),
        run(condition=Condition.UNSCHEDULABLE),
        True,
    ),
    (
        "init containers skipped by default",
        RetryRule(Action.RETRY, on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (42,))),
        run(INIT_FAIL),
        False,
    ),
    (
        "init containers included on request",
        RetryRule(
            Action.RETRY,
            on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (42,)),
            include_init_containers=True,
        ),
        run(INIT_FAIL, MAIN_137),
        True,
    ),
    (
        "targeted init container needs includeInitContainers",
        RetryRule(
            Action.RETRY,
            on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (42,)),
            container_name="setup",
        ),
        run(INIT_FAIL),
        False,
    ),
    (
        "targeted init container with includeInitContainers",
        RetryRule(
            Action.RETRY,
            on_exit_codes=ExitCodeMatcher(ExitCodeOperator.IN, (42,)),
            container_name="setup",
            include_init_containers=True,
        ),
        run(INIT_FAIL),
        True,
    ),
    (
        "message of any non-init container",
        RetryRule(Action.RETRY, on_termination_message=".*TRANSIENT.*"),
        run(
            ContainerFailure("a", 1, message="boom"), ContainerFailure("b", 0, message="TRANSIENT")
        ),
        True,
    ),
    (
        "message search semantics",
        RetryRule(Action.RETRY, on_termination_message="TRANSIENT"),
        run(ContainerFailure("a", 1, message="error: TRANSIENT glitch")),
        True,
    ),
    (
        "init container message skipped",
        RetryRule(Action.RETRY, on_termination_message="TRANSIENT"),
        run(INIT_FAIL),
        False,
    ),
    (
        "init container message included",
        RetryRule(Action.RETRY, on_termination_message="TRANSIENT", include_init_containers=True),
        run(INIT_FAIL),
        True,
    ),
    (
        "targeted message only reads that container",
        RetryRule(Action.RETRY, on_termination_message="TRANSIENT", container_name="main"),
        run(
            ContainerFailure("main", 1, message="fatal"),
            ContainerFailure("side", 1, message="TRANSIENT"),
        ),
        False,
    ),
    (
        "category list",
        RetryRule(Action.RETRY, on_failure_category=("cuda_error", "ib")),
        run(category="ib"),
        True,
    ),
    (
        "category miss",
        RetryRule(Action.RETRY, on_failure_category=("cuda_error",)),
        run(category="oom"),
        False,
    ),
    (
        "subcategory narrows",
        RetryRule(Action.RETRY, on_failure_category=("oom",), on_failure_subcategory=("small",)),
        run(category="oom", subcategory="large"),
        False,
    ),
    (
        "subcategory matches",
        RetryRule(Action.RETRY, on_failure_category=("oom",), on_failure_subcategory=("small",)),
        run(category="oom", subcategory="small"),
        True,
    ),
    (
        "matchers are ANDed",
        RetryRule(Action.RETRY, on_exit_codes=IN_137, on_failure_category=("gpu",)),
        run(MAIN_137, category="cpu"),
        False,
    ),
    (
        "matchers are ANDed (all hold)",
        RetryRule(Action.RETRY, on_exit_codes=IN_137, on_failure_category=("gpu",)),
        run(MAIN_137, category="gpu"),
        True,
    ),
    ("a rule without matchers never matches", RetryRule(Action.RETRY), run(MAIN_137), False),
]


@pytest.mark.parametrize(
    ("rule", "failure", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule_matching(rule: RetryRule, failure: RunFailure, expected: bool) -> None:
    assert rule_matches(rule, failure) is expected
