"""Run Dagster assets, ops, Pipes sessions and whole runs as Armada jobs, gangs and elastic
pod groups."""

from armada_core.client import JobLogFollower

from .factories import armada_asset, armada_op
from .job import (
    ArmadaJobRun,
    StepIdentity,
    container_pod_spec,
    execute_armada_job,
    step_identity,
    task_identity,
)
from .launcher import ArmadaRunLauncher, run_task_identity
from .outcome import ArmadaJobDisappeared, failure_metadata, raise_for_outcome
from .pipes import PipesArmadaClient, PipesArmadaLogsMessageReader
from .reaping import armada_reaper_sensor
from .resource import ArmadaResource

__all__ = [
    "ArmadaJobDisappeared",
    "ArmadaJobRun",
    "ArmadaResource",
    "ArmadaRunLauncher",
    "JobLogFollower",
    "PipesArmadaClient",
    "PipesArmadaLogsMessageReader",
    "StepIdentity",
    "armada_asset",
    "armada_op",
    "armada_reaper_sensor",
    "container_pod_spec",
    "execute_armada_job",
    "failure_metadata",
    "raise_for_outcome",
    "run_task_identity",
    "step_identity",
    "task_identity",
]
