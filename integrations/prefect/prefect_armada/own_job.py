"""The flow run's own Armada job, seen from inside the flow run's process.

A flow run that a worker of an `armada` pool runs is itself an Armada job. When the flow run is
cancelled, two things race to the Armada server: the worker's cancel of that job (its watch
checks every `cancellation_check_seconds`) and the end of the flow process, which comes early
when a task of the flow notices the cancellation first: the task cancels its own jobs, hands
back Cancelled, and the process exits with an error. If that exit reaches the server first,
the job ends FAILED, and a retry policy may run a cancelled flow run again. So before a task
hands back a cancellation of its flow run, the process has its own job cancelled: the cancel is
acknowledged before the process can exit, and the server lets an acknowledged cancel win over
whatever the process reports afterwards.
"""

from __future__ import annotations

import logging
import os
from uuid import UUID

from armada_core.client import ArmadaError

from .credentials import ArmadaCredentials

#: The cancel reason of a flow run's job, the same whoever sends it (the worker's watch or
#: the flow process).
FLOW_RUN_CANCELLED = "Prefect flow run cancelled"
#: Set by the worker in the environment of the flow run's job (as Prefect's workers do).
FLOW_RUN_VARIABLE = "PREFECT__FLOW_RUN_ID"
#: Set by armada-server's local executor: the job the process runs.
JOB_VARIABLE = "ARMADA_JOB_ID"


async def cancel_own_job(
    credentials: ArmadaCredentials, logger: logging.Logger | logging.LoggerAdapter
) -> str | None:
    """Cancel the Armada job this process runs as, if it runs a flow run (as an `armada`
    pool's job) that is cancelling or cancelled. Returns the job's id, or None when there was
    nothing to cancel or it could not be done (the worker's watch still cancels the job)."""
    flow_run_id = os.environ.get(FLOW_RUN_VARIABLE, "")
    try:
        flow_run_uuid = UUID(flow_run_id)
    except ValueError:
        return None  # not a flow run's process (e.g. a flow called in-process)
    from prefect.client.orchestration import get_client

    # The worker module imports the jobs module, which calls this.
    from .worker import parse_infrastructure_id

    try:
        async with get_client() as prefect:
            flow_run = await prefect.read_flow_run(flow_run_uuid)
    except Exception as e:  # the API may be briefly down: the worker's watch still cancels
        logger.warning("Could not read flow run %s to cancel its Armada job: %s", flow_run_id, e)
        return None
    state = flow_run.state
    if state is None or not (state.is_cancelling() or state.is_cancelled()):
        return None
    try:
        queue, job_set_id, job_id = parse_infrastructure_id(flow_run.infrastructure_pid or "")
    except ValueError:
        return None  # not run by an `armada` pool's worker
    if os.environ.get(JOB_VARIABLE, job_id) != job_id:
        return None  # this process is not that job
    logger.info(
        "Cancelling Armada job %s of flow run %s before its process ends: the flow run was "
        "cancelled",
        job_id,
        flow_run_id,
    )
    try:
        async with credentials.get_async_client() as client:
            await client.cancel_jobs(queue, job_set_id, [job_id], reason=FLOW_RUN_CANCELLED)
    except ArmadaError as e:
        logger.warning("Could not cancel Armada job %s of flow run %s: %s", job_id, flow_run_id, e)
        return None
    return job_id
