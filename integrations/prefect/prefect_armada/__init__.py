"""Prefect integration that runs tasks and flow runs as Armada jobs, gangs and elastic pod
groups.

Importing the package registers the blocks and the `armada` worker type with Prefect (the
`prefect.collections` entry point imports it).
"""

from importlib.metadata import PackageNotFoundError, version

from .credentials import ArmadaCredentials
from .exceptions import (
    ArmadaInfrastructureError,
    ArmadaJobCancelled,
    ArmadaJobError,
    ArmadaJobRejected,
    ArmadaUserError,
)
from .flows import run_armada_job, run_armada_job_async
from .jobs import ArmadaJob, ArmadaJobRun, ArmadaRole
from .retries import retry_infrastructure_failures
from .tasks import (
    cancel_armada_job,
    cancel_armada_job_async,
    execute_armada_job,
    execute_armada_job_async,
    submit_armada_job,
    submit_armada_job_async,
    wait_for_armada_job,
    wait_for_armada_job_async,
)
from .worker import ArmadaWorker

try:
    __version__ = version("prefect-armada")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = [
    "ArmadaCredentials",
    "ArmadaInfrastructureError",
    "ArmadaJob",
    "ArmadaJobCancelled",
    "ArmadaJobError",
    "ArmadaJobRejected",
    "ArmadaJobRun",
    "ArmadaRole",
    "ArmadaUserError",
    "ArmadaWorker",
    "cancel_armada_job",
    "cancel_armada_job_async",
    "execute_armada_job",
    "execute_armada_job_async",
    "retry_infrastructure_failures",
    "run_armada_job",
    "run_armada_job_async",
    "submit_armada_job",
    "submit_armada_job_async",
    "wait_for_armada_job",
    "wait_for_armada_job_async",
]
