"""Airflow provider that runs tasks as Armada jobs and gangs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("airflow-armada")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
