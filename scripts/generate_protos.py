"""Regenerate the Python modules of armada_core/api from its .proto files.

Run after editing any .proto file, with the project's environment:

    .venv/bin/python scripts/generate_protos.py

The generated files are committed so that installing armada-core needs no code generation:
the runtime modules (*_pb2.py by protoc, *_pb2_grpc.py by grpc_tools) and their type stubs
(*_pb2.pyi and *_pb2_grpc.pyi by mypy-protobuf's protoc-gen-mypy and protoc-gen-mypy_grpc,
installed with the dev tools), so that the type checker sees typed messages, stubs and
servicers. tests/api/test_generated.py fails when they are stale. `--check` reports stale
files without writing.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "armada_core" / "api"


def plugin(name: str) -> str:
    """`--plugin` for protoc: mypy-protobuf's executable beside this Python's."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise SystemExit(f"{path} not found: install the dev tools (mypy-protobuf)")
    return f"--plugin={name}={path}"


def protoc_run(*args: str) -> None:
    include = Path(grpc_tools.__file__).parent / "_proto"
    if protoc.main(["protoc", f"-I{ROOT}", f"-I{include}", *args]) != 0:
        raise SystemExit(f"protoc failed: {' '.join(args)}")


def generate(out: Path) -> list[Path]:
    """Generate into `out` (mirroring the repository layout); return the generated paths."""
    protos = sorted(API.rglob("*.proto"))
    rel = [str(p.relative_to(ROOT)) for p in protos]
    messages = f"--mypy_out=quiet:{out}"
    protoc_run(plugin("protoc-gen-mypy"), f"--python_out={out}", messages, *rel)
    with_services = [r for r, p in zip(rel, protos, strict=True) if "\nservice " in p.read_text()]
    services = f"--mypy_grpc_out=quiet,generate_concrete_servicer_stubs:{out}"
    protoc_run(plugin("protoc-gen-mypy_grpc"), f"--grpc_python_out={out}", services, *with_services)
    return sorted(p.relative_to(out) for p in out.rglob("*.py*"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale generated files")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generated = generate(Path(tmp))
        stale = [
            g
            for g in generated
            if not (ROOT / g).exists() or not filecmp.cmp(Path(tmp) / g, ROOT / g, False)
        ]
        if args.check:
            for g in stale:
                print(f"stale: {g}")
            return 1 if stale else 0
        for g in generated:
            shutil.copyfile(Path(tmp) / g, ROOT / g)
        print(f"generated {len(generated)} files ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
