"""`armada details`: GetJobDetails, with what the web UI's job page also shows.

GetJobDetails leaves out a QUEUED state (the enum's zero value) and its runs carry no exit
codes; the job set's events and GetJobErrors have the rest: how each run ended (exit codes,
termination messages, reason, condition, category), the job's error, and who preempted it for
which job. Every call is upstream Armada's, so this works against upstream too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from google.protobuf import json_format

from armada_core.api import job_pb2
from armada_core.client import TERMINAL, ArmadaClient, ArmadaError, NotFound
from armada_core.client.endings import RunEnding, run_endings

from .output import as_dict, print_structured


def _plain(details: job_pb2.JobDetails) -> dict[str, Any]:
    """The message's fields, the state always (QUEUED is the enum's zero value, which JSON
    leaves out), other empty fields left out; the spec as it is."""
    bare = job_pb2.JobDetails()
    bare.CopyFrom(details)
    bare.ClearField("job_spec")
    full = json_format.MessageToDict(bare, always_print_fields_with_no_presence=True)
    out = {k: v for k, v in full.items() if k == "state" or v not in ("", [], {})}
    runs = [
        {k: v for k, v in run.items() if k == "state" or v not in ("", [], {})}
        for run in out.get("jobRuns", [])
    ]
    if runs:
        out["jobRuns"] = runs
    if details.HasField("job_spec"):
        out["jobSpec"] = as_dict(details.job_spec)
    return out


def _endings(c: ArmadaClient, found: Iterable[job_pb2.JobDetails]) -> dict[str, list[RunEnding]]:
    """How each job's runs ended, from its job set's events (best effort: a job set whose
    events cannot be read costs a note on stderr, not the command)."""
    sets: dict[tuple[str, str], list[str]] = {}
    for d in found:
        sets.setdefault((d.queue, d.jobset), []).append(d.job_id)
    out: dict[str, list[RunEnding]] = {}
    for (queue, job_set), ids in sets.items():
        try:
            events = list(c.get_job_set_events(queue, job_set, timeout=c.config.timeout))
        except ArmadaError as e:
            sys.stderr.write(
                f"armada: cannot read the events of job set {job_set} in queue {queue} "
                f"({e.details or e.code.name}): how runs ended is left out\n"
            )
            continue
        out.update(run_endings(events, ids))
    return out


def _with_endings(
    doc: dict[str, Any], details: job_pb2.JobDetails, endings: list[RunEnding]
) -> None:
    """Each run's ending into its entry, and the last one's into the job's."""
    pods = details.job_spec.pod_specs
    containers = [c.name for c in pods[0].containers] if pods else []
    by_id = {e.run_id: e for e in endings if e.run_id}
    unnamed = [e for e in endings if not e.run_id]  # upstream's events: in order
    for i, run in enumerate(details.job_runs):
        ending = by_id.get(run.run_id) or (unnamed[i] if i < len(unnamed) else None)
        if ending is None:
            continue
        if ending.outcome == "succeeded" and not ending.exit_codes:
            ending.exit_codes = dict.fromkeys(containers, 0)  # a pod succeeds when all do
        doc["jobRuns"][i].update(ending.as_dict())
    if not endings or details.state not in TERMINAL:
        return  # the job may run again: its last run says nothing of its end yet
    last = endings[-1]
    for key, value in (
        ("exitCodes", dict(last.exit_codes)),  # copies: YAML would print shared ones as aliases
        ("terminationMessages", dict(last.termination_messages)),
        ("preemption", last.preemption.as_dict() if last.preemption else {}),
    ):
        if value:
            doc[key] = value


def job_documents(c: ArmadaClient, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """What `details` prints for each job found, by id (missing ids left out)."""
    found = c.get_job_details(job_ids, expand_job_spec=True, expand_job_run=True)
    errors = c.get_job_errors(list(found)) if found else {}
    endings = _endings(c, found.values())
    out: dict[str, dict[str, Any]] = {}
    for job_id in job_ids:
        details = found.get(job_id)
        if details is None:
            continue
        doc = _plain(details)
        if errors.get(job_id):
            doc["error"] = errors[job_id]
        _with_endings(doc, details, endings.get(job_id, []))
        out[job_id] = doc
    return out


def details(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    docs = job_documents(c, args.job_ids)
    if not args.spec:
        for doc in docs.values():
            doc.pop("jobSpec", None)
    print_structured(docs, args.output, out)
    missing = [j for j in args.job_ids if j not in docs]
    if missing:
        raise NotFound(f"no such job: {', '.join(missing)}")
    return 0
