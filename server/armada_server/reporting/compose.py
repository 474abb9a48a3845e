"""The scheduling, queue and job reports, built from what storage kept of the cycles (their
figures as each cycle used them) and of the jobs (their reasons, one row per change).

Every read obeys queue permissions as other reads do: a queue's and a job's report need
`watch` on the queue; the scheduling report shows only the queues the caller may watch (its
totals stay whole: counts, not jobs). Blocking: callers run these off the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from armada_core.jobs import JobState
from armada_server.auth import Authorizer, Principal
from armada_server.errors import InvalidArgument, NotFound
from armada_server.reporting.limits import LIMITS, limit_of, needs
from armada_server.reporting.nearest import nearest_nodes
from armada_server.storage.cycle_reports import CycleReports
from armada_server.storage.job_reads import JobReads
from armada_server.storage.nodes import Nodes
from armada_server.storage.places import Places
from armada_server.storage.queues import Queues

#: Cycles a scheduling report shows unless asked for more; and at most.
DEFAULT_CYCLES = 5
MAX_CYCLES = 1000


@dataclass
class Reports:
    """What the reports read, and who may read what."""

    cycles: CycleReports
    queues: Queues
    job_reads: JobReads
    places: Places
    nodes: Nodes
    authorizer: Authorizer
    class_priorities: Mapping[str, int]

    def _watchable(self, who: Principal) -> set[str]:
        return {q.name for q in self.queues.list_queues() if self.authorizer.may(who, q, "watch")}

    def _require_watch(self, who: Principal, queue: str) -> None:
        self.authorizer.require(who, self.queues.get_queue(queue), "watch")

    def scheduling(
        self, who: Principal, pool: str = "", cycles: int = DEFAULT_CYCLES
    ) -> dict[str, Any]:
        """The latest `cycles` cycles, newest first; with `pool`, that pool's counts only."""
        if not 1 <= cycles <= MAX_CYCLES:
            raise InvalidArgument(f"cycles: {cycles} is not between 1 and {MAX_CYCLES}")
        seen = self._watchable(who)
        out = []
        for row in self.cycles.cycles(cycles):
            record = json.loads(row.report)
            record["queues"] = {q: v for q, v in record["queues"].items() if q in seen}
            if pool:
                record["pools"] = {p: v for p, v in record["pools"].items() if p == pool}
                for figures in record["queues"].values():
                    figures["pools"] = {
                        p: v for p, v in figures.get("pools", {}).items() if p == pool
                    }
            out.append(record)
        return {"pool": pool, "cycles": out, "limits": LIMITS}

    def queue(self, who: Principal, name: str) -> dict[str, Any]:
        """A queue's standing in the latest cycle (fair share is one for all pools: a cycle
        weighs every pool's nodes together; its jobs are counted per pool), its waiting jobs
        by reason, and what holds it back."""
        if not name:
            raise InvalidArgument("queue_name is required")
        self._require_watch(who, name)
        latest = self.cycles.cycles(1)
        standing: dict[str, Any] | None = None
        cycle = None
        if latest:
            record = json.loads(latest[0].report)
            cycle = record["cycle"]
            standing = record["queues"].get(name)
        groups = [
            {
                "reason": g.reason,
                "count": g.count,
                "oldestJobId": g.oldest_job_id,
                "oldestSubmitted": g.oldest_submitted_at.isoformat(),
                "limit": limit_of(g.reason),
                "needs": needs(g.reason),
            }
            for g in self.cycles.waiting(name)
        ]
        held = next((g for g in groups if g["reason"]), None)
        return {
            "queue": name,
            "cycle": cycle,
            "standing": standing,
            "waiting": groups,
            "heldBy": held["reason"] if held else "",
            "needs": held["needs"] if held else "",
        }

    def job(self, who: Principal, job_id: str) -> dict[str, Any]:
        """A job's reasons, one span per change, its place in line (and the line's length,
        read with it) and the nodes that came closest to holding it."""
        if not job_id:
            raise InvalidArgument("job_id is required")
        found = self.job_reads.jobs([job_id])
        if not found:
            raise NotFound(f"job {job_id!r} not found")
        job = found[0]
        self._require_watch(who, job.queue)
        latest = self.cycles.cycles(1)
        last_cycle = latest[0].cycle if latest else None
        queued = job.state == JobState.QUEUED
        place = length = None
        if queued:
            lines = self.places.queue_places([job.id], self.class_priorities)
            place = lines.places.get(job.id)
            length = lines.lengths.get(job.queue)
        reason, history = self.cycles.reasons(job.id)
        return {
            "jobId": job.id,
            "queue": job.queue,
            "jobSet": job.job_set,
            "state": job.state.name,
            "reason": reason,
            "limit": limit_of(reason) if reason else None,
            "needs": needs(reason) if queued else "",
            "history": spans(history, last_cycle if queued else None),
            "placeInLine": place,
            "lineLength": length,
            "nearestNodes": nearest_nodes(job, self.nodes) if queued else [],
        }


def spans(changes: Sequence[tuple[int, str]], last_cycle: int | None) -> list[dict[str, Any]]:
    """A job's reason changes as spans: each reason, the cycle it began in and how many
    cycles it lasted (the last one up to `last_cycle` while the job waits; None: it ended
    with the next change, or is still open when the job no longer waits)."""
    out: list[dict[str, Any]] = []
    for i, (cycle, reason) in enumerate(changes):
        if i + 1 < len(changes):
            lasted: int | None = changes[i + 1][0] - cycle
        elif reason and last_cycle is not None:
            lasted = max(1, last_cycle - cycle + 1)
        else:
            lasted = None
        out.append({"fromCycle": cycle, "cycles": lasted, "reason": reason or "placed"})
    return out
