"""Whether jobs an earlier attempt of a task left behind may be reattached to.

Shared by the orchestrator integrations: a new attempt (an Airflow try, a Dagster re-execution,
a Prefect retry) that finds its task's jobs reattaches only if those jobs can still succeed or
did succeed. Jobs that ended otherwise (failed, cancelled, preempted, rejected) or that the
server no longer knows would only report the old end again, so the attempt submits new jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from armada_core.api import submit_pb2

#: States of a job that may still succeed.
LIVE_STATES: frozenset[int] = frozenset(
    {
        submit_pb2.SUBMITTED,
        submit_pb2.QUEUED,
        submit_pb2.LEASED,
        submit_pb2.PENDING,
        submit_pb2.RUNNING,
    }
)
#: States a new attempt may reattach to: live, or succeeded (its result is reported).
REATTACHABLE_STATES: frozenset[int] = LIVE_STATES | {submit_pb2.SUCCEEDED}


def can_reattach(state: int) -> bool:
    """True if a job in `state` can still succeed or has succeeded."""
    return state in REATTACHABLE_STATES


@dataclass(frozen=True)
class ReattachDecision:
    """What to do with the jobs (a job or a gang) of an earlier attempt.

    `reattach`: every job can still succeed or succeeded, so wait for them. Otherwise submit
    new jobs under a new client id, after cancelling `live` (gang members still running beside
    one that ended otherwise), so that no two attempts run at once.
    """

    reattach: bool
    live: tuple[str, ...] = ()
    ended: tuple[str, ...] = ()


def decide_reattach(states: Mapping[str, int]) -> ReattachDecision:
    """Decide from each job's state (job id -> `submit_pb2.JobState`). A gang is reattached to
    only as a whole; no jobs at all means nothing to reattach to."""
    live = tuple(j for j, s in states.items() if s in LIVE_STATES)
    ended = tuple(j for j, s in states.items() if not can_reattach(s))
    return ReattachDecision(reattach=bool(states) and not ended, live=live, ended=ended)


__all__ = [
    "LIVE_STATES",
    "REATTACHABLE_STATES",
    "ReattachDecision",
    "can_reattach",
    "decide_reattach",
]
