"""Which limit a reason for waiting names, and what a job held by it would need: the reasons
are the scheduler's own strings (armada_core.scheduling.reasons), so this reads them back."""

from __future__ import annotations

from armada_core.scheduling import SchedulingConfig
from armada_core.scheduling import reasons as r

#: The limits a cycle's reasons can name, with the settings that set them.
LIMITS: dict[str, str] = {
    "rate": "scheduling_rate, scheduling_burst",
    "queue rate": "queue_scheduling_rate, queue_scheduling_burst",
    "per-cycle caps": "max_jobs_per_cycle, max_fraction_per_cycle",
    "lookback": "max_queue_lookback",
    "class caps": "max_fraction_per_queue",
    "overshoot": "non_preemptible_overshoot",
    "excess-flow budget": "excess_flow_budget",
}

_EXACT = {
    r.GLOBAL_RATE_LIMIT: "rate",
    r.QUEUE_RATE_LIMIT: "queue rate",
    r.MAX_JOBS_PER_CYCLE: "per-cycle caps",
    r.MAX_RESOURCES_PER_CYCLE: "per-cycle caps",
    r.NON_PREEMPTIBLE_OVERSHOOT: "overshoot",
    r.EXCESS_FLOW_BUDGET: "excess-flow budget",
}
_LOOKBACK = r.queue_lookback(0).split(" 0 ")[0]
_CLASS_CAP = r.queue_class_limit("").split("''")[0]


def limit_of(reason: str) -> str | None:
    """The limit (a key of LIMITS) that held a job back for `reason`; None: no limit, e.g.
    no room on the nodes or a gang not complete."""
    found = _EXACT.get(reason)
    if found is not None:
        return found
    if reason.startswith(_LOOKBACK):
        return "lookback"
    if reason.startswith(_CLASS_CAP):
        return "class caps"
    return None


def settings_of(config: SchedulingConfig) -> dict[str, object]:
    """The values of the limits' settings the cycle ran with (None: no limit)."""
    return {
        "scheduling_rate": config.scheduling_rate,
        "scheduling_burst": config.scheduling_burst,
        "queue_scheduling_rate": config.queue_scheduling_rate,
        "queue_scheduling_burst": config.queue_scheduling_burst,
        "max_jobs_per_cycle": config.max_jobs_per_cycle,
        "max_fraction_per_cycle": dict(config.max_fraction_per_cycle),
        "max_queue_lookback": config.max_queue_lookback,
        "non_preemptible_overshoot": config.non_preemptible_overshoot,
        "excess_flow_budget": config.excess_flow_budget,
    }


_NEEDS = {
    "rate": "tokens of the global rate limit: they refill at scheduling_rate per second",
    "queue rate": "tokens of its queue's rate limit: they refill at queue_scheduling_rate "
    "per second",
    "per-cycle caps": "a later cycle: this one placed as much as max_jobs_per_cycle or "
    "max_fraction_per_cycle allow",
    "lookback": "the jobs ahead of it in its queue to be placed or to leave: the cycle looks "
    "at no more than max_queue_lookback of a queue's jobs",
    "class caps": "its queue's running jobs of the class to end, or a larger "
    "max_fraction_per_queue for the class",
    "overshoot": "its queue's jobs of infinite lifetime to end, or its fair share to grow "
    "(fewer active queues) or a larger non_preemptible_overshoot",
    "excess-flow budget": "its queue's jobs above fair share to end and give their charge "
    "back, or a larger excess_flow_budget",
}


def needs(reason: str) -> str:
    """What a job held back by `reason` would need to be placed, in a few words."""
    limit = limit_of(reason)
    if limit is not None:
        return _NEEDS[limit]
    if reason.startswith("0 of ") or reason == r.NO_CAPACITY:
        return "room on a matching node: running jobs there to end, or more nodes"
    if reason == r.TOO_LARGE:
        return "a node larger than any now matching it"
    if reason == r.NO_MATCHING_NODE:
        return "a node that matches its selector, tolerations and affinity"
    if reason == r.QUEUE_CORDONED:
        return "its queue to be uncordoned (armada queue uncordon)"
    if reason.startswith("gang incomplete"):
        return "the rest of its gang's members to be submitted"
    if not reason:
        return "a scheduling cycle to look at it"
    return "what the reason names"
