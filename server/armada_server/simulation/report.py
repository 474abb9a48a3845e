"""The figures of a simulation, as JSON-ready data: per queue its share over time against its
fair share, waiting times (p50, p95, max), jobs run and preemptions; the cluster's utilisation
and the fairness error over time.

Series are on a regular grid of at most MAX_POINTS instants (each the value at the last step
at or before it: between steps nothing changes). Means are over time. The fairness error at
an instant is half the sum over queues of |share - fair share|: the fraction of the cluster
held by queues beyond their fair share while others wait below theirs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

from armada_server.simulation.recording import Recording

MAX_POINTS = 400


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile of `values` (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _grid(rec: Recording) -> list[float]:
    if not rec.times:
        return []
    end = rec.end
    steps = int(end / rec.period) + 1
    count = min(MAX_POINTS, steps)
    if count <= 1:
        return [0.0]
    return [end * i / (count - 1) for i in range(count)]


def _on_grid(rec: Recording, grid: Sequence[float], values: Sequence[float]) -> list[float]:
    out = []
    for t in grid:
        i = bisect.bisect_right(rec.times, t + 1e-9) - 1
        out.append(round(values[max(i, 0)], 4))
    return out


def _time_mean(rec: Recording, values: Sequence[float]) -> float:
    """Mean over time of a step function sampled at `rec.times`."""
    if not values:
        return 0.0
    if len(values) == 1 or rec.end <= 0:
        return values[0]
    total = 0.0
    for i, v in enumerate(values):
        after = rec.times[i + 1] if i + 1 < len(values) else rec.end + rec.period
        total += v * (after - rec.times[i])
    return total / (rec.end + rec.period)


def fairness_errors(rec: Recording) -> list[float]:
    return [
        0.5 * sum(abs(rec.shares[q][i] - rec.fair[q][i]) for q in rec.queues)
        for i in range(len(rec.times))
    ]


def _queue(rec: Recording, queue: str, grid: Sequence[float]) -> dict[str, Any]:
    jobs = [j for j in rec.jobs.values() if j.queue == queue]
    waits = [j.leased - j.submitted for j in jobs if j.leased is not None]
    return {
        "weight": rec.queues[queue],
        "jobs_submitted": len(jobs),
        "jobs_run": sum(1 for j in jobs if j.runs),
        "jobs_succeeded": sum(1 for j in jobs if j.succeeded),
        "jobs_never_started": sum(1 for j in jobs if j.leased is None),
        "preemptions": sum(j.preemptions for j in jobs),
        "wait_seconds": {
            "p50": percentile(waits, 50),
            "p95": percentile(waits, 95),
            "max": max(waits) if waits else None,
        },
        "mean_share": round(_time_mean(rec, rec.shares[queue]), 4),
        "mean_fair_share": round(_time_mean(rec, rec.fair[queue]), 4),
        "share": _on_grid(rec, grid, rec.shares[queue]),
        "fair_share": _on_grid(rec, grid, rec.fair[queue]),
        "queued": _on_grid(rec, grid, [float(n) for n in rec.queued[queue]]),
    }


def figures(rec: Recording) -> dict[str, Any]:
    """Every figure of one simulation."""
    grid = _grid(rec)
    errors = fairness_errors(rec)
    return {
        "simulated_seconds": rec.end,
        "scheduling_period": rec.period,
        "cycles_with_leases": rec.cycles,
        "steps": len(rec.times),
        "decisions": {
            "leased": sum(1 for d in rec.decisions if d.kind == "leased"),
            "preempted": sum(1 for d in rec.decisions if d.kind == "preempted"),
        },
        "times": [round(t, 3) for t in grid],
        "queues": {q: _queue(rec, q, grid) for q in rec.queues},
        "utilisation": {
            r: {
                "mean": round(_time_mean(rec, series), 4),
                "series": _on_grid(rec, grid, series),
            }
            for r, series in rec.utilisation.items()
        },
        "fairness_error": {
            "mean": round(_time_mean(rec, errors), 4),
            "max": round(max(errors), 4) if errors else 0.0,
            "series": _on_grid(rec, grid, errors),
        },
    }
