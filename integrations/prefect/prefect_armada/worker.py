"""`ArmadaWorker`: runs each flow run of an `armada` work pool as an Armada job.

The job's container runs the flow run (`python -m prefect.engine` with the flow run id and
the API URL in its environment, as Prefect's process worker does). The worker reports
`<queue>:<job set>:<job id>` as the infrastructure id, follows the job on its event stream,
cancels it when the flow run is cancelled (also once it has started), and marks the flow run
Crashed with the reason when the job fails because of the infrastructure or is rejected.

    prefect work-pool create my-armada-pool --type armada
    prefect worker start --pool my-armada-pool --type armada
"""

from __future__ import annotations

import contextlib
import os
import shlex
from typing import TYPE_CHECKING, Any

import anyio.abc
from prefect.client.schemas.objects import StateType
from prefect.exceptions import InfrastructureNotFound
from prefect.states import Crashed
from prefect.utilities.engine import propose_state
from prefect.workers.base import (
    BaseJobConfiguration,
    BaseVariables,
    BaseWorker,
    BaseWorkerResult,
)
from pydantic import Field

from armada_core.api import submit_pb2
from armada_core.client import JobResult, job_item
from armada_core.client import NotFound as ArmadaNotFound
from armada_core.retry import Outcome, map_outcome

from ._identity import RunIdentity, flow_run_identity
from .credentials import ArmadaCredentials
from .jobs import submit_idempotently, wait_for_jobs

if TYPE_CHECKING:
    from uuid import UUID

    from prefect.client.schemas.objects import Flow as APIFlow
    from prefect.client.schemas.objects import FlowRun, WorkPool
    from prefect.client.schemas.responses import DeploymentResponse

CONTAINER_NAME = "prefect-job"


def _credentials(configured: ArmadaCredentials | None) -> ArmadaCredentials:
    return configured or ArmadaCredentials(address=os.environ.get("ARMADA_URL",
                                                                  "localhost:50051"))


def infrastructure_id(queue: str, job_set_id: str, job_id: str) -> str:
    return f"{queue}:{job_set_id}:{job_id}"


def parse_infrastructure_id(value: str) -> tuple[str, str, str]:
    """(queue, job set, job id) from `infrastructure_id`; queues have no ':'."""
    queue, _, rest = value.partition(":")
    job_set_id, _, job_id = rest.rpartition(":")
    if not (queue and job_set_id and job_id):
        raise ValueError(f"not an Armada infrastructure id: {value!r}")
    return queue, job_set_id, job_id


