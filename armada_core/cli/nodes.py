"""`armada node`: list executors' nodes (capacity, use, cordons, jobs), cordon, uncordon."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, TextIO

from google.protobuf import json_format

from armada_core.api import nodes_pb2
from armada_core.client import ArmadaClient

from .output import print_structured


def node_cordon(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    for name in args.names:
        (c.cordon_node if args.command_name == "cordon" else c.uncordon_node)(name)
        out.write(f"{args.command_name.capitalize()}ed node {name}\n")
    return 0


def _resources(values: Mapping[str, str]) -> str:
    """`cpu=2,memory=8Gi,nvidia.com/gpu=1`: cpu and memory first."""
    order = sorted(values, key=lambda name: (name not in ("cpu", "memory"), name))
    return ",".join(f"{name}={values[name]}" for name in order) or "-"


def node_state(node: nodes_pb2.NodeStatus) -> str:
    """Why a node takes no new jobs (cordoned, unschedulable, silent), else schedulable."""
    states = []
    if node.cordoned:
        states.append("cordoned")
    if node.unschedulable:
        states.append("unschedulable")
    if not node.executor_live:
        states.append("silent")
    return ",".join(states) or "schedulable"


def node_document(node: nodes_pb2.NodeStatus) -> dict[str, Any]:
    """Every field (zeros and empty maps too), in the message's order."""
    found = json_format.MessageToDict(node, always_print_fields_with_no_presence=True)
    fields = nodes_pb2.NodeStatus.DESCRIPTOR.fields
    return {f.json_name: found[f.json_name] for f in fields if f.json_name in found}


def node_list(c: ArmadaClient, args: argparse.Namespace, out: TextIO) -> int:
    nodes = c.get_nodes(args.executor)
    if args.output != "table":
        print_structured([node_document(n) for n in nodes], args.output, out)
        return 0
    rows = [
        (
            f"{n.executor}/{n.name}",
            n.pool or "-",
            node_state(n),
            str(n.jobs),
            _resources(n.allocatable),
            _resources(n.used),
            _resources(n.free),
        )
        for n in nodes
    ]
    header = ("NODE", "POOL", "STATE", "JOBS", "CAPACITY", "USED", "FREE")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")
    return 0
