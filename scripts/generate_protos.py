"""Regenerate the Python modules of armada_core/api from its .proto files.

Run after editing any .proto file, with the project's environment:

    .venv/bin/python scripts/generate_protos.py

The generated *_pb2.py, *_pb2.pyi and *_pb2_grpc.py files are committed so that installing
armada-core needs no code generation; tests/api/test_generated_up_to_date.py fails when they
are stale. `--check` reports stale files without writing.
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


def generate(out: Path) -> list[Path]:
    """Generate into `out` (mirroring the repository layout); return the generated paths."""
    protos = sorted(API.rglob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    rel = [str(p.relative_to(ROOT)) for p in protos]
    args = ["protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={out}", f"--pyi_out={out}"]
    if protoc.main([*args, *rel]) != 0:
        raise SystemExit("protoc failed")
    with_services = [r for r, p in zip(rel, protos, strict=True) if "\nservice " in p.read_text()]
    if (
        protoc.main(
            ["protoc", f"-I{ROOT}", f"-I{include}", f"--grpc_python_out={out}", *with_services]
        )
        != 0
    ):
        raise SystemExit("protoc (grpc) failed")
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