class ArmadaWorkerJobConfiguration(BaseJobConfiguration):
    """How one flow run becomes an Armada job (filled from the work pool's base job template
    and the deployment's job variables)."""

    credentials: ArmadaCredentials | None = Field(default=None)
    queue: str = Field(default="prefect")
    job_set_id: str | None = Field(default=None)
    image: str = Field(default="prefecthq/prefect:3-latest")
    cpu: str = Field(default="1")
    memory: str = Field(default="1Gi")
    gpus: int = Field(default=0)
    priority: float = Field(default=0.0)
    priority_class: str | None = Field(default=None)
    namespace: str = Field(default="default")
    annotations: dict[str, str] = Field(default_factory=dict)
    retry_policy: str | None = Field(default=None)
    working_dir: str | None = Field(default=None)
    pod_spec: dict[str, Any] | None = Field(default=None)
    stream_output: bool = Field(default=True)
    job_watch_timeout_seconds: float | None = Field(default=None)
    cancellation_check_seconds: float = Field(default=5.0)

    def prepare_for_flow_run(
        self,
        flow_run: FlowRun,
        deployment: DeploymentResponse | None = None,
        flow: APIFlow | None = None,
        work_pool: WorkPool | None = None,
        worker_name: str | None = None,
        worker_id: UUID | None = None,
    ) -> None:
        super().prepare_for_flow_run(flow_run, deployment, flow, work_pool, worker_name,
                                     worker_id=worker_id)
        if not self.job_set_id:
            self.job_set_id = f"prefect-{flow_run.id}"

    @staticmethod
    def _base_flow_run_command() -> str:
        """The flow run runs through `python -m prefect.engine`, like the process worker."""
        return "python -m prefect.engine"

    def build_pod_spec(self) -> dict[str, Any]:
        """The job's pod: `pod_spec` (if given) with the flow run container filled in."""
        spec: dict[str, Any] = dict(self.pod_spec or {})
        containers = [dict(c) for c in spec.get("containers") or [{}]]
        main = next((c for c in containers if c.get("name") == CONTAINER_NAME), containers[0])
        main.setdefault("name", CONTAINER_NAME)
        main.setdefault("image", self.image)
        main["command"] = shlex.split(self.command or self._base_flow_run_command())
        main.pop("args", None)
        env = [e for e in main.get("env") or [] if e.get("name") not in self.env]
        main["env"] = env + [{"name": k, "value": v} for k, v in self.env.items()
                             if v is not None]
        if self.working_dir:
            main["workingDir"] = self.working_dir
        if "resources" not in main:
            amounts: dict[str, Any] = {"cpu": self.cpu, "memory": self.memory}
            if self.gpus:
                amounts["nvidia.com/gpu"] = str(self.gpus)
            main["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
        spec["containers"] = containers
        spec.setdefault("restartPolicy", "Never")
        return spec

    def items(self, identity: RunIdentity, generation: int
              ) -> list[submit_pb2.JobSubmitRequestItem]:
        # Prefect's labels (flow run id, deployment, work pool, ...) become annotations:
        # their values need not be valid Kubernetes label values.
        annotations = {**self.labels, **self.annotations}
        common: dict[str, Any] = dict(
            priority=self.priority, namespace=self.namespace,
            priority_class=self.priority_class, client_id=identity.client_id(generation),
            annotations=annotations, retry_policy=self.retry_policy,
            external_job_uri=identity.external_job_uri(generation))
        return [job_item(self.build_pod_spec(), **common)]


class ArmadaWorkerVariables(BaseVariables):
    """The job variables a deployment may set for the `armada` work pool."""

    credentials: ArmadaCredentials | None = Field(
        default=None, description="The Armada server; default ARMADA_URL or localhost:50051.")
    queue: str = Field(default="prefect", description="The Armada queue to submit to.")
    job_set_id: str | None = Field(
        default=None, description="Job set of the flow run's job; default prefect-<flow run id>.")
    image: str = Field(default="prefecthq/prefect:3-latest",
                       description="Image of the flow run container.")
    cpu: str = Field(default="1", description="CPU request and limit.")
    memory: str = Field(default="1Gi", description="Memory request and limit.")
    gpus: int = Field(default=0, description="nvidia.com/gpu request and limit.")
    priority: float = Field(default=0.0, description="Lower runs first within the queue.")
    priority_class: str | None = Field(default=None, description="The pod's priority class.")
    namespace: str = Field(default="default", description="Namespace of the job.")
    annotations: dict[str, str] = Field(default_factory=dict,
                                        description="Extra annotations on the job.")
    retry_policy: str | None = Field(
        default=None, description="Server-side retry policies for the flow run's job.")
    working_dir: str | None = Field(default=None, description="The container's directory.")
    pod_spec: dict[str, Any] | None = Field(
        default=None, description="A full PodSpec to start from; the container named "
                                  "'prefect-job' (or the first) runs the flow run.")
    stream_output: bool = Field(default=True,
                                description="Copy the job's output into the worker's log.")
    job_watch_timeout_seconds: float | None = Field(
        default=None, description="Cancel the job if it has not ended by then.")
    cancellation_check_seconds: float = Field(
        default=5.0, description="How often a running flow run is checked for cancellation.")


class ArmadaWorkerResult(BaseWorkerResult):
    """The end of a flow run's Armada job."""


class ArmadaWorker(BaseWorker[ArmadaWorkerJobConfiguration, ArmadaWorkerVariables,
                              ArmadaWorkerResult]):
    """Runs flow runs as Armada jobs."""

    type = "armada"
    job_configuration = ArmadaWorkerJobConfiguration
    job_configuration_variables = ArmadaWorkerVariables
    _description = "Run each flow run as a job on an Armada batch scheduler."
    _display_name = "Armada"

    async def run(self, flow_run: FlowRun, configuration: ArmadaWorkerJobConfiguration,
                  task_status: anyio.abc.TaskStatus[Any] | None = None) -> ArmadaWorkerResult:
        logger = self.get_flow_run_logger(flow_run)
        credentials = _credentials(configuration.credentials)
        queue, job_set_id = configuration.queue, configuration.job_set_id or "prefect"
        identity = flow_run_identity(str(flow_run.id))
        async with credentials.get_async_client() as client:
            job_ids, _ = await submit_idempotently(
                client, queue, job_set_id, lambda g: configuration.items(identity, g),
                identity, logger)
        pid = infrastructure_id(queue, job_set_id, job_ids[0])
        if task_status is not None:
            task_status.started(pid)
        cancelled_by_prefect: list[bool] = []
        results = await wait_for_jobs(
            credentials, queue, job_set_id, job_ids, logger=self._logger,
            flow_run_id=str(flow_run.id), stream_logs=configuration.stream_output,
            cancellation_check=configuration.cancellation_check_seconds,
            timeout=configuration.job_watch_timeout_seconds,
            on_cancel_requested=lambda: cancelled_by_prefect.append(True))
        return await self._report(flow_run, pid, results, bool(cancelled_by_prefect))

    async def _report(self, flow_run: FlowRun, pid: str, results: dict[str, JobResult],
                      cancelled_by_prefect: bool) -> ArmadaWorkerResult:
        """Turn the job's end into the flow run's state where the flow run itself could not
        report it (crashed infrastructure, rejection, cancellation)."""
        logger = self.get_flow_run_logger(flow_run)
        report = map_outcome([r.job_end() for r in results.values()])
        exit_codes = [code for r in results.values() for code in r.exit_codes.values() if code]
        if report.outcome is Outcome.SUCCEEDED:
            await self._crash_if_unfinished(flow_run, "the flow run's Armada job ended "
                                                      "without reporting a final state")
            return ArmadaWorkerResult(identifier=pid, status_code=0)
        if report.outcome is Outcome.CANCELLED:
            message = ("Flow run cancelled; its Armada job was cancelled." if cancelled_by_prefect
                       else f"The flow run's Armada job was cancelled outside Prefect.\n"
                            f"{report.summary}")
            current = await self.client.read_flow_run(flow_run.id)
            await self._mark_flow_run_as_cancelled(current, state_updates={"message": message})
            logger.info(message)
            return ArmadaWorkerResult(identifier=pid, status_code=0)
        if report.outcome is Outcome.USER_ERROR:
            # The flow run process failed; it has reported its own state (Failed) unless it
            # could not, in which case the non-zero status makes the base worker crash it.
            return ArmadaWorkerResult(identifier=pid,
                                      status_code=exit_codes[0] if exit_codes else 1)
        await self._propose_crashed_state(flow_run, report.summary)
        return ArmadaWorkerResult(identifier=pid, status_code=exit_codes[0] if exit_codes else -1)

    async def _crash_if_unfinished(self, flow_run: FlowRun, message: str) -> None:
        current = await self.client.read_flow_run(flow_run.id)
        if current.state is None or not current.state.is_final():
            await propose_state(self.client, Crashed(message=message), flow_run_id=flow_run.id)

    async def kill_infrastructure(self, infrastructure_pid: str,
                                  configuration: ArmadaWorkerJobConfiguration,
                                  grace_seconds: int = 30) -> None:
        """Cancel the flow run's job (the executor stops the pod with its grace period)."""
        queue, job_set_id, job_id = parse_infrastructure_id(infrastructure_pid)
        async with _credentials(configuration.credentials).get_async_client() as client:
            try:
                states = await client.get_job_status([job_id])
                if states.get(job_id, submit_pb2.UNKNOWN) == submit_pb2.UNKNOWN:
                    raise InfrastructureNotFound(f"Armada job {job_id} does not exist")
                await client.cancel_jobs(queue, job_set_id, [job_id],
                                         reason="Prefect flow run cancelled")
            except ArmadaNotFound as e:
                raise InfrastructureNotFound(str(e)) from e

    async def _cancel_run(self, flow_run_id: UUID) -> None:
        """Prefect's base worker cancels only runs that have not started; a started flow run
        of this worker's pool is cancelled too, by cancelling its job."""
        flow_run = await self.client.read_flow_run(flow_run_id)
        if flow_run.start_time is None or not flow_run.infrastructure_pid:
            await super()._cancel_run(flow_run_id)
            return
        configuration = await self.job_configuration.resolve_for_flow_run(
            flow_run, client=self.client, work_pool=self.work_pool, worker_name=self.name,
            worker_id=self.backend_id)
        with contextlib.suppress(InfrastructureNotFound):
            await self.kill_infrastructure(flow_run.infrastructure_pid, configuration)
        if flow_run.state is None or flow_run.state.type != StateType.CANCELLED:
            await self._mark_flow_run_as_cancelled(
                flow_run, state_updates={"message": "Flow run cancelled; its Armada job was "
                                                    "cancelled."})
