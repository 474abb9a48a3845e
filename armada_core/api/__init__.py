"""Armada's public API (proto package `api`), wire-compatible with upstream Armada.

The .proto files beside this module are the source; the *_pb2 modules are generated from them
by scripts/generate_protos.py.
"""
