"""Standalone server speaking Armada's public gRPC API."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("armada-server")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
