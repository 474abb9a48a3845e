"""Which Dagster instance submitted a job: a digest of the instance's run storage, stamped on
every job the integration submits (`INSTANCE_ANNOTATION`).

The reaper sensor reads runs from its own instance only; a run another instance holds is
missing there, and would read as deleted. Jobs carry their instance so that a sensor reaps
only its own instance's jobs, and two instances may share one queue.
"""

from __future__ import annotations

import hashlib
import os

from dagster import DagsterInstance

#: The digest of the run storage of the Dagster instance that submitted the job.
INSTANCE_ANNOTATION = "dagster.io/instance"


def instance_digest(instance: DagsterInstance) -> str:
    """A stable digest of the instance's run storage (its class and configuration, as every
    process of a deployment loads it from dagster.yaml); an ephemeral instance, which no
    other process shares, is told apart by its process and storage object."""
    try:
        data = instance.get_ref().run_storage_data
    except Exception:  # an ephemeral instance has no reference to share
        data = None
    if data is None:
        source = f"ephemeral:{os.getpid()}:{id(instance.run_storage)}"
    else:
        source = f"{data.module_name}:{data.class_name}:{data.config_yaml}"
    return hashlib.sha256(source.encode()).hexdigest()[:20]
