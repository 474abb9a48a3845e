"""Prefect integration that runs tasks and flow runs as Armada jobs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prefect-armada")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
