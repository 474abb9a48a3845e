"""The retry engine: one pure function from a failed run to a retry-or-fail decision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from armada_core.jobs.model import pod_name

from .backoff import backoff_delay, effective_backoff
from .classification import Classification, InternalFailure, internal
from .conditions import Condition
from .failure import RunFailure
from .matching import rule_matches
from .policy import Action, AntiAffinityMode, MemoryBump, RetryPolicy, RetryRule, rule_key
from .settings import RetrySettings


class Verdict(StrEnum):
    """Which gate decided; low-cardinality, fit for a metrics label."""

    RETRY = "retry"
    RETRY_RETURNED_LEASE = "retry_returned_lease"
    FAIL_RULE = "fail_rule"
    FAIL_DEFAULT = "fail_default"
    FAIL_NO_POLICY = "fail_no_policy"
    FAIL_RULE_LIMIT = "fail_rule_limit"
    FAIL_GLOBAL_LIMIT = "fail_global_limit"
    FAIL_MAX_RUNS = "fail_max_runs"
    FAIL_NOT_RETURNED = "fail_not_returned"


@dataclass(frozen=True)
class RetryHistory:
    """What a job has used so far; the engine returns the updated copy.

    ``rule_retries`` is keyed by ``rule_key`` (``<policy>/rules[<i>]`` or ``<policy>/default``).
    ``run_count`` counts runs created so far, so it is also the next run's index.
    """

    rule_retries: Mapping[str, int] = field(default_factory=dict)
    total_retries: int = 0
    run_count: int = 1
    gang_generation: int = 0


@dataclass(frozen=True)
class RetryDecision:
    """The verdict and everything the scheduler must record to carry it out.

    For a retry, ``retry_after`` (set when ``now`` was given) is the latest time the job
    becomes schedulable: ``now + delay`` where ``delay`` is the backoff or, for preemption,
    ``max(backoff, terminationGracePeriod)``. Once the executor confirms the old run has
    terminated, ``released(terminated_at)`` gives the earlier time the hold ends.
    ``avoid_node`` replaces any node avoided on an earlier retry (None: avoid nothing).
    """

    retry: bool
    verdict: Verdict
    reason: str
    history: RetryHistory
    policy_name: str | None = None
    rule_key: str | None = None
    limit: int | None = None
    delay: float = 0.0
    backoff_delay: float = 0.0
    awaiting_termination: bool = False
    retry_after: datetime | None = None
    backoff_until: datetime | None = None
    avoid_node: str | None = None
    next_run_index: int | None = None
    pod_name: str | None = None
    memory_bump: MemoryBump | None = None
    classification: Classification | None = None

    def released(self, terminated_at: datetime) -> datetime | None:
        """When the retry becomes eligible given the old run ended at ``terminated_at``:
        the termination hold is cleared, the backoff still applies."""
        if self.retry_after is None or self.backoff_until is None:
            return self.retry_after
        return min(self.retry_after, max(self.backoff_until, terminated_at))


def _times(
    now: datetime | None, delay: float, backoff: float
) -> tuple[datetime | None, datetime | None]:
    if now is None:
        return None, None
    return now + timedelta(seconds=delay), now + timedelta(seconds=backoff)


def _find_rule(
    policies: Sequence[RetryPolicy], failure: RunFailure
) -> tuple[RetryPolicy, RetryRule | None, int | None]:
    """First match wins across the concatenated rules; no match falls back to the first
    policy's defaultAction, so queue-level policies keep control of unknown failures."""
    for policy in policies:
        for index, rule in enumerate(policy.rules):
            if rule_matches(rule, failure):
                return policy, rule, index
    return policies[0], None, None


def _returned_lease(
    job_id: str,
    failure: RunFailure,
    settings: RetrySettings,
    history: RetryHistory,
    now: datetime | None,
) -> RetryDecision:
    """Legacy behaviour, kept in both modes: Armada handed the run back, so the job is not
    at fault; retry up to maxAttemptedRuns without touching policy counters."""
    runs, most = history.run_count, settings.max_attempted_runs
    if runs >= most:
        return RetryDecision(
            False,
            Verdict.FAIL_MAX_RUNS,
            f"maximum runs exceeded ({runs}/{most})",
            history,
            limit=most,
            classification=internal(InternalFailure.MAX_RUNS_EXCEEDED),
        )
    retry_after, _ = _times(now, 0.0, 0.0)
    return RetryDecision(
        True,
        Verdict.RETRY_RETURNED_LEASE,
        f"lease returned: retrying (run {runs + 1}/{most})",
        replace(history, run_count=runs + 1),
        limit=most,
        retry_after=retry_after,
        avoid_node=failure.node or None,
        next_run_index=runs,
        pod_name=pod_name(job_id, runs, unique_per_run=settings.enabled),
    )


