"""`armada logs`: a job's pod log, of its latest run or of earlier ones, or followed.

A job that has not run has no log: that is said (on stderr, exit 1) rather than printing
nothing, as armadactl does for a pod that does not exist. `--follow` waits for the first run,
and says so if the job ends without one.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any, TextIO

from armada_core.api import binoculars_pb2, job_pb2
from armada_core.client import TERMINAL, ArmadaClient, ArmadaError, NotFound, state_name
from armada_core.client.errors import TRANSIENT_CODES

from .output import CommandError, UsageError, print_structured


@dataclass(frozen=True)
class RunChoice:
    """A run to read: its number (0 for the first, as `details` lists them) and id; an empty
    id reads the latest run the plain upstream way."""

    number: int
    run_id: str
    state: str


def _details(c: ArmadaClient, job_id: str) -> job_pb2.JobDetails:
    found = c.get_job_details([job_id], expand_job_run=True)
    if job_id not in found:
        raise NotFound(f"job {job_id!r} not found")
    return found[job_id]


def _run_state(run: job_pb2.JobRunDetails) -> str:
    return job_pb2.JobRunState.Name(run.state).removeprefix("RUN_STATE_").lower()


def _never_ran(details: job_pb2.JobDetails) -> CommandError:
    state = state_name(details.state)
    if details.state in TERMINAL:
        return CommandError(f"job {details.job_id} ended ({state}) without running: it has no logs")
    return CommandError(
        f"job {details.job_id} has not run yet ({state}): it has no logs yet; "
        f"`armada logs -f {details.job_id}` waits for them"
    )


def _choose(details: job_pb2.JobDetails, args: argparse.Namespace) -> list[RunChoice]:
    runs = list(details.job_runs)
    if not runs:
        raise _never_ran(details)
    every = [RunChoice(i, r.run_id, _run_state(r)) for i, r in enumerate(runs)]
    if args.all_runs:
        return every
    if args.run is None:
        return [RunChoice(len(runs) - 1, "", every[-1].state)]  # the latest, as upstream reads it
    if args.run.isdigit():
        number = int(args.run)
        if number >= len(runs):
            raise CommandError(
                f"job {details.job_id} has {len(runs)} run(s), numbered 0 to {len(runs) - 1}: "
                f"no run {number}"
            )
        return [every[number]]
    named = [choice for choice in every if choice.run_id == args.run]
    if not named:
        ids = ", ".join(r.run_id for r in runs)
        raise CommandError(f"{args.run!r} is not a run of job {details.job_id} (its runs: {ids})")
    return named


def _read(c: ArmadaClient, args: argparse.Namespace, run_id: str) -> list[binoculars_pb2.LogLine]:
    return c.logs(
        args.job_id,
        pod_number=args.pod_number,
        namespace=args.namespace,
        since_time=args.since_time,
        tail_lines=args.tail,
        container=args.container,
        timestamps=args.timestamps,
        run_id=run_id,
    )


def _write_line(line: binoculars_pb2.LogLine, timestamps: bool, out: TextIO) -> None:
    out.write(
        (f"{line.timestamp} " if timestamps and line.timestamp else "")
        + line.line
        + ("" if line.line.endswith("\n") else "\n")
    )


def logs(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.follow and (args.run is not None or args.all_runs):
        raise UsageError("--follow follows the latest run; --run and --all-runs read ended runs")
    if args.follow and args.output == "json":
        raise UsageError("-o json prints what was read at once: not with --follow")
    if args.run is not None and args.all_runs:
        raise UsageError("give --run N or --all-runs, not both")
    details = _details(c, args.job_id)
    if args.follow:
        return follow(c, args, out, details)
    chosen = _choose(details, args)
    read = [(choice, _read(c, args, choice.run_id)) for choice in chosen]
    if args.output == "json":
        runs: list[dict[str, Any]] = [
            {
                "run": choice.number,
                "runId": choice.run_id or details.job_runs[choice.number].run_id,
                "state": choice.state,
                "lines": [{"timestamp": x.timestamp, "line": x.line} for x in lines],
            }
            for choice, lines in read
        ]
        print_structured({"jobId": details.job_id, "runs": runs}, "json", out)
        return 0
    for choice, lines in read:
        if args.all_runs:
            run = details.job_runs[choice.number]
            where = f" on {run.cluster}/{run.node}" if run.node else ""
            out.write(f"==> run {choice.number} ({run.run_id}){where}: {choice.state} <==\n")
        for line in lines:
            _write_line(line, args.timestamps, out)
    return 0


def follow(
    c: ArmadaClient, args: argparse.Namespace, out: TextIO, details: job_pb2.JobDetails
) -> int:
    """Print new lines until the job has finished (a job not running yet is waited for)."""
    since, tail = args.since_time, args.tail
    repeated = 0  # lines shown with the timestamp `since` (an inclusive server repeats them)
    ran = bool(details.job_runs)
    while True:
        # The state first: lines read after it said "finished" are the last ones.
        done = c.get_job_status([args.job_id]).get(args.job_id) in TERMINAL
        try:
            lines = c.logs(
                args.job_id,
                pod_number=args.pod_number,
                namespace=args.namespace,
                since_time=since,
                tail_lines=tail,
                container=args.container,
                timestamps=args.timestamps,
            )
        except ArmadaError as e:
            if e.code not in TRANSIENT_CODES:
                raise
            lines = []  # the executor is out of reach for now: try again
        skip = repeated
        for line in lines:
            if since and line.timestamp == since and skip > 0:
                skip -= 1
                continue
            if line.timestamp and line.timestamp != since:
                since, repeated = line.timestamp, 0
            repeated += 1
            _write_line(line, args.timestamps, out)
        out.flush()
        if lines:
            tail, ran = None, True  # --tail limits the first read only
        if done:
            if not ran:  # nothing printed: did it ever run?
                ended = _details(c, args.job_id)
                if not ended.job_runs:
                    raise _never_ran(ended)
            return 0
        time.sleep(args.interval)
