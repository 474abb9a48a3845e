"""The `armada` command: armadactl-style access to an Armada server from a shell."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
