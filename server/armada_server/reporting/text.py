"""The reports as text, for people: what SchedulerReporting's `report` fields carry (as
upstream's do, so armadactl prints them) and what `armada report` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _share(value: Any) -> str:
    return f"{float(value or 0.0):.3f}"


def _counts(counts: Mapping[str, int], indent: str) -> list[str]:
    return [f"{indent}{n:>7}  {what}" for what, n in counts.items()]


def scheduling(report: Mapping[str, Any]) -> str:
    """The latest cycles, newest first."""
    cycles = report["cycles"]
    where = f" of pool {report['pool']}" if report.get("pool") else ""
    if not cycles:
        return f"no scheduling cycle{where} kept yet\n"
    lines: list[str] = []
    for c in cycles:
        lines.append(
            f"cycle {c['cycle']}{where} at {c['started']}, took {c['seconds']:.3f} s: "
            f"considered {c['considered']['queued']} queued and {c['considered']['running']} "
            f"running jobs; scheduled {c['scheduled']}, preempted {c['preempted']}, "
            f"failed {c['failed']}"
        )
        for pool, n in c["pools"].items():
            lines.append(
                f"  pool {pool}: {n['nodes']} nodes, scheduled {n['scheduled']}, "
                f"preempted {n['preempted']}"
            )
        if c["preemptions"]:
            lines.append("  preempted because:")
            lines += _counts(c["preemptions"], "    ")
        if c["waiting"]:
            lines.append("  left queued because:")
            lines += _counts(c["waiting"], "    ")
        bound = c["limits"]["bound"]
        lines.append(
            "  limits that bound: "
            + (", ".join(f"{k} ({n} jobs)" for k, n in bound.items()) if bound else "none")
        )
        if c["queues"]:
            lines.append(
                "  queue            fair   adjusted  actual   demand   usage    "
                "queued  running  sched  preempted"
            )
        for name, q in c["queues"].items():
            lines.append(
                f"  {name:<15}  {_share(q.get('fairShare'))}  "
                f"{_share(q.get('adjustedFairShare'))}     {_share(q.get('share'))}    "
                f"{_share(q.get('demand'))}    "
                f"{_share(q.get('decayedUsage'))}    {q['queued']:>6}  {q['running']:>7}  "
                f"{q['scheduled']:>5}  {q['preempted']:>9}"
            )
    return "\n".join(lines) + "\n"


def queue(report: Mapping[str, Any]) -> str:
    """A queue's standing, its waiting jobs by reason, what holds it back."""
    name = report["queue"]
    lines = []
    s = report["standing"]
    if s is None:
        lines.append(f"queue {name}: no kept cycle weighed it (no queued or running jobs then)")
    else:
        lines.append(
            f"queue {name} in cycle {report['cycle']}: fair share {_share(s.get('fairShare'))}, "
            f"adjusted fair share {_share(s.get('adjustedFairShare'))}, actual share "
            f"{_share(s.get('share'))}, demand {_share(s.get('demand'))}, decayed usage "
            f"{_share(s.get('decayedUsage'))}"
        )
        for pool, n in s.get("pools", {}).items():
            lines.append(
                f"  pool {pool}: {n['running']} running, scheduled {n['scheduled']}, "
                f"preempted {n['preempted']}"
            )
    if not report["waiting"]:
        lines.append("no jobs waiting")
    for g in report["waiting"]:
        why = g["reason"] or "not looked at by a cycle yet"
        lines.append(
            f"{g['count']:>7} waiting: {why} (oldest {g['oldestJobId']}, "
            f"submitted {g['oldestSubmitted']})"
        )
    if report["heldBy"]:
        lines.append(f"held back by: {report['heldBy']}")
        lines.append(f"it needs: {report['needs']}")
    return "\n".join(lines) + "\n"


def job(report: Mapping[str, Any]) -> str:
    """A job's reasons over the cycles, its place in line, the nodes closest to holding it."""
    lines = [f"job {report['jobId']} (queue {report['queue']}): {report['state']}"]
    history = report["history"]
    if history:
        parts = []
        for span in history:
            n = span["cycles"]
            lasted = f" for {n} cycle{'s' if n != 1 else ''}" if n else ""
            if span["reason"] == "placed":
                parts.append(f"placed in cycle {span['fromCycle']}")
            else:
                parts.append(
                    f"waited because {span['reason']}{lasted} (from cycle {span['fromCycle']})"
                )
        lines.append("; then ".join(parts))
    elif report["reason"]:
        lines.append(f"waits because {report['reason']}")
    else:
        lines.append("no reasons kept for it")
    if report["needs"]:
        lines.append(f"it needs: {report['needs']}")
    if report["placeInLine"] is not None:
        lines.append(
            f"place in its queue's line: {report['placeInLine']} of {report['lineLength']}"
        )
    for n in report["nearestNodes"]:
        lacks = ", ".join(f"{v} {k}" for k, v in n["lacks"].items()) or "nothing (it has room)"
        lines.append(f"node {n['node']} ({n['executor']}, pool {n['pool']}) lacks {lacks}")
    return "\n".join(lines) + "\n"
