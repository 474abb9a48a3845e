"""Gangs are retried as a whole: every member starts again in a new generation.

Stale members of an earlier generation may still be terminating; the scheduler counts a gang's
active members per generation (``GangGenerationKey``) so they are never double-counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from armada_core.jobs.model import pod_name

from .engine import RetryDecision, RetryHistory, evaluate
from .failure import RunFailure
from .policy import MemoryBump, RetryPolicy
from .settings import RetrySettings


@dataclass(frozen=True, order=True)
class GangGenerationKey:
    gang_id: str
    generation: int


@dataclass(frozen=True)
class GangDecision:
    """One decision for the whole gang, plus each failed member's own evaluation."""

    retry: bool
    reason: str
    members: Mapping[str, RetryDecision]
    history: RetryHistory
    generation: GangGenerationKey
    delay: float = 0.0
    retry_after: datetime | None = None
    avoid_nodes: tuple[str, ...] = ()
    pod_names: Mapping[str, str] | None = None
    memory_bumps: Mapping[str, MemoryBump] | None = None

    def released(self, terminated_at: datetime) -> datetime | None:
        """Eligibility once every old member is confirmed terminated."""
        times = [d.released(terminated_at) for d in self.members.values()]
        known = [t for t in times if t is not None]
        return max(known) if known else None


def _merged(base: RetryHistory, decisions: Sequence[RetryDecision]) -> RetryHistory:
    """A gang retry is one retry: each matched rule and the total count once, however many
    members failed for that reason."""
    rules = dict(base.rule_retries)
    for decision in decisions:
        for key, count in decision.history.rule_retries.items():
            if count > base.rule_retries.get(key, 0):
                rules[key] = base.rule_retries.get(key, 0) + 1
    counted = any(d.history.total_retries > base.total_retries for d in decisions)
    return replace(
        base,
        rule_retries=rules,
        total_retries=base.total_retries + (1 if counted else 0),
        run_count=base.run_count + 1,
        gang_generation=base.gang_generation + 1,
    )


def evaluate_gang(
    gang_id: str,
    failures: Mapping[str, RunFailure],
    *,
    policies: Sequence[RetryPolicy],
    settings: RetrySettings,
    history: RetryHistory | None = None,
    member_ids: Sequence[str] = (),
    now: datetime | None = None,
) -> GangDecision:
    """Retry the gang only if every failed member's failure allows a retry.

    ``failures`` maps failed members' job ids to their runs; ``member_ids`` lists every member
    (defaults to the failed ones) so that each gets its next pod name. ``history`` is the
    gang's shared history.
    """
    history = history or RetryHistory()
    if not failures:
        raise ValueError("a gang decision needs at least one failed member")
    decisions = {
        job_id: evaluate(
            job_id, failure, policies=policies, settings=settings, history=history, now=now
        )
        for job_id, failure in failures.items()
    }
    current = GangGenerationKey(gang_id, history.gang_generation)
    refused = [(job_id, d) for job_id, d in decisions.items() if not d.retry]
    if refused:
        job_id, first = refused[0]
        return GangDecision(
            False,
            f"gang {gang_id} fails: member {job_id}: {first.reason}",
            decisions,
            history,
            current,
        )
    merged = _merged(history, list(decisions.values()))
    members = list(dict.fromkeys([*member_ids, *failures]))
    times = [d.retry_after for d in decisions.values() if d.retry_after is not None]
    return GangDecision(
        True,
        f"gang {gang_id} retried as generation {merged.gang_generation}: "
        + "; ".join(f"{job_id}: {d.reason}" for job_id, d in decisions.items()),
        decisions,
        merged,
        GangGenerationKey(gang_id, merged.gang_generation),
        delay=max(d.delay for d in decisions.values()),
        retry_after=max(times) if times else None,
        avoid_nodes=tuple(sorted({d.avoid_node for d in decisions.values() if d.avoid_node})),
        pod_names={
            m: pod_name(m, history.run_count, unique_per_run=settings.enabled) for m in members
        },
        memory_bumps={
            job_id: d.memory_bump for job_id, d in decisions.items() if d.memory_bump is not None
        },
    )
