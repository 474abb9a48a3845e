"""`armada cancel` and `armada reprioritize`: by job id, or a whole job set.

CancelJobSet answers nothing, whether the set exists or not: the set's events, read before
the call, tell which jobs it had and which were still live, so the command can say how many it
asked to cancel, and that a set with no jobs does not exist. A whole set's reprioritization
answers for every job, the finished ones refused: those are skipped, not errors.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from armada_core.api import submit_pb2
from armada_core.client import TERMINAL, ArmadaClient, JobTracker, PermissionDenied

from .output import CommandError, UsageError

# The states `cancel --state` names, and the states of jobs they cover (as the server has it:
# a pending filter takes leased jobs too, a queued one submitted jobs).
_CANCEL_STATES = {
    "queued": (submit_pb2.SUBMITTED, submit_pb2.QUEUED),
    "leased": (submit_pb2.LEASED,),
    "pending": (submit_pb2.LEASED, submit_pb2.PENDING),
    "running": (submit_pb2.RUNNING,),
}


def _plural(n: int, what: str = "job") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def job_set_states(c: ArmadaClient, queue: str, job_set: str) -> dict[str, int] | None:
    """Each job of the set with its state, from the set's events as they are now; None when
    the caller may not watch the queue (the jobs cannot be counted then)."""
    tracker = JobTracker()
    try:
        for message in c.get_job_set_events(queue, job_set, timeout=c.config.timeout):
            tracker.apply(message)
    except PermissionDenied:
        return None
    return {job_id: result.state for job_id, result in tracker.jobs.items()}


def _no_such_set(queue: str, job_set: str) -> CommandError:
    return CommandError(
        f"job set {job_set!r} does not exist in queue {queue!r}: no job was ever submitted to it"
    )


def cancel(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.job_ids:
        if args.state:
            raise UsageError("--state filters a whole job set; do not combine it with job ids")
        cancelled = c.cancel_jobs(args.queue, args.job_set, args.job_ids, reason=args.reason)
        for job_id in cancelled:
            out.write(f"Cancelled {job_id}\n")
        missed = [j for j in args.job_ids if j not in cancelled]
        for job_id in missed:
            out.write(f"Not cancelled {job_id} (unknown, or already finished)\n")
        return 0
    states = job_set_states(c, args.queue, args.job_set)
    if states == {}:
        raise _no_such_set(args.queue, args.job_set)
    c.cancel_job_set(args.queue, args.job_set, states=args.state or (), reason=args.reason)
    which = f" in states {', '.join(args.state)}" if args.state else ""
    if states is None:
        out.write(
            f"Requested cancellation of job set {args.job_set}{which} "
            f"(its jobs cannot be counted: you may not watch queue {args.queue})\n"
        )
        return 0
    wanted = {s for name in args.state or _CANCEL_STATES for s in _CANCEL_STATES[name]}
    asked = sum(1 for state in states.values() if state in wanted)
    finished = sum(1 for state in states.values() if state in TERMINAL)
    others = len(states) - asked - finished
    notes = [f"{finished} already finished"] if finished else []
    if others:
        notes.append(f"{others} in other states")
    out.write(
        f"Requested cancellation of {_plural(asked)} of job set {args.job_set}{which}"
        + (f" ({', '.join(notes)})" if notes else "")
        + "\n"
    )
    return 0


def report(results: dict[str, str], verb: str, out: TextIO) -> int:
    """One line per job; exit 1 when any was refused."""
    failed = 0
    for job_id, error in sorted(results.items()):
        if error:
            failed += 1
            out.write(f"{job_id}: not {verb}: {error}\n")
        else:
            out.write(f"{job_id}: {verb}\n")
    return 1 if failed else 0


def reprioritize(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    results = c.reprioritize_jobs(args.queue, args.job_set, args.priority, args.job_ids)
    if args.job_ids:
        return report(results, "reprioritized", out)
    if not results:  # ours answers for every job of a set; upstream may answer nothing
        if job_set_states(c, args.queue, args.job_set) == {}:
            raise _no_such_set(args.queue, args.job_set)
        out.write(f"Requested reprioritization of job set {args.job_set}\n")
        return 0
    refused = [j for j, error in results.items() if error]
    states = c.get_job_status(refused) if refused else {}
    finished = {j for j in refused if states.get(j) in TERMINAL}
    live = {j: e for j, e in results.items() if j not in finished}
    failed = report(live, "reprioritized", out)
    done = sum(1 for error in live.values() if not error)
    out.write(
        f"Reprioritized {_plural(done)} of job set {args.job_set} to priority {args.priority:g}"
        + (f"; skipped {_plural(len(finished), 'finished job')}" if finished else "")
        + "\n"
    )
    return failed
