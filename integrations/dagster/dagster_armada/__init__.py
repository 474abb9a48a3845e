"""Dagster integration that runs assets, ops and Pipes sessions as Armada jobs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dagster-armada")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
