"""Why a scheduling cycle preempted a job, in the words the metrics and the runs both use.

One classification: armada_preemptions_total counts it by kind, and each preempted run keeps
it (runs.preemption_kind) so that the web UI can say why the run went.
"""

from __future__ import annotations

from collections.abc import Mapping

from armada_core import scheduling as s
from armada_server.storage.schema import PREEMPTION_KINDS

__all__ = ["PREEMPTION_KINDS", "preemption_kind_of"]


def preemption_kind_of(
    snapshot: s.Snapshot, result: s.SchedulingResult, preempting: Mapping[str, str]
) -> dict[str, str]:
    """Preempted job -> its kind: a pod group's member with a role below its minimum (the
    scheduler's own reason), room for a job of a higher priority class (urgency), else fair
    share (room for another queue's job, or nothing placed). `preempting` is the job each
    preempted job made room for (made_room_for)."""
    if not result.preempted:
        return {}
    wanted = result.preempted | set(preempting.values())
    jobs = {j.id: j for j in snapshot.jobs if j.id in wanted}
    urgency = {c.name: c.priority for c in snapshot.priority_classes}
    out: dict[str, str] = {}
    for job_id in result.preempted:
        victim = jobs.get(job_id)
        if victim is None:
            continue
        placed = jobs.get(preempting.get(job_id, ""))
        if job_id in result.preempt_reasons:
            out[job_id] = "group_below_minimum"
        elif placed is not None and urgency.get(placed.priority_class, 0) > urgency.get(
            victim.priority_class, 0
        ):
            out[job_id] = "urgency"
        else:
            out[job_id] = "fair_share"
    return out
