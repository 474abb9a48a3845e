"""The `armada-server` command."""

from __future__ import annotations

import argparse
import sys

from armada_server import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="armada-server",
        description="Standalone server speaking Armada's public gRPC API.",
    )
    parser.add_argument("--version", action="version", version=f"armada-server {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    print("armada-server: serving is not available in this version yet; see --version",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
