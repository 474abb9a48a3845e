"""Retry policies (seed 001), failure classification and the outcome mapping integrations use.

Everything here is pure: policies and settings come in as values (or YAML text / protobuf),
decisions go out as values, and the caller stores and acts on them.
"""

from armada_core.jobs.model import pod_name

from .backoff import backoff_delay, effective_backoff
from .classification import (
    INTERNAL,
    Category,
    CategoryRule,
    Classification,
    ClassificationConfig,
    InternalFailure,
    classification_from_mapping,
    classify,
    internal,
    load_classification,
)
from .conditions import Condition
from .durations import format_duration, parse_duration
from .engine import RetryDecision, RetryHistory, Verdict, evaluate
from .errors import RetryConfigError
from .failure import ContainerFailure, RunFailure
from .gang import GangDecision, GangGenerationKey, evaluate_gang
from .matching import rule_matches
from .mutation import apply_memory_bump
from .outcome import (
    DEFAULT_INFRASTRUCTURE_CATEGORIES,
    ContainerEnd,
    FailureInfo,
    JobEnd,
    Outcome,
    OutcomeReport,
    map_outcome,
)
from .policy import (
    Action,
    AntiAffinityMode,
    Backoff,
    ExitCodeMatcher,
    ExitCodeOperator,
    MemoryBump,
    RetryPolicy,
    RetryRule,
    rule_key,
)
from .proto import policy_from_proto, policy_to_proto
from .resolution import (
    RETRY_POLICY_ANNOTATION,
    ResolvedPolicies,
    effective_policy_names,
    parse_policy_annotation,
    resolve_policies,
)
from .settings import BUILTIN_BACKOFF, RetrySettings, settings_from_mapping, settings_from_yaml
from .validation import validate_policy
from .yaml_format import (
    dump_policies,
    load_policies,
    load_policy,
    policy_from_document,
    policy_to_document,
)

__all__ = [
    "BUILTIN_BACKOFF",
    "DEFAULT_INFRASTRUCTURE_CATEGORIES",
    "INTERNAL",
    "RETRY_POLICY_ANNOTATION",
    "Action",
    "AntiAffinityMode",
    "Backoff",
    "Category",
    "CategoryRule",
    "Classification",
    "ClassificationConfig",
    "Condition",
    "ContainerEnd",
    "ContainerFailure",
    "ExitCodeMatcher",
    "ExitCodeOperator",
    "FailureInfo",
    "GangDecision",
    "GangGenerationKey",
    "InternalFailure",
    "JobEnd",
    "MemoryBump",
    "Outcome",
    "OutcomeReport",
    "ResolvedPolicies",
    "RetryConfigError",
    "RetryDecision",
    "RetryHistory",
    "RetryPolicy",
    "RetryRule",
    "RetrySettings",
    "RunFailure",
    "Verdict",
    "apply_memory_bump",
    "backoff_delay",
    "classification_from_mapping",
    "classify",
    "dump_policies",
    "effective_backoff",
    "effective_policy_names",
    "evaluate",
    "evaluate_gang",
    "format_duration",
    "internal",
    "load_classification",
    "load_policies",
    "load_policy",
    "map_outcome",
    "parse_duration",
    "parse_policy_annotation",
    "pod_name",
    "policy_from_document",
    "policy_from_proto",
    "policy_to_document",
    "policy_to_proto",
    "resolve_policies",
    "rule_key",
    "rule_matches",
    "settings_from_mapping",
    "settings_from_yaml",
    "validate_policy",
]
