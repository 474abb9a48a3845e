"""What every command shares: its signature, usage errors, and printing data as YAML or
JSON."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

from armada_core.client import ArmadaClient

#: A command: runs against a client, writes to `out`, returns the exit code.
Handler = Callable[[ArmadaClient, argparse.Namespace, TextIO], int]


class UsageError(Exception):
    """Arguments that make no sense together (argparse cannot say so)."""


def as_dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def print_structured(value: Any, fmt: str, out: TextIO) -> None:
    """`value` as JSON (`fmt` "json") or YAML."""
    if fmt == "json":
        out.write(json.dumps(value, indent=2, sort_keys=False) + "\n")
    else:
        out.write(yaml.safe_dump(value, sort_keys=False))


class CommandError(Exception):
    """A command that cannot do what was asked, for a reason the server did not give as an
    error (a job that never ran has no logs, a job set that does not exist, ...)."""
