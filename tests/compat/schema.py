"""Comparable summaries of protobuf schemas, and their differences.

Imported both by the test suite and by `official_side.py`, which runs inside a separate
environment holding the official `armada-client`; so it needs only the standard library and
protobuf.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

Schema = dict[str, Any]

# Field numbers reserved for our extensions beyond upstream's API.
EXTENSIONS_FROM = 100


def schema_of(files: list) -> Schema:
    """Messages, enums and services of the given FileDescriptors, keyed by full name."""
    out: Schema = {"messages": {}, "enums": {}, "services": {}}

    def enum(e: descriptor_pb2.EnumDescriptorProto, full: str) -> None:
        out["enums"][full] = {v.name: v.number for v in e.value}

    def message(m: descriptor_pb2.DescriptorProto, full: str, proto2: bool) -> None:
        fields = {}
        for f in m.field:
            oneof = (
                m.oneof_decl[f.oneof_index].name
                if f.HasField("oneof_index") and not f.proto3_optional
                else None
            )
            label = f.label
            if not proto2 and label == f.LABEL_OPTIONAL:
                label = "singular"
            fields[f.name] = {
                "number": f.number,
                "type": f.type,
                "label": label,
                "type_name": f.type_name,
                "oneof": oneof,
            }
        out["messages"][full] = {"fields": fields, "map_entry": m.options.map_entry}
        for n in m.nested_type:
            message(n, f"{full}.{n.name}", proto2)
        for e in m.enum_type:
            enum(e, f"{full}.{e.name}")

    for fd in files:
        fdp = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(fdp)
        proto2 = fdp.syntax in ("", "proto2")
        prefix = f".{fdp.package}"
        for m in fdp.message_type:
            message(m, f"{prefix}.{m.name}", proto2)
        for e in fdp.enum_type:
            enum(e, f"{prefix}.{e.name}")
        for s in fdp.service:
            out["services"][f"{prefix}.{s.name}"] = {
                m.name: [m.input_type, m.output_type, m.client_streaming, m.server_streaming]
                for m in s.method
            }
    return out


def differences(ours: Schema, theirs: Schema, *, require_all_of: tuple[str, ...]) -> list[str]:
    """What in `ours` disagrees with `theirs`.

    Every message, enum and service we define must exist upstream with identical fields,
    numbers, types and labels, except our extension fields (numbers from EXTENSIONS_FROM up),
    which upstream parsers keep as unknown fields. Upstream definitions whose full name starts
    with one of `require_all_of` must also exist in ours (the Armada API itself is carried in
    full; of the Kubernetes types we carry only those the API reaches).
    """
    problems: list[str] = []
    for kind in ("messages", "enums", "services"):
        for name, spec in ours[kind].items():
            if name not in theirs[kind]:
                problems.append(f"{kind[:-1]} {name} does not exist upstream")
                continue
            other = theirs[kind][name]
            if kind != "messages":
                if spec != other:
                    problems.append(f"{kind[:-1]} {name}: ours {spec} upstream {other}")
                continue
            for field, f in spec["fields"].items():
                g = other["fields"].get(field)
                if g is None and f["number"] >= EXTENSIONS_FROM:
                    continue
                if g is None:
                    problems.append(f"field {name}.{field} does not exist upstream")
                elif f != g:
                    problems.append(f"field {name}.{field}: ours {f} upstream {g}")
            for field in other["fields"].keys() - spec["fields"].keys():
                problems.append(f"field {name}.{field} is missing from ours")
        for name in theirs[kind]:
            if name.startswith(require_all_of) and name not in ours[kind]:
                problems.append(f"{kind[:-1]} {name} is missing from ours")
    return problems
