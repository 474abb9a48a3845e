"""The RetryPolicy resource in YAML (``armadactl create -f policy.yaml``), both directions."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

import yaml

from .conditions import Condition, parse_condition
from .durations import format_duration, parse_duration
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
from .reading import (
    boolean,
    converted,
    integer,
    join,
    load_documents,
    mapping,
    number,
    sequence,
    string,
    strings,
)
from .validation import validate_policy

_Enum = TypeVar("_Enum", bound=StrEnum)

API_VERSION = "armadaproject.io/v1"
KIND = "RetryPolicy"

_DOCUMENT = ("apiVersion", "kind", "metadata", "spec")
_SPEC = ("retryLimit", "defaultAction", "backoff", "antiAffinity", "rules")
_RULE = (
    "action",
    "onExitCodes",
    "onConditions",
    "onTerminationMessage",
    "onFailureCategory",
    "onFailureSubcategory",
    "onCategory",
    "onSubcategory",
    "containerName",
    "includeInitContainers",
    "retryLimit",
    "backoff",
    "antiAffinity",
    "mutate",
)
_BACKOFF = ("initialDelay", "maxDelay", "multiplier")


def _enum(value: Any, path: str, kind: type[_Enum]) -> _Enum:
    text = string(value, path)
    try:
        return kind(text)
    except ValueError:
        choices = " or ".join(m.value for m in kind)
        raise RetryConfigError(path, f"must be {choices}, not {text!r}") from None


def parse_backoff(value: Any, path: str) -> Backoff:
    data = mapping(value, path, _BACKOFF)
    delays = {
        key: converted(data[key], join(path, key), parse_duration)
        for key in ("initialDelay", "maxDelay")
        if key in data
    }
    multiplier = (
        number(data["multiplier"], join(path, "multiplier")) if "multiplier" in data else None
    )
    return Backoff(delays.get("initialDelay"), delays.get("maxDelay"), multiplier)


def _anti_affinity(value: Any, path: str) -> AntiAffinityMode:
    data = mapping(value, path, ("mode",))
    if "mode" not in data:
        raise RetryConfigError(join(path, "mode"), "is required (none or node)")
    return _enum(data["mode"], join(path, "mode"), AntiAffinityMode)


def parse_exit_codes(value: Any, path: str) -> ExitCodeMatcher:
    data = mapping(value, path, ("operator", "values"))
    for key in ("operator", "values"):
        if key not in data:
            raise RetryConfigError(join(path, key), "is required")
    operator = _enum(data["operator"], join(path, "operator"), ExitCodeOperator)
    values = sequence(data["values"], join(path, "values"), integer)
    return ExitCodeMatcher(operator, values)


def parse_conditions(value: Any, path: str) -> tuple[Condition, ...]:
    return sequence(value, path, lambda v, p: converted(string(v, p), p, parse_condition))


def parse_pattern(value: Any, path: str) -> str:
    """``{pattern: ...}`` as in the seed, or the bare pattern string."""
    if isinstance(value, str):
        return value
    data = mapping(value, path, ("pattern",))
    if "pattern" not in data:
        raise RetryConfigError(join(path, "pattern"), "is required")
    return string(data["pattern"], join(path, "pattern"))


def _mutate(value: Any, path: str) -> tuple[bool, MemoryBump | None]:
    data = mapping(value, path, ("affinity", "resources"))
    avoid = False
    if "affinity" in data:
        where = join(path, "affinity")
        affinity = mapping(data["affinity"], where, ("avoidSameNode",))
        if "avoidSameNode" in affinity:
            avoid = boolean(affinity["avoidSameNode"], join(where, "avoidSameNode"))
    bump = None
    if "resources" in data:
        where = join(path, "resources")
        resources = mapping(data["resources"], where, ("memory",))
        if "memory" in resources:
            where = join(where, "memory")
            memory = mapping(resources["memory"], where, ("static", "factor"))
            static = memory.get("static")
            if static is not None and not isinstance(static, str):
                static = str(static)
            factor = number(memory["factor"], join(where, "factor")) if "factor" in memory else None
            bump = MemoryBump(static, factor)
    return avoid, bump


def _categories(data: Mapping[str, Any], path: str, ours: str, upstream: str) -> tuple[str, ...]:
    if ours in data and upstream in data:
        raise RetryConfigError(join(path, upstream), f"give either {ours} or {upstream}, not both")
    key = ours if ours in data else upstream
    return strings(data[key], join(path, key)) if key in data else ()


def parse_rule(value: Any, path: str) -> RetryRule:
    data = mapping(value, path, _RULE)
    if "action" not in data:
        raise RetryConfigError(join(path, "action"), "is required (Retry or Fail)")
    avoid, bump = (
        _mutate(data["mutate"], join(path, "mutate")) if "mutate" in data else (False, None)
    )
    return RetryRule(
        action=_enum(data["action"], join(path, "action"), Action),
        on_exit_codes=parse_exit_codes(data["onExitCodes"], join(path, "onExitCodes"))
        if "onExitCodes" in data
        else None,
        on_conditions=parse_conditions(data["onConditions"], join(path, "onConditions"))
        if "onConditions" in data
        else (),
        on_termination_message=parse_pattern(
            data["onTerminationMessage"], join(path, "onTerminationMessage")
        )
        if "onTerminationMessage" in data
        else None,
        on_failure_category=_categories(data, path, "onFailureCategory", "onCategory"),
        on_failure_subcategory=_categories(data, path, "onFailureSubcategory", "onSubcategory"),
        container_name=string(data["containerName"], join(path, "containerName"))
        if "containerName" in data
        else None,
        include_init_containers=boolean(
            data["includeInitContainers"], join(path, "includeInitContainers")
        )
        if "includeInitContainers" in data
        else False,
        retry_limit=integer(data["retryLimit"], join(path, "retryLimit"), minimum=0)
        if "retryLimit" in data
        else None,
        backoff=parse_backoff(data["backoff"], join(path, "backoff"))
        if "backoff" in data
        else Backoff(),
        anti_affinity=_anti_affinity(data["antiAffinity"], join(path, "antiAffinity"))
        if "antiAffinity" in data
        else None,
        avoid_same_node=avoid,
        memory_bump=bump,
    )


def policy_from_document(document: Any) -> RetryPolicy:
    """A validated policy from one parsed YAML document."""
    doc = mapping(document, "", _DOCUMENT)
    if "apiVersion" in doc and doc["apiVersion"] != API_VERSION:
        raise RetryConfigError("apiVersion", f"must be {API_VERSION}, not {doc['apiVersion']!r}")
    if doc.get("kind") != KIND:
        raise RetryConfigError("kind", f"must be {KIND}, not {doc.get('kind')!r}")
    if "metadata" not in doc:
        raise RetryConfigError("metadata.name", "is required")
    metadata = mapping(doc["metadata"], "metadata", ("name",))
    if "name" not in metadata:
        raise RetryConfigError("metadata.name", "is required")
    name = string(metadata["name"], "metadata.name")
    spec = mapping(doc.get("spec") or {}, "spec", _SPEC)
    policy = RetryPolicy(
        name=name,
        retry_limit=integer(spec["retryLimit"], "spec.retryLimit", minimum=0)
        if "retryLimit" in spec
        else None,
        default_action=_enum(spec["defaultAction"], "spec.defaultAction", Action)
        if "defaultAction" in spec
        else Action.FAIL,
        backoff=parse_backoff(spec["backoff"], "spec.backoff") if "backoff" in spec else Backoff(),
        anti_affinity=_anti_affinity(spec["antiAffinity"], "spec.antiAffinity")
        if "antiAffinity" in spec
        else None,
        rules=sequence(spec["rules"], "spec.rules", parse_rule) if "rules" in spec else (),
    )
    validate_policy(policy)
    return policy


def load_policies(text: str) -> list[RetryPolicy]:
    """Every policy in a (possibly multi-document) YAML text; names must be unique."""
    policies: list[RetryPolicy] = []
    for i, document in enumerate(load_documents(text)):
        try:
            policy = policy_from_document(document)
        except RetryConfigError as exc:
            if i == 0:
                raise
            raise RetryConfigError(f"document {i + 1}: {exc.path}", exc.problem) from None
        if any(p.name == policy.name for p in policies):
            raise RetryConfigError(
                f"document {i + 1}: metadata.name", f"policy {policy.name!r} is defined twice"
            )
        policies.append(policy)
    return policies


def load_policy(text: str) -> RetryPolicy:
    """Exactly one policy from YAML text."""
    policies = load_policies(text)
    if len(policies) != 1:
        raise RetryConfigError("", f"expected one RetryPolicy document, found {len(policies)}")
    return policies[0]


def backoff_to_mapping(backoff: Backoff) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if backoff.initial_delay is not None:
        out["initialDelay"] = format_duration(backoff.initial_delay)
    if backoff.max_delay is not None:
        out["maxDelay"] = format_duration(backoff.max_delay)
    if backoff.multiplier is not None:
        out["multiplier"] = backoff.multiplier
    return out


def rule_to_mapping(rule: RetryRule) -> dict[str, Any]:
    out: dict[str, Any] = {"action": rule.action.value}
    if rule.container_name is not None:
        out["containerName"] = rule.container_name
    if rule.include_init_containers:
        out["includeInitContainers"] = True
    if rule.on_exit_codes is not None:
        out["onExitCodes"] = {
            "operator": rule.on_exit_codes.operator.value,
            "values": list(rule.on_exit_codes.values),
        }
    if rule.on_conditions:
        out["onConditions"] = [c.value for c in rule.on_conditions]
    if rule.on_termination_message is not None:
        out["onTerminationMessage"] = {"pattern": rule.on_termination_message}
    if rule.on_failure_category:
        out["onFailureCategory"] = list(rule.on_failure_category)
    if rule.on_failure_subcategory:
        out["onFailureSubcategory"] = list(rule.on_failure_subcategory)
    if rule.retry_limit is not None:
        out["retryLimit"] = rule.retry_limit
    if not rule.backoff.empty:
        out["backoff"] = backoff_to_mapping(rule.backoff)
    if rule.anti_affinity is not None:
        out["antiAffinity"] = {"mode": rule.anti_affinity.value}
    mutate: dict[str, Any] = {}
    if rule.avoid_same_node:
        mutate["affinity"] = {"avoidSameNode": True}
    if rule.memory_bump is not None:
        bump = rule.memory_bump
        memory = {"static": bump.static} if bump.static is not None else {"factor": bump.factor}
        mutate["resources"] = {"memory": memory}
    if mutate:
        out["mutate"] = mutate
    return out


def policy_to_document(policy: RetryPolicy) -> dict[str, Any]:
    """The resource as plain data; ``policy_from_document`` reads it back unchanged."""
    spec: dict[str, Any] = {}
    if policy.retry_limit is not None:
        spec["retryLimit"] = policy.retry_limit
    spec["defaultAction"] = policy.default_action.value
    if not policy.backoff.empty:
        spec["backoff"] = backoff_to_mapping(policy.backoff)
    if policy.anti_affinity is not None:
        spec["antiAffinity"] = {"mode": policy.anti_affinity.value}
    if policy.rules:
        spec["rules"] = [rule_to_mapping(r) for r in policy.rules]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": policy.name},
        "spec": spec,
    }


def dump_policies(policies: list[RetryPolicy]) -> str:
    """YAML text for ``armadactl get retrypolicy``; ``load_policies`` reads it back."""
    return yaml.safe_dump_all([policy_to_document(p) for p in policies], sort_keys=False)
