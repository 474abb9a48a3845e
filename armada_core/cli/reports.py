"""`armada report`: the server's scheduling reports (SchedulerReporting, as upstream's
armadactl asks for them). The server writes the text; `-o json` prints the same report as
data (docs/reports.md)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from armada_core.client import ArmadaClient
from armada_core.client.operations import Report

from .output import CommandError, print_structured


def _print(report: Report, args: argparse.Namespace, out: TextIO) -> int:
    if args.output == "text":
        out.write(report.text)
        return 0
    if not report.data:
        raise CommandError("the server sent the report as text only: use -o text")
    print_structured(report.data, args.output, out)
    return 0


def report_scheduling(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    return _print(c.scheduling_report(args.pool, args.cycles), args, out)


def report_queue(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    return _print(c.queue_report(args.name), args, out)


def report_job(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    return _print(c.job_report(args.job_id), args, out)


def _cycles(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def add_report_commands(commands: Any) -> None:
    r = commands.add_parser(
        "report", help="why the scheduler did what it did: cycles, queues, jobs"
    )
    rs = r.add_subparsers(dest="command_name", required=True, metavar="REPORT")
    sp = rs.add_parser(
        "scheduling",
        help="the latest cycles: what they decided and why, limits that bound, fair shares",
    )
    sp.add_argument("--pool", default="", help="only this pool's counts")
    sp.add_argument(
        "--cycles", type=_cycles, default=0, help="how many of the latest cycles (default 5)"
    )
    sp.set_defaults(handler=report_scheduling)
    sp = rs.add_parser(
        "queue", help="a queue's standing, its waiting jobs by reason, what holds it back"
    )
    sp.add_argument("name", metavar="NAME")
    sp.set_defaults(handler=report_queue)
    sp = rs.add_parser(
        "job", help="a job's reasons over the cycles, its place in line, the nearest nodes"
    )
    sp.add_argument("job_id", metavar="ID")
    sp.set_defaults(handler=report_job)
    for parser in rs.choices.values():
        parser.add_argument("-o", "--output", choices=["text", "yaml", "json"], default="text")
