"""Write .proto text from the descriptors published in the `armada-client` wheel.

Upstream Armada publishes its public API only as generated Python modules; the schema facts
(message names, field names, numbers, types and labels) are readable from their descriptors.
This tool turns those facts into `.proto` text for the part of the schema we carry: the
Kubernetes types reachable from the Armada API (about 120 messages, written as
`armada_core/api/k8s/*.proto`) and, as a draft to review against our own files, the Armada
services themselves. Options that only matter to upstream's Go code generation (gogoproto,
google.api.http) are dropped: they do not change the wire format.

It needs `armada-client` importable, so run it from a throwaway virtual environment:

    python3 -m venv /tmp/ac && /tmp/ac/bin/pip install 'armada-client>=0.5,<0.6'
    /tmp/ac/bin/python scripts/proto_from_descriptors.py --out armada_core/api/k8s --k8s
    /tmp/ac/bin/python scripts/proto_from_descriptors.py --out /tmp/draft --armada

then regenerate the Python modules with `scripts/generate_protos.py`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterable
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool

ARMADA_MODULES = [
    "armada_client.armada.health_pb2",
    "armada_client.armada.submit_pb2",
    "armada_client.armada.event_pb2",
    "armada_client.armada.job_pb2",
    "armada_client.armada.binoculars_pb2",
]

# Upstream file name -> (our file name, python-importable path used in `import` lines).
FILE_MAP = {
    "armada/health.proto": "armada_core/api/health.proto",
    "armada/submit.proto": "armada_core/api/submit.proto",
    "armada/event.proto": "armada_core/api/event.proto",
    "armada/job.proto": "armada_core/api/job.proto",
    "armada/binoculars.proto": "armada_core/api/binoculars.proto",
    "k8s.io/api/core/v1/generated.proto": "armada_core/api/k8s/core_v1.proto",
    "k8s.io/api/networking/v1/generated.proto": "armada_core/api/k8s/networking_v1.proto",
    "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto": "armada_core/api/k8s/meta_v1.proto",
    "k8s.io/apimachinery/pkg/api/resource/generated.proto": "armada_core/api/k8s/resource.proto",
    "k8s.io/apimachinery/pkg/util/intstr/generated.proto": "armada_core/api/k8s/intstr.proto",
    "k8s.io/apimachinery/pkg/runtime/generated.proto": "armada_core/api/k8s/runtime.proto",
    "k8s.io/apimachinery/pkg/runtime/schema/generated.proto": "armada_core/api/k8s/schema.proto",
}
DROPPED_IMPORTS = {"google/api/annotations.proto", "github.com/gogo/protobuf/gogoproto/gogo.proto"}

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    F.TYPE_DOUBLE: "double",
    F.TYPE_FLOAT: "float",
    F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64",
    F.TYPE_INT32: "int32",
    F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32",
    F.TYPE_BOOL: "bool",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes",
    F.TYPE_UINT32: "uint32",
    F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64",
    F.TYPE_SINT32: "sint32",
    F.TYPE_SINT64: "sint64",
}


def file_protos() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Every file reachable from the Armada modules, keyed by upstream file name."""
    for name in ARMADA_MODULES:
        importlib.import_module(name)
    pool = descriptor_pool.Default()
    out: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    todo = [m.rsplit(".", 1)[1].replace("_pb2", "") for m in ARMADA_MODULES]
    todo = [f"armada/{n}.proto" for n in todo]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        fdp = descriptor_pb2.FileDescriptorProto()
        pool.FindFileByName(name).CopyToProto(fdp)
        out[name] = fdp
        todo.extend(fdp.dependency)
    return out


