"""Armada-style batch scheduling core: API, scheduler, job lifecycle, retries and client."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("armada-core")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
