"""`armada`: parse the command line, run one command, turn every error into one line.

Exit codes: 0 success, 1 an error (the server's or the input's), 2 a usage error, 130
interrupted, 141 when standard output was closed early (`armada watch ... | head -1`), as a
command killed by SIGPIPE exits in a shell.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from armada_core.api import submit_pb2
from armada_core.client import (
    ArmadaClient,
    ArmadaError,
    ConnectionConfig,
    JobTracker,
    SpecError,
    Unavailable,
    WatchOptions,
    load_job_file,
    queue,
    state_name,
)
from armada_core.retry import (
    RetryConfigError,
    RetryPolicy,
    dump_policies,
    load_policies,
    policy_from_document,
    policy_from_proto,
)

from .details import details
from .job_sets import cancel, report, reprioritize
from .logs import logs
from .nodes import node_cordon, node_list
from .output import CommandError, Handler, UsageError, as_dict, print_structured
from .progress import describe, summary
from .reap import add_reap_command
from .reports import add_report_commands
from .resources import dump_queues, load_queues

#: `add_subparsers`' result: where commands (or a group's actions) are added.
Commands = argparse._SubParsersAction  # argparse has no public name for it


# --- global options -----------------------------------------------------------------------


def _connection(args: argparse.Namespace) -> ConnectionConfig:
    ca = Path(args.ca_cert).read_bytes() if args.ca_cert else None
    return ConnectionConfig(
        address=args.url,
        tls=bool(args.tls or ca),
        root_certificates=ca,
        token=args.token or None,
        username=args.username or None,
        password=args.password if args.username else None,
        timeout=args.timeout,
        logs_address=args.logs_url or None,
    )


def _add_globals(p: argparse.ArgumentParser) -> None:
    env = os.environ.get
    p.add_argument(
        "--url",
        default=env("ARMADA_URL", "localhost:50051"),
        help="server address host:port (env ARMADA_URL; default localhost:50051)",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        default=env("ARMADA_TLS", "").lower() in ("1", "true", "yes"),
        help="use TLS (env ARMADA_TLS=1)",
    )
    p.add_argument(
        "--ca-cert",
        default=env("ARMADA_CA_CERT"),
        metavar="PEM",
        help="root certificates for TLS (implies --tls; env ARMADA_CA_CERT)",
    )
    p.add_argument("--token", default=env("ARMADA_TOKEN"), help="bearer token (env ARMADA_TOKEN)")
    p.add_argument(
        "--username", default=env("ARMADA_USERNAME"), help="basic-auth user (env ARMADA_USERNAME)"
    )
    p.add_argument(
        "--password",
        default=env("ARMADA_PASSWORD"),
        help="basic-auth password (env ARMADA_PASSWORD)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="deadline of each call (default 60)",
    )
    p.add_argument(
        "--logs-url",
        default=env("ARMADA_LOGS_URL"),
        metavar="HOST:PORT",
        help="binoculars (logs) address when not the server's (env ARMADA_LOGS_URL)",
    )


# --- output helpers -----------------------------------------------------------------------


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text()


def _pairs(values: Sequence[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {value!r}: expected KEY=VALUE")
        out[key] = val
    return out


# --- queues -------------------------------------------------------------------------------


def _queue_from_flags(args: argparse.Namespace) -> submit_pb2.Queue:
    if not args.name:
        raise UsageError("give a queue NAME or -f FILE")
    return queue(
        args.name,
        priority_factor=args.priority_factor,
        user_owners=args.owner or (),
        group_owners=args.group_owner or (),
        labels=_pairs(args.label, "--label"),
        retry_policies=args.retry_policy or (),
        cordoned=args.cordoned,
    )


def _queues_from_args(args: argparse.Namespace) -> list[submit_pb2.Queue]:
    if args.file:
        if args.name:
            raise UsageError("give either a queue NAME with flags or -f FILE, not both")
        return load_queues(_read(args.file))
    return [_queue_from_flags(args)]


def queue_create(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for q in _queues_from_args(args):
        c.create_queue(q)
        out.write(f"Created queue {q.name}\n")
    return 0


def queue_update(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for q in _queues_from_args(args):
        c.update_queue(q)
        out.write(f"Updated queue {q.name}\n")
    return 0


def queue_delete(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for name in args.names:
        c.delete_queue(name)
        out.write(f"Deleted queue {name}\n")
    return 0


def queue_get(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    queues = [c.get_queue(name) for name in args.names]
    if args.output == "json":
        print_structured([as_dict(q) for q in queues], "json", out)
    else:
        out.write(dump_queues(queues))
    return 0


def queue_list(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    queues = c.get_queues()
    if args.output == "yaml":
        out.write(dump_queues(queues) if queues else "")
    elif args.output == "json":
        print_structured([as_dict(q) for q in queues], "json", out)
    else:
        out.write(f"{'NAME':<32} {'PRIORITY-FACTOR':>15} {'CORDONED':>8}  OWNERS\n")
        for q in queues:
            owners = ",".join([*q.user_owners, *(f"group:{g}" for g in q.group_owners)])
            out.write(
                f"{q.name:<32} {q.priority_factor:>15g} "
                f"{'yes' if q.cordoned else 'no':>8}  {owners}\n"
            )
    return 0


def queue_cordon(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for name in args.names:
        (c.cordon_queue if args.command_name == "cordon" else c.uncordon_queue)(name)
        out.write(f"{args.command_name.capitalize()}ed queue {name}\n")
    return 0


# --- retry policies -----------------------------------------------------------------------


def _policies_from_args(args: argparse.Namespace) -> list[RetryPolicy]:
    if args.file:
        if args.name:
            raise UsageError("give either a policy NAME with flags or -f FILE, not both")
        return load_policies(_read(args.file))
    if not args.name:
        raise UsageError("give a policy NAME or -f FILE")
    spec: dict[str, Any] = {}
    if args.retry_limit is not None:
        spec["retryLimit"] = args.retry_limit
    if args.default_action:
        spec["defaultAction"] = args.default_action
    return [
        policy_from_document({"kind": "RetryPolicy", "metadata": {"name": args.name}, "spec": spec})
    ]


def policy_create(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for p in _policies_from_args(args):
        c.create_retry_policy(p)
        out.write(f"Created retry policy {p.name}\n")
    return 0


def policy_update(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for p in _policies_from_args(args):
        c.update_retry_policy(p)
        out.write(f"Updated retry policy {p.name}\n")
    return 0


def policy_delete(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for name in args.names:
        c.delete_retry_policy(name)
        out.write(f"Deleted retry policy {name}\n")
    return 0


def policy_get(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    out.write(dump_policies([policy_from_proto(c.get_retry_policy(n)) for n in args.names]))
    return 0


def policy_list(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    policies = c.get_retry_policies()
    if args.output == "yaml":
        out.write(dump_policies([policy_from_proto(p) for p in policies]) if policies else "")
    else:
        out.write(f"{'NAME':<40} {'RETRY-LIMIT':>11} {'RULES':>5}\n")
        for p in policies:
            limit = "global" if p.retry_limit_unset else str(p.retry_limit)
            out.write(f"{p.name:<40} {limit:>11} {len(p.rules):>5}\n")
    return 0


# --- jobs ---------------------------------------------------------------------------------


def submit(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    requests = load_job_file(_read(args.file))
    for request in requests:
        queue_name = args.queue or request.queue
        job_set = args.job_set or request.job_set_id
        if args.dry_run:
            out.write(
                f"Valid: {len(request.items)} job(s) for queue {queue_name}, job set {job_set}\n"
            )
            continue
        submitted = c.submit(queue_name, job_set, request.items)
        for job_id in submitted.job_ids:
            out.write(
                f"{job_id}\n"
                if args.quiet
                else f"Submitted job with id {job_id} to job set {job_set}\n"
            )
        for note in submitted.notes:  # what the server says of jobs it accepted
            sys.stderr.write(f"armada: note: {note}\n")
    return 0


def preempt(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    results = c.preempt_jobs(args.queue, args.job_set, args.job_ids, reason=args.reason)
    return report(results, "preemption requested", out)


def status(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    states = c.get_job_status(args.job_ids)
    for job_id in args.job_ids:
        out.write(f"{job_id} {state_name(states.get(job_id, 0))}\n")
    return 0


def watch(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    tracker = JobTracker()
    options = WatchOptions(silence_timeout=args.silence_timeout)

    def notice(n: Any) -> None:
        sys.stderr.write(f"armada: {n.message}\n")

    for message in c.follow_events(
        args.queue,
        args.job_set,
        from_message_id=args.from_id,
        watch=True,
        options=options,
        on_notice=notice,
    ):
        result = tracker.apply(message)
        if result is None:
            continue
        out.write(f"{describe(message, result)}  | {summary(tracker)}\n")
        out.flush()
        if args.exit_if_inactive and tracker.done():
            break
    out.write(f"All jobs finished: {summary(tracker)}\n")
    failed = sum(1 for r in tracker.jobs.values() if r.state_name in ("FAILED", "REJECTED"))
    return 1 if failed and args.fail_on_failure else 0


# --- parser -------------------------------------------------------------------------------


def _queue_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="queue name (or use -f)")
    p.add_argument("-f", "--file", help="YAML file with one or more Queue documents ('-': stdin)")
    p.add_argument("--priority-factor", type=float, default=1.0)
    p.add_argument("--owner", action="append", help="user owner (repeatable)")
    p.add_argument("--group-owner", action="append", help="group owner (repeatable)")
    p.add_argument("--label", action="append", metavar="KEY=VALUE", help="repeatable")
    p.add_argument(
        "--retry-policy",
        action="append",
        metavar="NAME",
        help="retry policy applied to the queue's jobs (repeatable)",
    )
    p.add_argument("--cordoned", action="store_true")


def _policy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="policy name (or use -f)")
    p.add_argument(
        "-f", "--file", help="YAML file with RetryPolicy documents (docs/retry-policies.md)"
    )
    p.add_argument("--retry-limit", type=int)
    p.add_argument("--default-action", choices=["Fail", "Retry"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="armada", description="Command-line client for an Armada server."
    )
    _add_globals(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_queue_commands(commands)
    _add_policy_commands(commands)
    _add_submit_command(commands)
    _add_watch_command(commands)
    _add_job_commands(commands)
    _add_logs_command(commands)
    _add_node_commands(commands)
    add_reap_command(commands)
    add_report_commands(commands)
    return parser


def _add_queue_commands(commands: Commands[argparse.ArgumentParser]) -> None:
    q = commands.add_parser("queue", help="create, update, delete, get, list queues")
    qs = q.add_subparsers(dest="command_name", required=True, metavar="ACTION")
    for name, handler, helptext in (
        ("create", queue_create, "create queues"),
        ("update", queue_update, "replace queues"),
    ):
        sp = qs.add_parser(name, help=helptext)
        _queue_flags(sp)
        sp.set_defaults(handler=handler)
    sp = qs.add_parser("delete", help="delete queues")
    sp.add_argument("names", nargs="+", metavar="NAME")
    sp.set_defaults(handler=queue_delete)
    sp = qs.add_parser("get", help="print queues as YAML")
    sp.add_argument("names", nargs="+", metavar="NAME")
    sp.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    sp.set_defaults(handler=queue_get)
    sp = qs.add_parser("list", help="list every queue")
    sp.add_argument("-o", "--output", choices=["table", "yaml", "json"], default="table")
    sp.set_defaults(handler=queue_list)
    for name in ("cordon", "uncordon"):
        sp = qs.add_parser(name, help=f"{name} queues (cordoned queues take no new jobs)")
        sp.add_argument("names", nargs="+", metavar="NAME")
        sp.set_defaults(handler=queue_cordon)


def _add_policy_commands(commands: Commands[argparse.ArgumentParser]) -> None:
    r = commands.add_parser("retry-policy", help="create, update, delete, get, list retry policies")
    rs = r.add_subparsers(dest="command_name", required=True, metavar="ACTION")
    for name, handler in (("create", policy_create), ("update", policy_update)):
        sp = rs.add_parser(name, help=f"{name} retry policies")
        _policy_flags(sp)
        sp.set_defaults(handler=handler)
    sp = rs.add_parser("delete", help="delete retry policies")
    sp.add_argument("names", nargs="+", metavar="NAME")
    sp.set_defaults(handler=policy_delete)
    sp = rs.add_parser("get", help="print retry policies as YAML")
    sp.add_argument("names", nargs="+", metavar="NAME")
    sp.set_defaults(handler=policy_get)
    sp = rs.add_parser("list", help="list every retry policy")
    sp.add_argument("-o", "--output", choices=["table", "yaml"], default="table")
    sp.set_defaults(handler=policy_list)


def _add_submit_command(commands: Commands[argparse.ArgumentParser]) -> None:
    sp = commands.add_parser("submit", help="submit the jobs of a job file")
    sp.add_argument("file", help="job file (YAML: queue, jobSetId, jobs; '-': stdin)")
    sp.add_argument("--queue", help="override the file's queue")
    sp.add_argument("--job-set", help="override the file's jobSetId")
    sp.add_argument("--dry-run", action="store_true", help="only check the file")
    sp.add_argument("-q", "--quiet", action="store_true", help="print only the job ids")
    sp.set_defaults(handler=submit)


def _add_watch_command(commands: Commands[argparse.ArgumentParser]) -> None:
    sp = commands.add_parser("watch", help="follow a job set's events")
    sp.add_argument("queue")
    sp.add_argument("job_set", metavar="JOB_SET")
    sp.add_argument(
        "--exit-if-inactive",
        "--exit-on-inactive",
        dest="exit_if_inactive",
        action="store_true",
        help="stop once every job of the set has finished",
    )
    sp.add_argument(
        "--fail-on-failure", action="store_true", help="exit 1 when a job failed or was rejected"
    )
    sp.add_argument(
        "--from",
        dest="from_id",
        default="",
        metavar="MESSAGE_ID",
        help="start after this message id",
    )
    sp.add_argument(
        "--silence-timeout",
        type=float,
        default=90.0,
        metavar="SECONDS",
        help="reopen a stream silent for this long (default 90)",
    )
    sp.set_defaults(handler=watch)


def _add_job_commands(commands: Commands[argparse.ArgumentParser]) -> None:
    """The commands on jobs by id: cancel, reprioritize, preempt, status, details."""
    sp = commands.add_parser("cancel", help="cancel jobs, or a whole job set")
    sp.add_argument("queue")
    sp.add_argument("job_set", metavar="JOB_SET")
    sp.add_argument(
        "job_ids", nargs="*", metavar="JOB_ID", help="jobs to cancel (none: the whole job set)"
    )
    sp.add_argument(
        "--state",
        action="append",
        choices=["queued", "leased", "pending", "running"],
        help="with no job ids: only jobs in this state (repeatable)",
    )
    sp.add_argument("--reason", default="")
    sp.set_defaults(handler=cancel)

    sp = commands.add_parser("reprioritize", help="change the priority of jobs")
    sp.add_argument("queue")
    sp.add_argument("job_set", metavar="JOB_SET")
    sp.add_argument("priority", type=float)
    sp.add_argument("job_ids", nargs="*", metavar="JOB_ID", help="none: the whole job set")
    sp.set_defaults(handler=reprioritize)

    sp = commands.add_parser("preempt", help="preempt running jobs")
    sp.add_argument("queue")
    sp.add_argument("job_set", metavar="JOB_SET")
    sp.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    sp.add_argument("--reason", default="")
    sp.set_defaults(handler=preempt)

    sp = commands.add_parser("status", help="print the state of jobs")
    sp.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    sp.set_defaults(handler=status)

    sp = commands.add_parser(
        "details", help="print jobs' details and runs, and how they ended (exit codes, ...)"
    )
    sp.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    sp.add_argument("--spec", action="store_true", help="include the job spec")
    sp.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    sp.set_defaults(handler=details)


def _add_logs_command(commands: Commands[argparse.ArgumentParser]) -> None:
    sp = commands.add_parser("logs", help="print a job's pod log")
    sp.add_argument("job_id", metavar="JOB_ID")
    sp.add_argument("--pod-number", type=int, default=0)
    sp.add_argument("--namespace", default="")
    sp.add_argument("--container", default="")
    sp.add_argument("--since-time", default="", help="RFC 3339 time")
    sp.add_argument("--tail", type=int, help="only the last N lines")
    sp.add_argument("--timestamps", action="store_true")
    sp.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing new lines until the job has finished",
    )
    sp.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="with --follow: how often to ask for new lines (default 1)",
    )
    sp.add_argument(
        "--run",
        metavar="N|RUN_ID",
        help="the log of an earlier run: its number (0 for the first, as `details` lists "
        "the runs) or its id; default: the latest run",
    )
    sp.add_argument(
        "--all-runs", action="store_true", help="the log of every run, each under a header line"
    )
    sp.add_argument(
        "-o",
        "--output",
        choices=["text", "json"],
        default="text",
        help="json: the runs read, each with its lines and their timestamps",
    )
    sp.set_defaults(handler=logs)


def _add_node_commands(commands: Commands[argparse.ArgumentParser]) -> None:
    n = commands.add_parser("node", help="list, cordon and uncordon executors' nodes")
    ns = n.add_subparsers(dest="command_name", required=True, metavar="ACTION")
    sp = ns.add_parser("list", help="every node: capacity, use, free room, state, jobs")
    sp.add_argument("--executor", default="", help="only this executor's nodes")
    sp.add_argument("-o", "--output", choices=["table", "yaml", "json"], default="table")
    sp.set_defaults(handler=node_list)
    for name in ("cordon", "uncordon"):
        sp = ns.add_parser(name, help=f"{name} nodes (cordoned nodes take no new jobs)")
        sp.add_argument(
            "names",
            nargs="+",
            metavar="NODE",
            help="a node name, or EXECUTOR/NODE when executors share names",
        )
        sp.set_defaults(handler=node_cordon)


def _one_line(error: BaseException, url: str) -> str:
    if isinstance(error, ArmadaError):
        what = error.code.name.lower().replace("_", " ")
        text = f"{what}: {error.details}" if error.details else what
        if isinstance(error, Unavailable):
            text += f" (is an Armada server running at {url}?)"
        return text
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return str(error)


#: The exit code of a command whose standard output was closed, as a shell reports one
#: killed by SIGPIPE (128 + 13).
STDOUT_CLOSED = 141


def _stdout_closed(out: TextIO) -> int:
    """The reader of standard output went away (`| head -1`): end quietly. What is still
    buffered goes to /dev/null, so the interpreter's own flush at exit fails no more."""
    if out is sys.stdout:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # not a real file: nothing flushes it at exit
            pass
    return STDOUT_CLOSED


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = stdout or sys.stdout
    try:
        handler: Handler = args.handler
        with ArmadaClient(config=_connection(args)) as client:
            code = handler(client, args, out)
        out.flush()  # a closed output shows here rather than at exit
        return code
    except UsageError as e:
        parser.error(str(e))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _stdout_closed(out)
    except (ArmadaError, CommandError, SpecError, RetryConfigError, OSError, ValueError) as e:
        message = " ".join(_one_line(e, args.url).split())
        sys.stderr.write(f"armada: error: {message}\n")
        return 1
    return 0  # pragma: no cover - parser.error exits
