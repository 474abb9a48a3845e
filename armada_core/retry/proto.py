"""Conversion between policies and ``api.RetryPolicy``, including our extension fields.

Upstream fields carry what upstream understands (action, one category and subcategory,
mutations, the policy retry limit); the seed-001 fields travel in numbers >= 100.
"""

from __future__ import annotations

from armada_core.api import submit_pb2

from .conditions import parse_condition
from .errors import RetryConfigError
from .policy import (
    Action,
    AntiAffinityMode,
    Backoff,
    ExitCodeMatcher,
    ExitCodeOperator,
    MemoryBump,
    RetryPolicy,
    RetryRule,
)
from .validation import validate_policy

_TO_PROTO_ACTION = {
    Action.RETRY: submit_pb2.RETRY_ACTION_RETRY,
    Action.FAIL: submit_pb2.RETRY_ACTION_FAIL,
}
_FROM_PROTO_ACTION: dict[int, Action] = {v: k for k, v in _TO_PROTO_ACTION.items()}


def _action(value: int, path: str) -> Action:
    try:
        return _FROM_PROTO_ACTION[value]
    except KeyError:
        raise RetryConfigError(path, "must be Fail or Retry (the action is unspecified)") from None


def _mode(value: str, path: str) -> AntiAffinityMode | None:
    if not value:
        return None
    try:
        return AntiAffinityMode(value)
    except ValueError:
        raise RetryConfigError(path, f"must be none or node, not {value!r}") from None


def _set_backoff(msg: submit_pb2.RetryPolicy | submit_pb2.RetryRule, backoff: Backoff) -> None:
    if backoff.initial_delay is not None:
        msg.backoff_initial_delay_seconds = backoff.initial_delay
    if backoff.max_delay is not None:
        msg.backoff_max_delay_seconds = backoff.max_delay
    if backoff.multiplier is not None:
        msg.backoff_multiplier = backoff.multiplier


def _get_backoff(msg: submit_pb2.RetryPolicy | submit_pb2.RetryRule) -> Backoff:
    return Backoff(
        msg.backoff_initial_delay_seconds
        if msg.HasField("backoff_initial_delay_seconds")
        else None,
        msg.backoff_max_delay_seconds if msg.HasField("backoff_max_delay_seconds") else None,
        msg.backoff_multiplier if msg.HasField("backoff_multiplier") else None,
    )


def _split(names: tuple[str, ...]) -> tuple[str, list[str]]:
    """One name goes where upstream reads it; several go to the extension list."""
    return (names[0], []) if len(names) == 1 else ("", list(names))


def rule_to_proto(rule: RetryRule) -> submit_pb2.RetryRule:
    msg = submit_pb2.RetryRule(action=_TO_PROTO_ACTION[rule.action])
    msg.on_category, categories = _split(rule.on_failure_category)
    msg.match_categories.extend(categories)
    msg.on_subcategory, subcategories = _split(rule.on_failure_subcategory)
    msg.match_subcategories.extend(subcategories)
    msg.match_conditions.extend(c.value for c in rule.on_conditions)
    if rule.on_exit_codes is not None:
        msg.exit_code_operator = rule.on_exit_codes.operator.value
        msg.exit_code_values.extend(rule.on_exit_codes.values)
    if rule.on_termination_message is not None:
        msg.termination_message_pattern = rule.on_termination_message
    if rule.container_name is not None:
        msg.container_name = rule.container_name
    msg.include_init_containers = rule.include_init_containers
    if rule.retry_limit is not None:
        msg.retry_limit = rule.retry_limit
    if rule.anti_affinity is not None:
        msg.anti_affinity_mode = rule.anti_affinity.value
    _set_backoff(msg, rule.backoff)
    if rule.avoid_same_node:
        msg.mutate.affinity.avoid_same_node = True
    if rule.memory_bump is not None:
        memory = msg.mutate.resources.memory
        if rule.memory_bump.static is not None:
            memory.static = rule.memory_bump.static
        if rule.memory_bump.factor is not None:
            memory.factor = rule.memory_bump.factor
    return msg


def rule_from_proto(msg: submit_pb2.RetryRule, path: str) -> RetryRule:
    exit_codes = None
    if msg.exit_code_operator or msg.exit_code_values:
        try:
            operator = ExitCodeOperator(msg.exit_code_operator)
        except ValueError:
            raise RetryConfigError(f"{path}.onExitCodes.operator", "must be In or NotIn") from None
        exit_codes = ExitCodeMatcher(operator, tuple(msg.exit_code_values))
    conditions = []
    for i, text in enumerate(msg.match_conditions):
        try:
            conditions.append(parse_condition(text))
        except ValueError as exc:
            raise RetryConfigError(f"{path}.onConditions[{i}]", str(exc)) from None
    bump = None
    if (
        msg.HasField("mutate")
        and msg.mutate.HasField("resources")
        and msg.mutate.resources.HasField("memory")
    ):
        memory = msg.mutate.resources.memory
        bump = MemoryBump(memory.static or None, memory.factor or None)
    return RetryRule(
        action=_action(msg.action, f"{path}.action"),
        on_exit_codes=exit_codes,
        on_conditions=tuple(conditions),
        on_termination_message=msg.termination_message_pattern or None,
        on_failure_category=(msg.on_category,) if msg.on_category else tuple(msg.match_categories),
        on_failure_subcategory=(msg.on_subcategory,)
        if msg.on_subcategory
        else tuple(msg.match_subcategories),
        container_name=msg.container_name or None,
        include_init_containers=msg.include_init_containers,
        retry_limit=msg.retry_limit if msg.HasField("retry_limit") else None,
        backoff=_get_backoff(msg),
        anti_affinity=_mode(msg.anti_affinity_mode, f"{path}.antiAffinity.mode"),
        avoid_same_node=msg.mutate.affinity.avoid_same_node,
        memory_bump=bump,
    )


def policy_to_proto(policy: RetryPolicy) -> submit_pb2.RetryPolicy:
    """The message the server stores and RetryPolicyService returns."""
    msg = submit_pb2.RetryPolicy(
        name=policy.name,
        retry_limit=policy.retry_limit or 0,
        retry_limit_unset=policy.retry_limit is None,
        default_action=_TO_PROTO_ACTION[policy.default_action],
        rules=[rule_to_proto(r) for r in policy.rules],
    )
    if policy.anti_affinity is not None:
        msg.anti_affinity_mode = policy.anti_affinity.value
    _set_backoff(msg, policy.backoff)
    return msg


def policy_from_proto(msg: submit_pb2.RetryPolicy) -> RetryPolicy:
    """A validated policy; a message from an upstream client (no extensions) reads with
    upstream's meaning, so its retry_limit 0 means "never retry"."""
    policy = RetryPolicy(
        name=msg.name,
        retry_limit=None if msg.retry_limit_unset else msg.retry_limit,
        default_action=_action(msg.default_action, "spec.defaultAction"),
        backoff=_get_backoff(msg),
        anti_affinity=_mode(msg.anti_affinity_mode, "spec.antiAffinity.mode"),
        rules=tuple(rule_from_proto(r, f"spec.rules[{i}]") for i, r in enumerate(msg.rules)),
    )
    validate_policy(policy)
    return policy
