"""`ArmadaWorker`: runs each flow run of an `armada` work pool as an Armada job, and keeps
watching the pool's flow runs whose worker is gone.

The job's container runs the flow run (`python -m prefect.engine` with the flow run id and
the API URL in its environment, as Prefect's process worker does): on the local executor with
the worker's own interpreter, on Kubernetes with the image's (`flow_run_command`). The worker
reports `<queue>:<job set>:<job id>` as the infrastructure id, follows the job on its event
stream (logging why it still waits), cancels it when the flow run is cancelled (also once it has
started), and marks the flow run Crashed with the reason when the job fails because of the
infrastructure or is rejected.

Takeover: on start and then every `takeover_interval_seconds` (default: the heartbeat
interval), each worker reads the pool's online workers and its unfinished flow runs that have
an Armada infrastructure id, and watches those it owns that nobody in its process watches
(see `flow_run_owner`). Stopping or killing a worker leaves its jobs running; the flow runs'
new owner follows them to their end, cancels them when their flow runs are cancelled, and
reports the flow runs' states as the submitting worker would have. Each round also runs the
reaper (`reaping.py`): the jobs of flow runs that ended behind the workers' back are cancelled.

    prefect work-pool create my-armada-pool --type armada
    prefect worker start --pool my-armada-pool --type armada
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import hashlib
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
    WorkPoolFilter,
    WorkPoolFilterName,
)
from prefect.client.schemas.objects import StateType, WorkerStatus
from prefect.exceptions import InfrastructureNotFound, ObjectNotFound
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
from armada_core.client.lifecycle import TaskEnd, asubmit_or_reattach
from armada_core.client.reattach import LIVE_STATES
from armada_core.retry import Outcome, map_outcome

from ._identity import flow_run_identity
from .credentials import ArmadaCredentials
from .jobs import await_task
from .reaping import WorkerReaper

if TYPE_CHECKING:
    from uuid import UUID

    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.objects import Flow as APIFlow
    from prefect.client.schemas.objects import FlowRun, WorkPool
    from prefect.client.schemas.responses import DeploymentResponse

CONTAINER_NAME = "prefect-job"
#: The flow run label naming the worker that runs it: set by Prefect's base worker when it
#: submits the flow run, and by a worker that takes its watch over.
WORKER_LABEL = "prefect.worker.name"
#: A flow run label's value: Prefect's labels are JSON scalars (WORKER_LABEL's is a name).
LabelValue = str | int | float | bool
#: Flow run states in which a job may still need a watch.
UNFINISHED = (StateType.PENDING, StateType.RUNNING, StateType.CANCELLING)
#: The kind of executor that runs the pool's jobs (the work pool variable `executor`).
ExecutorKind = Literal["local", "kubernetes"]


def flow_run_command(executor: ExecutorKind) -> str:
    """The command that runs a flow run when the deployment sets none.

    The local executor runs a job as a process on its own machine and ignores the image, so
    the image's `python` would be whatever `python` that machine has, often one without
    Prefect: the worker's own interpreter has it (the worker runs beside the executor).
    Kubernetes runs the image: its `python`."""
    python = shlex.quote(sys.executable) if executor == "local" else "python"
    return f"{python} -m prefect.engine"


def _credentials(configured: ArmadaCredentials | None) -> ArmadaCredentials:
    return configured or ArmadaCredentials(address=os.environ.get("ARMADA_URL", "localhost:50051"))


def infrastructure_id(queue: str, job_set_id: str, job_id: str) -> str:
    return f"{queue}:{job_set_id}:{job_id}"


def parse_infrastructure_id(value: str) -> tuple[str, str, str]:
    """(queue, job set, job id) from `infrastructure_id`; queues have no ':'."""
    queue, _, rest = value.partition(":")
    job_set_id, _, job_id = rest.rpartition(":")
    if not (queue and job_set_id and job_id):
        raise ValueError(f"not an Armada infrastructure id: {value!r}")
    return queue, job_set_id, job_id


def _rank(flow_run_id: str, worker: str) -> str:
    return hashlib.sha256(f"{flow_run_id}/{worker}".encode()).hexdigest()


def flow_run_owner(
    flow_run_id: str, recorded: LabelValue | None, online: Sequence[str]
) -> str | None:
    """The worker that watches a flow run's job, from the pool's online workers.

    The worker recorded on the flow run (`WORKER_LABEL`: the one that submitted it, or the
    last to take it over) keeps it while it is online; otherwise rendezvous hashing of the flow
    run id over the online workers picks one, which records itself. Every worker computes the
    same answer from the same membership, so a flow run has one owner, and a change of
    membership moves only the flow runs of workers that went away.
    """
    if isinstance(recorded, str) and recorded in online:
        return recorded
    if not online:
        return None
    return max(sorted(online), key=lambda worker: _rank(flow_run_id, worker))


@dataclass
class _Watch:
    """This process's watch of a flow run's job."""

    task: asyncio.Task[TaskEnd] | None = None
    #: Set when another worker owns the flow run now: the watch stops without reporting.
    released_to: str | None = None

    def release(self, owner: str) -> None:
        self.released_to = owner
        if self.task is not None:
            self.task.cancel()


class ArmadaWorkerJobConfiguration(BaseJobConfiguration):
    """How one flow run becomes an Armada job (filled from the work pool's base job template
    and the deployment's job variables)."""

    credentials: ArmadaCredentials | None = Field(default=None)
    executor: ExecutorKind = Field(default="local")
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
        # Before Prefect's base, which would fill in its own default command.
        self.command = self.command or flow_run_command(self.executor)
        super().prepare_for_flow_run(
            flow_run, deployment, flow, work_pool, worker_name, worker_id=worker_id
        )
        if not self.job_set_id:
            self.job_set_id = f"prefect-{flow_run.id}"

    def build_pod_spec(self) -> dict[str, Any]:
        """The job's pod: `pod_spec` (if given) with the flow run container filled in."""
        spec: dict[str, Any] = dict(self.pod_spec or {})
        containers = [dict(c) for c in spec.get("containers") or [{}]]
        main = next((c for c in containers if c.get("name") == CONTAINER_NAME), containers[0])
        main.setdefault("name", CONTAINER_NAME)
        main.setdefault("image", self.image)
        main["command"] = shlex.split(self.command or flow_run_command(self.executor))
        main.pop("args", None)
        env = [e for e in main.get("env") or [] if e.get("name") not in self.env]
        main["env"] = env + [{"name": k, "value": v} for k, v in self.env.items() if v is not None]
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

    def items(self, client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
        """The flow run's job under `client_id` (the lifecycle adds the external job URI and
        the task annotations)."""
        # Prefect's labels (flow run id, deployment, work pool, the submitting worker's name,
        # ...) become annotations: their values need not be valid Kubernetes label values.
        annotations = {**self.labels, **self.annotations}
        return [
            job_item(
                self.build_pod_spec(),
                priority=self.priority,
                namespace=self.namespace,
                priority_class=self.priority_class,
                client_id=client_id,
                annotations=annotations,
                retry_policy=self.retry_policy,
            )
        ]


class ArmadaWorkerVariables(BaseVariables):
    """The job variables a deployment may set for the `armada` work pool."""

    credentials: ArmadaCredentials | None = Field(
        default=None, description="The Armada server; default ARMADA_URL or localhost:50051."
    )
    executor: ExecutorKind = Field(
        default="local",
        description="The kind of executor that runs the jobs, which decides the default "
        "command: 'local' (armada-server's own: a process on the executor's machine, run with "
        "the worker's Python, so run the worker there) or 'kubernetes' (the image's python).",
    )
    queue: str = Field(default="prefect", description="The Armada queue to submit to.")
    job_set_id: str | None = Field(
        default=None, description="Job set of the flow run's job; default prefect-<flow run id>."
    )
    image: str = Field(
        default="prefecthq/prefect:3-latest", description="Image of the flow run container."
    )
    cpu: str = Field(default="1", description="CPU request and limit.")
    memory: str = Field(default="1Gi", description="Memory request and limit.")
    gpus: int = Field(default=0, description="nvidia.com/gpu request and limit.")
    priority: float = Field(default=0.0, description="Lower runs first within the queue.")
    priority_class: str | None = Field(default=None, description="The pod's priority class.")
    namespace: str = Field(default="default", description="Namespace of the job.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Extra annotations on the job."
    )
    retry_policy: str | None = Field(
        default=None, description="Server-side retry policies for the flow run's job."
    )
    working_dir: str | None = Field(default=None, description="The container's directory.")
    pod_spec: dict[str, Any] | None = Field(
        default=None,
        description="A full PodSpec to start from; the container named "
        "'prefect-job' (or the first) runs the flow run.",
    )
    stream_output: bool = Field(
        default=True, description="Copy the job's output into the worker's log."
    )
    job_watch_timeout_seconds: float | None = Field(
        default=None, description="Cancel the job if it has not ended by then."
    )
    cancellation_check_seconds: float = Field(
        default=5.0, description="How often a running flow run is checked for cancellation."
    )


class _WatchEnds:
    """When this worker's watches ended. A takeover round reads the pool's unfinished flow
    runs, and a watch that ends meanwhile has reported its flow run's end: the round's list
    is stale for that flow run and must not start a second watch of it."""

    def __init__(self) -> None:
        self._at: dict[UUID, float] = {}

    def add(self, flow_run_id: UUID) -> None:
        self._at[flow_run_id] = time.monotonic()

    def since(self, moment: float) -> set[UUID]:
        """The flow runs whose watch ended at or after `moment`; earlier ends are forgotten
        (a list read after them shows their flow runs' ends)."""
        self._at = {f: at for f, at in self._at.items() if at >= moment}
        return set(self._at)


async def unfinished_flow_runs(client: PrefectClient, work_pool_name: str) -> list[FlowRun]:
    """The work pool's flow runs that have not ended, every page."""
    flow_runs: list[FlowRun] = []
    while True:
        page = await client.read_flow_runs(
            work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[work_pool_name])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=list(UNFINISHED)))
            ),
            limit=200,
            offset=len(flow_runs),
        )
        flow_runs += page
        if len(page) < 200:
            return flow_runs


