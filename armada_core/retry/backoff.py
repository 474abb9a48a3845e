"""Exponential backoff between retries (seed 001, "Backoff")."""

from __future__ import annotations

import math

from .policy import Backoff, RetryPolicy, RetryRule


def effective_backoff(rule: RetryRule | None, policy: RetryPolicy, default: Backoff) -> Backoff:
    """Most specific level wins, field by field: rule, then policy, then the global default.

    ``default`` must be complete (RetrySettings makes it so).
    """
    own = rule.backoff if rule is not None else Backoff()
    return own.over(policy.backoff).over(default)


def backoff_delay(backoff: Backoff, failure_count: int) -> float:
    """``min(initialDelay * multiplier^(failureCount-1), maxDelay)`` in seconds.

    ``failure_count`` is 1 for the first retry. Large exponents saturate at maxDelay rather
    than overflow.
    """
    if failure_count < 1:
        return 0.0
    initial = backoff.initial_delay or 0.0
    cap = backoff.max_delay if backoff.max_delay is not None else math.inf
    multiplier = backoff.multiplier if backoff.multiplier is not None else 1.0
    if initial == 0:
        return 0.0
    try:
        raw = initial * multiplier ** (failure_count - 1)
    except OverflowError:
        return cap
    return min(raw, cap)
