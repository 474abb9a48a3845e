"""Inputs and units (SEMANTICS.md, "Inputs and units"): which jobs take part in the cycle."""

from __future__ import annotations

from .. import reasons
from ..model import Job
from ..roles import has_roles
from .elastic import apply_roles
from .order import running_order
from .state import CycleState


def sort_jobs(state: CycleState) -> tuple[list[Job], list[Job]]:
    """Running jobs on known nodes and valid queued jobs, each by id. Queued jobs of an
    unknown queue or class fail; running jobs on unknown nodes are ignored."""
    running: list[Job] = []
    queued: list[Job] = []
    failed = state.result.failed
    for job in sorted(state.snapshot.jobs, key=lambda j: j.id):
        if job.node is not None:
            if job.node in state.node_index:
                running.append(job)
        elif job.queue not in state.queues:
            failed[job.id] = reasons.UNKNOWN_QUEUE
        elif job.priority_class not in state.classes:
            failed[job.id] = reasons.UNKNOWN_PRIORITY_CLASS
        else:
            queued.append(job)
    if has_roles(running) or has_roles(queued):
        running, queued = apply_roles(
            state, running, queued, lambda j: running_order(j, state.classes)
        )
    return running, queued