@dataclass(frozen=True)
class _Match:
    """What decides a failure: the first matching rule, or the policy's default action."""

    policy: RetryPolicy
    rule: RetryRule | None
    key: str

    @property
    def what(self) -> str:
        if self.rule is not None:
            return f"rule {self.key}"
        return f"default action of policy {self.policy.name}"

    @property
    def action(self) -> Action:
        return self.rule.action if self.rule is not None else self.policy.default_action

    def limit(self, cap: int) -> int:
        """The effective retry limit: rule ?? policy ?? globalMaxRetries."""
        rule_limit = self.rule.retry_limit if self.rule else None
        return next(v for v in (rule_limit, self.policy.retry_limit, cap) if v is not None)

    def anti_affinity(self) -> AntiAffinityMode:
        rule_mode = self.rule.node_anti_affinity if self.rule else None
        return next(
            (m for m in (rule_mode, self.policy.anti_affinity) if m is not None),
            AntiAffinityMode.NONE,
        )

    def fail(
        self, verdict: Verdict, reason: str, history: RetryHistory, limit: int | None = None
    ) -> RetryDecision:
        return RetryDecision(
            False,
            verdict,
            reason,
            history,
            limit=limit,
            policy_name=self.policy.name,
            rule_key=self.key,
        )


def evaluate(
    job_id: str,
    failure: RunFailure,
    *,
    policies: Sequence[RetryPolicy],
    settings: RetrySettings,
    history: RetryHistory | None = None,
    now: datetime | None = None,
) -> RetryDecision:
    """Decide whether the failed run is retried.

    ``policies`` are the policies in force, in order (see ``resolve_policies``). With the
    feature disabled only returned leases are retried. A retry needs the matched rule's count
    under its effective limit (rule ?? policy ?? globalMaxRetries) and the job's total under
    globalMaxRetries, read at evaluation time so that lowering it takes effect at once.
    """
    history = history or RetryHistory()
    if failure.returned_lease:
        return _returned_lease(job_id, failure, settings, history, now)
    if not settings.enabled:
        return RetryDecision(
            False,
            Verdict.FAIL_NOT_RETURNED,
            "retry policies are disabled: only returned leases are retried",
            history,
        )
    if not policies:
        return RetryDecision(False, Verdict.FAIL_NO_POLICY, "no retry policy applies", history)
    policy, rule, index = _find_rule(policies, failure)
    match = _Match(policy, rule, rule_key(policy, index))
    if match.action is Action.FAIL:
        verdict = Verdict.FAIL_RULE if rule is not None else Verdict.FAIL_DEFAULT
        return match.fail(verdict, f"{match.what}: Fail", history)
    cap = settings.global_max_retries
    if history.total_retries >= cap:
        return match.fail(
            Verdict.FAIL_GLOBAL_LIMIT,
            f"{match.what} matched, but global max retries reached ({history.total_retries}/{cap})",
            history,
            limit=cap,
        )
    limit = match.limit(cap)
    used = history.rule_retries.get(match.key, 0)
    if used >= limit:
        return match.fail(
            Verdict.FAIL_RULE_LIMIT,
            f"{match.what} matched, but its retry limit is reached ({used}/{limit})",
            history,
            limit=limit,
        )
    return _retry(job_id, failure, match, settings, history, now, count=used + 1, limit=limit)


def _retry(
    job_id: str,
    failure: RunFailure,
    match: _Match,
    settings: RetrySettings,
    history: RetryHistory,
    now: datetime | None,
    *,
    count: int,
    limit: int,
) -> RetryDecision:
    """The retry a matched rule grants: its backoff (for a preemption, at least the grace
    period the old run has to stop), the node to avoid, the updated counters."""
    backoff = backoff_delay(
        effective_backoff(match.rule, match.policy, settings.default_backoff), count
    )
    preempted = failure.condition is Condition.PREEMPTED
    grace = failure.termination_grace_period if preempted else 0.0
    delay = max(backoff, grace)
    retry_after, backoff_until = _times(now, delay, backoff)
    new_history = replace(
        history,
        rule_retries={**history.rule_retries, match.key: count},
        total_retries=history.total_retries + 1,
        run_count=history.run_count + 1,
    )
    cap = settings.global_max_retries
    return RetryDecision(
        True,
        Verdict.RETRY,
        f"{match.what}: Retry ({count}/{limit}, total {history.total_retries + 1}/{cap})",
        new_history,
        policy_name=match.policy.name,
        rule_key=match.key,
        limit=limit,
        delay=delay,
        backoff_delay=backoff,
        awaiting_termination=grace > backoff,
        retry_after=retry_after,
        backoff_until=backoff_until if grace > backoff else None,
        avoid_node=(failure.node or None)
        if match.anti_affinity() is AntiAffinityMode.NODE
        else None,
        next_run_index=history.run_count,
        pod_name=pod_name(job_id, history.run_count, unique_per_run=True),
        memory_bump=match.rule.memory_bump if match.rule is not None else None,
    )
