"""A scheduling cycle that one job cannot stop.

The scheduler is a pure function of its snapshot, so when it raises, the jobs that make it
raise can be found by running it on parts of the snapshot: a binary search over the jobs
(gangs kept whole, since the scheduler only ever sees a gang entire) finds the first one
whose presence makes it fail. That job is left out and failed with the error, and the cycle
is decided again without it. The search costs a logarithmic number of extra runs, and only
in a cycle that would otherwise have scheduled nothing for anyone.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from armada_core import scheduling as s

log = logging.getLogger("armada_server")

Scheduler = Callable[[s.Snapshot], s.SchedulingResult]

# Culprits searched for in one cycle before giving up (and raising, as before).
MAX_CULPRITS = 8


def _units(jobs: tuple[s.Job, ...]) -> list[list[s.Job]]:
    """The jobs as the scheduler must see them: each gang whole, in first-member order."""
    units: list[list[s.Job]] = []
    gangs: dict[tuple[str, str], list[s.Job]] = {}
    for job in jobs:
        if job.gang_id is None:
            units.append([job])
            continue
        key = (job.queue, job.gang_id)
        if key not in gangs:
            gangs[key] = []
            units.append(gangs[key])
        gangs[key].append(job)
    return units


def _fails(scheduler: Scheduler, snapshot: s.Snapshot, units: list[list[s.Job]]) -> bool:
    jobs = tuple(j for unit in units for j in unit)
    try:
        scheduler(dataclasses.replace(snapshot, jobs=jobs))
    except Exception:
        return True
    return False


def _culprit(scheduler: Scheduler, snapshot: s.Snapshot) -> list[s.Job] | None:
    """The first unit of jobs whose presence makes the scheduler raise (None: the error
    does not follow any job, e.g. it raises with no jobs at all)."""
    units = _units(snapshot.jobs)
    if _fails(scheduler, snapshot, []):
        return None
    low, high = 0, len(units)  # units[:low] passes, units[:high] fails
    while high - low > 1:
        middle = (low + high) // 2
        if _fails(scheduler, snapshot, units[:middle]):
            high = middle
        else:
            low = middle
    return units[low]


def schedule_isolating(
    snapshot: s.Snapshot,
    scheduler: Scheduler = s.schedule,
) -> tuple[s.SchedulingResult, dict[str, str]]:
    """The cycle's decisions, and the jobs left out because the scheduler raised on them
    (job id -> reason)."""
    broken: dict[str, str] = {}
    for _ in range(MAX_CULPRITS + 1):
        try:
            return scheduler(snapshot), broken
        except Exception as error:
            culprit = _culprit(scheduler, snapshot)
            if (
                culprit is None
                or len(broken) >= MAX_CULPRITS
                or any(j.node is not None for j in culprit)
            ):
                raise  # a running job cannot be left out: its node would look free
            reason = (f"the scheduler failed on this job: {type(error).__name__}: {error}")[:1000]
            log.error(
                "scheduling failed on %s; leaving it out of the cycle",
                ", ".join(j.id for j in culprit),
                exc_info=error,
            )
            left = {j.id for j in culprit}
            broken.update(dict.fromkeys(left, reason))
            snapshot = dataclasses.replace(
                snapshot, jobs=tuple(j for j in snapshot.jobs if j.id not in left)
            )
    raise AssertionError("unreachable")