class ArmadaWorkerResult(BaseWorkerResult):
    """The end of a flow run's Armada job."""


class ArmadaWorker(
    BaseWorker[ArmadaWorkerJobConfiguration, ArmadaWorkerVariables, ArmadaWorkerResult]
):
    """Runs flow runs as Armada jobs, and takes over the watch of the pool's flow runs whose
    worker is gone."""

    type = "armada"
    job_configuration = ArmadaWorkerJobConfiguration
    job_configuration_variables = ArmadaWorkerVariables
    _description = "Run each flow run as a job on an Armada batch scheduler."
    _display_name = "Armada"

    def __init__(
        self, *args: Any, takeover_interval_seconds: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        #: How often the pool's flow runs are checked for watches to take over.
        self.takeover_interval_seconds = float(
            takeover_interval_seconds or self.heartbeat_interval_seconds
        )
        self._watches: dict[UUID, _Watch] = {}
        self._watch_ends = _WatchEnds()
        #: Flow runs without an infrastructure id whose job was looked for and not found.
        self._nothing_to_watch: set[UUID] = set()
        self._takeover_scope: anyio.CancelScope | None = None
        #: Cancels the jobs of flow runs that ended behind the workers' back (`reaping`).
        self.reaper = WorkerReaper(self)

    async def setup(self) -> None:
        await super().setup()
        assert self._runs_task_group is not None
        self._takeover_scope = anyio.CancelScope()
        self._runs_task_group.start_soon(self._takeover_loop, self._takeover_scope)

    async def teardown(self, *exc_info: Any) -> None:
        if self._takeover_scope is not None:
            self._takeover_scope.cancel()
        await super().teardown(*exc_info)

    # --- running a flow run -----------------------------------------------------------------

    async def run(
        self,
        flow_run: FlowRun,
        configuration: ArmadaWorkerJobConfiguration,
        task_status: anyio.abc.TaskStatus[Any] | None = None,
    ) -> ArmadaWorkerResult:
        logger = self.get_flow_run_logger(flow_run)
        queue, job_set_id = configuration.queue, configuration.job_set_id or "prefect"
        earlier = self._watches.pop(flow_run.id, None)
        if earlier is not None:  # a takeover watch of an earlier run of this flow run
            earlier.release(self.name)
        watch = self._watches[flow_run.id] = _Watch()
        logger.info(
            "The flow run's Armada job runs: %s (executor %s)",
            configuration.command,
            configuration.executor,
        )
        try:
            async with _credentials(configuration.credentials).get_async_client() as client:
                submission = await asubmit_or_reattach(
                    client,
                    queue,
                    job_set_id,
                    flow_run_identity(flow_run),
                    configuration.items,
                    log=logger.info,
                )
            pid = infrastructure_id(queue, job_set_id, submission.job_ids[0])
            if task_status is not None:
                task_status.started(pid)
            result = await self._watch(flow_run, configuration, pid, watch)
        finally:
            self._end_watch(flow_run.id, watch)
        # Handed over to another worker: it reports the flow run's end.
        return result or ArmadaWorkerResult(identifier=pid, status_code=0)

    async def _watch(
        self,
        flow_run: FlowRun,
        configuration: ArmadaWorkerJobConfiguration,
        pid: str,
        watch: _Watch,
    ) -> ArmadaWorkerResult | None:
        """Follow the flow run's job to its end (cancelling it if the flow run is cancelled)
        and report the flow run's state; None if the watch was handed to another worker."""
        queue, job_set_id, job_id = parse_infrastructure_id(pid)
        watch.task = asyncio.create_task(
            await_task(
                _credentials(configuration.credentials),
                queue,
                job_set_id,
                [job_id],
                logger=self._logger,
                flow_run_id=str(flow_run.id),
                stream_logs=configuration.stream_output,
                cancellation_check=configuration.cancellation_check_seconds,
                timeout=configuration.job_watch_timeout_seconds,
                waiting_log=self.get_flow_run_logger(flow_run).info,
                # The job runs the flow run; when the worker stops, another worker takes over.
                cancel_on_interrupt=False,
            )
        )
        if watch.released_to is not None:
            watch.task.cancel()
        try:
            end = await watch.task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if watch.released_to is None or (current is not None and current.cancelling()):
                raise
            self.get_flow_run_logger(flow_run).info(
                "Worker %r stops watching Armada job %s: worker %r watches it now",
                self.name,
                job_id,
                watch.released_to,
            )
            return None
        return await self._report(flow_run, pid, end.results, bool(end.cancelled))

    async def _report(
        self, flow_run: FlowRun, pid: str, results: dict[str, JobResult], cancelled_by_prefect: bool
    ) -> ArmadaWorkerResult | None:
        """Turn the job's end into the flow run's state where the flow run itself could not
        report it (crashed infrastructure, rejection, cancellation). Only by the flow run's
        worker (so two watches during a change of owner report once), and never over a
        final state (so reporting again changes nothing)."""
        logger = self.get_flow_run_logger(flow_run)
        current = await self.client.read_flow_run(flow_run.id)
        recorded = current.labels.get(WORKER_LABEL)
        if recorded not in (None, self.name) or current.infrastructure_pid not in (None, pid):
            logger.info(
                "Worker %r leaves the end of Armada job %s to worker %r",
                self.name,
                parse_infrastructure_id(pid)[2],
                recorded,
            )
            return None
        report = map_outcome([r.job_end() for r in results.values()])
        exit_codes = [code for r in results.values() for code in r.exit_codes.values() if code]
        status_code = exit_codes[0] if exit_codes else 0
        state = current.state
        cancelling = state is not None and state.is_cancelling()
        if cancelling or report.outcome is Outcome.CANCELLED:
            if state is not None and state.type == StateType.CANCELLED:
                return ArmadaWorkerResult(identifier=pid, status_code=0)  # reported already
            message = (
                "Flow run cancelled; its Armada job was cancelled."
                if cancelled_by_prefect or cancelling
                else f"The flow run's Armada job was cancelled outside Prefect.\n{report.summary}"
            )
            await self._mark_flow_run_as_cancelled(current, state_updates={"message": message})
            logger.info(message)
            return ArmadaWorkerResult(identifier=pid, status_code=0)
        if report.outcome is Outcome.SUCCEEDED:
            if state is None or not state.is_final():
                await propose_state(
                    self.client,
                    Crashed(
                        message="the flow run's Armada job ended without reporting a final state"
                    ),
                    flow_run_id=flow_run.id,
                )
            return ArmadaWorkerResult(identifier=pid, status_code=0)
        if state is None or not state.is_final():
            # The flow run could not report its end (infrastructure failure, rejection, or
            # a flow run process that died without reporting).
            await self._propose_crashed_state(flow_run, report.summary)
        elif (
            state.is_crashed()
            and report.outcome is not Outcome.USER_ERROR
            and report.summary not in (state.message or "")
        ):
            # The flow run process crashed on the termination signal of a preemption (or
            # eviction) before the job's end was known: say why. Prefect refuses Crashed
            # over a terminal state unless forced.
            await self.client.set_flow_run_state(
                flow_run.id, Crashed(message=report.summary), force=True
            )
        return ArmadaWorkerResult(
            identifier=pid,
            status_code=status_code or (1 if report.outcome is Outcome.USER_ERROR else -1),
        )

    def _end_watch(self, flow_run_id: UUID, watch: _Watch) -> None:
        if self._watches.get(flow_run_id) is watch:
            del self._watches[flow_run_id]
            self._watch_ends.add(flow_run_id)

    # --- taking over ------------------------------------------------------------------------

    async def _takeover_loop(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                try:
                    await self.take_over_flow_runs()
                except Exception as e:  # the API may be briefly down; try again next time
                    self._logger.warning(
                        "Could not check the pool's flow runs for watches to take over: %s", e
                    )
                await self.reaper.round()
                await anyio.sleep(self.takeover_interval_seconds)

    async def take_over_flow_runs(self) -> list[UUID]:
        """One round of the takeover: start watching the pool's unfinished flow runs that
        this worker owns (`flow_run_owner`) and does not watch, and stop watching those
        another worker owns now. Returns the flow runs taken over.

        Flow runs with an Armada infrastructure id are watched; those without one whose
        worker is gone (it stopped between submitting and recording the id, or while
        submitting) have their job found by the flow run's identity, or submitted if the
        flow run is still Pending (`asubmit_or_reattach`: never a second job). A flow run that
        entered Pending recently, or has no infrastructure id yet, is left alone for a grace
        period: a worker may be submitting it."""
        workers = await self.client.read_workers_for_work_pool(self._work_pool_name)
        online = sorted({w.name for w in workers if w.status == WorkerStatus.ONLINE})
        if self.name not in online:  # not (or no longer) a member in the others' eyes
            return []
        # The server's clock, for the age of states.
        now = max(w.last_heartbeat_time for w in workers if w.last_heartbeat_time)
        grace = datetime.timedelta(seconds=3 * self.takeover_interval_seconds)
        taken: list[UUID] = []
        listed_at = time.monotonic()
        unfinished = await unfinished_flow_runs(self.client, self._work_pool_name)
        ended = self._watch_ends.since(listed_at)  # their ends are reported: the list is stale
        for flow_run in unfinished:
            if flow_run.id in ended:
                continue
            recorded = flow_run.labels.get(WORKER_LABEL)
            if flow_run.infrastructure_pid:
                try:
                    parse_infrastructure_id(flow_run.infrastructure_pid)
                except ValueError:
                    continue
            elif recorded is None or flow_run.id in self._nothing_to_watch:
                continue  # not submitted by a worker (e.g. an engine started by hand)
            owner = flow_run_owner(str(flow_run.id), recorded, online)
            watch = self._watches.get(flow_run.id)
            if owner != self.name:
                if watch is not None and owner is not None and watch.released_to is None:
                    watch.release(owner)
                continue
            if watch is not None or flow_run.id in self._submitting_flow_run_ids:
                continue
            state = flow_run.state
            recent = state is None or now - state.timestamp < grace
            if recent and (
                state is None or state.type == StateType.PENDING or not flow_run.infrastructure_pid
            ):
                continue
            assert self._runs_task_group is not None
            watch = self._watches[flow_run.id] = _Watch()
            self._runs_task_group.start_soon(self._take_over, flow_run, recorded, watch)
            taken.append(flow_run.id)
        return taken

    async def _take_over(
        self, flow_run: FlowRun, recorded: LabelValue | None, watch: _Watch
    ) -> None:
        logger = self.get_flow_run_logger(flow_run)
        try:
            if recorded != self.name:
                await self.client.update_flow_run_labels(flow_run.id, {WORKER_LABEL: self.name})
            try:
                configuration = await self.job_configuration.resolve_for_flow_run(
                    flow_run,
                    client=self.client,
                    work_pool=copy.deepcopy(self.work_pool),
                    worker_name=self.name,
                    worker_id=self.backend_id,
                )
            except ObjectNotFound:  # its deployment is gone: the pool's defaults
                configuration = self.job_configuration()
            pid = flow_run.infrastructure_pid or await self._find_job(flow_run, configuration)
            if pid is None:
                return
            job_id = parse_infrastructure_id(pid)[2]
            self._logger.info(
                "Taking over the watch of flow run %s (Armada job %s) from worker %r",
                flow_run.id,
                job_id,
                recorded,
            )
            logger.info(
                "Worker %r takes over the watch of Armada job %s from worker %r",
                self.name,
                job_id,
                recorded,
            )
            async with _credentials(configuration.credentials).get_async_client() as client:
                state = (await client.get_job_status([job_id])).get(job_id, submit_pb2.UNKNOWN)
            if state == submit_pb2.UNKNOWN:
                await self._job_gone(flow_run, job_id)
                return
            await self._watch(flow_run, configuration, pid, watch)
        except Exception:
            logger.exception(
                "Worker %r could not take over the watch of flow run %s", self.name, flow_run.id
            )
        finally:
            self._end_watch(flow_run.id, watch)

    async def _find_job(
        self, flow_run: FlowRun, configuration: ArmadaWorkerJobConfiguration
    ) -> str | None:
        """The infrastructure id of a flow run whose worker did not record one: its job, found
        by the flow run's identity; for a flow run still Pending, submitted (idempotently) as
        its worker would have. None if there is no job to watch."""
        logger = self.get_flow_run_logger(flow_run)
        current = await self.client.read_flow_run(flow_run.id)
        queue, job_set_id = configuration.queue, configuration.job_set_id or "prefect"
        identity = flow_run_identity(flow_run)
        async with _credentials(configuration.credentials).get_async_client() as client:
            if current.state is not None and current.state.type == StateType.PENDING:
                logger.info(
                    "Worker %r completes the submission of flow run %s", self.name, flow_run.id
                )
                submission = await asubmit_or_reattach(
                    client, queue, job_set_id, identity, configuration.items, log=logger.info
                )
                job_ids = submission.job_ids
            else:
                found = await client.get_job_status_by_external_uri(
                    queue, job_set_id, identity.external_job_uri
                )
                job_ids = sorted(j for j, s in found.items() if s in LIVE_STATES) or sorted(
                    j for j, s in found.items() if s != submit_pb2.UNKNOWN
                )
        if not job_ids:
            if current.state is not None and current.state.is_cancelling():
                await self._mark_flow_run_as_cancelled(
                    current,
                    state_updates={
                        "message": "Flow run cancelled; no Armada job was submitted for it."
                    },
                )
            else:
                self._nothing_to_watch.add(flow_run.id)
                logger.warning(
                    "Worker %r found no Armada job of flow run %s to watch", self.name, flow_run.id
                )
            return None
        pid = infrastructure_id(queue, job_set_id, job_ids[-1])
        await self.client.update_flow_run(flow_run.id, infrastructure_pid=pid)
        return pid

    async def _job_gone(self, flow_run: FlowRun, job_id: str) -> None:
        current = await self.client.read_flow_run(flow_run.id)
        if current.state is not None and current.state.is_cancelling():
            await self._mark_flow_run_as_cancelled(
                current,
                state_updates={
                    "message": f"Flow run cancelled; its Armada job {job_id} no longer exists."
                },
            )
        elif current.state is None or not current.state.is_final():
            await self._propose_crashed_state(
                flow_run, f"The flow run's Armada job {job_id} no longer exists."
            )

    # --- cancellation -----------------------------------------------------------------------

    async def kill_infrastructure(
        self,
        infrastructure_pid: str,
        configuration: ArmadaWorkerJobConfiguration,
        grace_seconds: int = 30,
    ) -> None:
        """Cancel the flow run's job (the executor stops the pod with its grace period)."""
        queue, job_set_id, job_id = parse_infrastructure_id(infrastructure_pid)
        async with _credentials(configuration.credentials).get_async_client() as client:
            try:
                states = await client.get_job_status([job_id])
                if states.get(job_id, submit_pb2.UNKNOWN) == submit_pb2.UNKNOWN:
                    raise InfrastructureNotFound(f"Armada job {job_id} does not exist")
                await client.cancel_jobs(
                    queue, job_set_id, [job_id], reason="Prefect flow run cancelled"
                )
            except ArmadaNotFound as e:
                raise InfrastructureNotFound(str(e)) from e

    async def _cancel_run(self, flow_run_id: UUID) -> None:
        """Prefect's base worker cancels flow runs that are being submitted and have not
        started; a flow run this worker watches is cancelled by its watch (job cancelled,
        then the flow run marked Cancelled), also once started."""
        if flow_run_id in self._watches:
            return
        await super()._cancel_run(flow_run_id)