def index_types(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> dict[str, tuple]:
    """Full type name ('.pkg.Msg') -> (file name, message or enum proto)."""
    types: dict[str, tuple] = {}

    def walk(file: str, prefix: str, msgs: Iterable, enums: Iterable) -> None:
        for e in enums:
            types[f"{prefix}.{e.name}"] = (file, e)
        for m in msgs:
            types[f"{prefix}.{m.name}"] = (file, m)
            walk(file, f"{prefix}.{m.name}", m.nested_type, m.enum_type)

    for name, fdp in files.items():
        walk(name, f".{fdp.package}" if fdp.package else "", fdp.message_type, fdp.enum_type)
    return types


def reachable(roots: Iterable[str], types: dict[str, tuple]) -> set[str]:
    """Type names reachable from the given roots through message fields."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        t = todo.pop()
        if t in seen or t not in types:
            continue
        seen.add(t)
        _, proto = types[t]
        if isinstance(proto, descriptor_pb2.DescriptorProto):
            todo.extend(f.type_name for f in proto.field if f.type_name)
            todo.extend(f"{t}.{n.name}" for n in proto.nested_type)
            todo.extend(f"{t}.{e.name}" for e in proto.enum_type)
    return seen


class Writer:
    def __init__(self, fdp: descriptor_pb2.FileDescriptorProto, keep: set[str] | None):
        self.fdp = fdp
        self.pkg = f".{fdp.package}"
        self.keep = keep
        self.proto2 = fdp.syntax in ("", "proto2")
        self.lines: list[str] = []
        self.used_types: set[str] = set()

    def type_ref(self, name: str) -> str:
        self.used_types.add(name)
        if name.startswith(self.pkg + "."):
            return name[len(self.pkg) + 1 :]
        return name  # fully qualified with the leading dot: unambiguous across packages

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text if text else "")

    def field_options(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        opts = []
        if f.HasField("default_value"):
            v = f.default_value
            opts.append(
                f'default = "{v}"' if f.type in (F.TYPE_STRING, F.TYPE_BYTES) else f"default = {v}"
            )
        if f.options.HasField("packed"):
            opts.append(f"packed = {str(f.options.packed).lower()}")
        if f.options.deprecated:
            opts.append("deprecated = true")
        return f" [{', '.join(opts)}]" if opts else ""

    def field_type(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        if f.type in SCALARS:
            return SCALARS[f.type]
        return self.type_ref(f.type_name)

    def message(self, m: descriptor_pb2.DescriptorProto, full: str, depth: int) -> None:
        if self.keep is not None and full not in self.keep:
            return
        self.emit(depth, f"message {m.name} {{")
        maps = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
        for n in m.nested_type:
            if not n.options.map_entry:
                self.message(n, f"{full}.{n.name}", depth + 1)
        for e in m.enum_type:
            self.enum(e, depth + 1)
        for r in m.reserved_range:
            end = "" if r.end - 1 == r.start else f" to {r.end - 1}"
            self.emit(depth + 1, f"reserved {r.start}{end};")
        if m.reserved_name:
            self.emit(depth + 1, "reserved " + ", ".join(f'"{n}"' for n in m.reserved_name) + ";")
        real_oneofs = {
            f.oneof_index for f in m.field if f.HasField("oneof_index") and not f.proto3_optional
        }
        emitted_oneofs: set[int] = set()
        for f in m.field:
            if f.HasField("oneof_index") and f.oneof_index in real_oneofs:
                idx = f.oneof_index
                if idx in emitted_oneofs:
                    continue
                emitted_oneofs.add(idx)
                self.emit(depth + 1, f"oneof {m.oneof_decl[idx].name} {{")
                for g in m.field:
                    if g.HasField("oneof_index") and g.oneof_index == idx:
                        self.emit(
                            depth + 2,
                            f"{self.field_type(g)} {g.name} = {g.number}{self.field_options(g)};",
                        )
                self.emit(depth + 1, "}")
                continue
            if f.type_name in maps:
                entry = maps[f.type_name]
                k, v = entry.field[0], entry.field[1]
                decl = f"map<{self.field_type(k)}, {self.field_type(v)}>"
            else:
                label = ""
                if f.label == F.LABEL_REPEATED:
                    label = "repeated "
                elif self.proto2:
                    label = "required " if f.label == F.LABEL_REQUIRED else "optional "
                elif f.proto3_optional:
                    label = "optional "
                decl = label + self.field_type(f)
            self.emit(depth + 1, f"{decl} {f.name} = {f.number}{self.field_options(f)};")
        self.emit(depth, "}")

    def enum(self, e: descriptor_pb2.EnumDescriptorProto, depth: int) -> None:
        self.emit(depth, f"enum {e.name} {{")
        if e.options.allow_alias:
            self.emit(depth + 1, "option allow_alias = true;")
        for v in e.value:
            dep = " [deprecated = true]" if v.options.deprecated else ""
            self.emit(depth + 1, f"{v.name} = {v.number}{dep};")
        self.emit(depth, "}")

    def service(self, s: descriptor_pb2.ServiceDescriptorProto) -> None:
        self.emit(0, f"service {s.name} {{")
        for m in s.method:
            cs = "stream " if m.client_streaming else ""
            ss = "stream " if m.server_streaming else ""
            self.emit(
                1,
                f"rpc {m.name}({cs}{self.type_ref(m.input_type)}) returns "
                f"({ss}{self.type_ref(m.output_type)});",
            )
        self.emit(0, "}")

    def body(self) -> list[str]:
        for e in self.fdp.enum_type:
            if self.keep is None or f"{self.pkg}.{e.name}" in self.keep:
                self.enum(e, 0)
                self.emit(0, "")
        for m in self.fdp.message_type:
            before = len(self.lines)
            self.message(m, f"{self.pkg}.{m.name}", 0)
            if len(self.lines) > before:
                self.emit(0, "")
        for s in self.fdp.service:
            self.service(s)
            self.emit(0, "")
        return self.lines


def imports_for(w: Writer, own: str, types: dict[str, tuple]) -> list[str]:
    """Files defining the types the emitted text names, in the original import order."""
    files = {types[t][0] for t in w.used_types if t in types} - {own}
    return [FILE_MAP.get(d, d) for d in w.fdp.dependency if d in files]


def render(name: str, fdp, keep, types, files, header: str) -> str:
    w = Writer(fdp, keep)
    body = w.body()
    while body and body[-1] == "":
        body.pop()
    syntax = "proto2" if w.proto2 else "proto3"
    out = [f"// {header}", "", f'syntax = "{syntax}";', "", f"package {fdp.package};", ""]
    imports = imports_for(w, name, types)
    out += [f'import "{i}";' for i in imports]
    if imports:
        out.append("")
    return "\n".join(out + body) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--k8s", action="store_true", help="Kubernetes types the API reaches")
    which.add_argument("--armada", action="store_true", help="draft of the Armada API files")
    args = ap.parse_args()
    files = file_protos()
    types = index_types(files)
    roots = [t for t, (f, _) in types.items() if f.startswith("armada/")]
    keep = reachable(roots, types)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, fdp in sorted(files.items()):
        if name not in FILE_MAP:
            continue
        is_k8s = name.startswith("k8s.io/")
        if is_k8s != args.k8s:
            continue
        header = (
            "Kubernetes types reachable from the Armada API, wire-compatible with "
            "k8s.io's generated.proto."
            if is_k8s
            else "Armada public API."
        )
        text = render(name, fdp, keep if is_k8s else None, types, files, header)
        if is_k8s and "message " not in text and "enum " not in text:
            continue
        path = args.out / Path(FILE_MAP[name]).name
        path.write_text(text)
        print(f"wrote {path} ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    main()
