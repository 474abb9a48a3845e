"""`ArmadaJob` (a Prefect `JobBlock`) and `ArmadaJobRun` (its `JobRun`): submit a job, a
gang or an elastic pod group and wait for it through the task lifecycle of
`armada_core.client.lifecycle` (reattach after a crash, cancel a previous try's live job
before a retry; the one wait: event stream, the job's logs and why it still waits in the
run's log, status checks that ride out a restarting server), cancel it when the Prefect run
is cancelled, and map its end with `armada_core.retry.map_outcome` into the lifecycle's
result payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from prefect.blocks.abstract import JobBlock, JobRun
from prefect.context import FlowRunContext, TaskRunContext
from prefect.exceptions import MissingContextError
from prefect.logging import get_logger, get_run_logger
from pydantic import BaseModel, Field, model_validator

from armada_core.api import submit_pb2
from armada_core.client import (
    JobResult,
    WaitTimeout,
    WatchOptions,
    gang_items,
    job_item,
    pod_group_items,
)
from armada_core.client.lifecycle import (
    TaskEnd,
    TaskIdentity,
    WaitSettings,
    asubmit_or_reattach,
    wait_async,
)
from armada_core.retry import Outcome, OutcomeReport

from ._identity import current_identity, explicit_identity
from .credentials import ArmadaCredentials
from .exceptions import ArmadaJobError, error_for
from .own_job import cancel_own_job

LoggerLike = logging.Logger | logging.LoggerAdapter
#: The result of a job or gang: `armada_core.client.lifecycle.result_payload`.
Payload = dict[str, Any]


def run_logger() -> LoggerLike:
    """The Prefect run logger when inside a run, else this package's logger."""
    try:
        return get_run_logger()
    except MissingContextError:
        return get_logger("prefect_armada")


def _flow_run_id() -> str | None:
    task_ctx = TaskRunContext.get()
    if task_ctx is not None and task_ctx.task_run.flow_run_id is not None:
        return str(task_ctx.task_run.flow_run_id)
    flow_ctx = FlowRunContext.get()
    if flow_ctx is not None and flow_ctx.flow_run is not None:
        return str(flow_ctx.flow_run.id)
    return None


class ArmadaRole(BaseModel):
    """One role of an elastic pod group (armada_core's `Role`): `maximum` members run
    `pod_spec`; the group starts once `minimum` of them (and every other role's minimum) fit,
    and the members above it run as room allows and give way first."""

    name: str = Field(description="The role's name (armadaproject.io/gangRole).")
    pod_spec: dict[str, Any] | str = Field(description="The role's Kubernetes PodSpec.")
    minimum: int = Field(default=1, description="Members that must run for the group to run.")
    maximum: int | None = Field(default=None, description="Members submitted; default the minimum.")
    max_hops: int | None = Field(
        default=None,
        ge=0,
        description="Most network hops between any two of the role's members "
        "(armadaproject.io/gangRoleMaxHops; needs the server's topology_levels).",
    )


class ArmadaJob(JobBlock):
    """A job, a gang of jobs scheduled all or nothing, or an elastic pod group, to run on
    Armada.

    `pod_spec` is a Kubernetes PodSpec in JSON shape (or YAML text); a list of pod specs makes
    a gang with one member per spec, and `replicas > 1` a gang of identical members. `roles`
    instead of `pod_spec` makes an elastic pod group (e.g. a coordinator, minimum and maximum
    1, and workers, minimum 2 and maximum 4); its members are all the run's jobs.

    Example:
        ```python
        from prefect_armada import ArmadaCredentials, ArmadaJob

        job = ArmadaJob(
            credentials=ArmadaCredentials(address="localhost:50051"), queue="ml",
            pod_spec={"containers": [{"name": "main", "image": "python:3.11",
                                      "command": ["python", "-c", "print('hi')"],
                                      "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                    "limits": {"cpu": "1", "memory": "1Gi"}}}]})
        run = await job.trigger()
        await run.wait_for_completion()
        print(await run.fetch_result())
        ```
    """

    _block_type_name = "Armada Job"
    _block_type_slug = "armada-job"
    _description = "A job or gang to run on Armada, waited for through its event stream."

    credentials: ArmadaCredentials = Field(
        default_factory=ArmadaCredentials, description="Where the Armada server is."
    )
    queue: str = Field(description="The Armada queue to submit to.")
    job_set_id: str | None = Field(
        default=None, description="Job set; default 'prefect-<flow run id>' inside a flow run."
    )
    pod_spec: dict[str, Any] | list[dict[str, Any]] | str | None = Field(
        default=None, description="Kubernetes PodSpec (JSON shape or YAML); a list makes a gang."
    )
    roles: list[ArmadaRole] | None = Field(
        default=None, description="An elastic pod group's roles, instead of pod_spec."
    )
    replicas: int = Field(default=1, ge=1, description="Members of a gang of identical pods.")
    minimum_cardinality: int | None = Field(
        default=None, description="Elastic gang: members that must be placed at least."
    )
    node_uniformity_label: str | None = Field(
        default=None, description="Place all gang members on nodes sharing this label's value."
    )
    priority: float = Field(default=0.0, description="Lower runs first within the queue.")
    priority_class: str | None = Field(default=None, description="The pods' priority class.")
    namespace: str = Field(default="default")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    retry_policy: str | list[str] | None = Field(
        default=None, description="Server-side retry policies (armadaproject.io/retry-policy)."
    )
    client_id: str | None = Field(
        default=None,
        description="Idempotency key; default derived from the Prefect run (flow run, task, try).",
    )
    timeout_seconds: float | None = Field(
        default=None, description="Cancel the job and fail if it has not ended by then."
    )
    stream_logs: bool = Field(default=True, description="Copy the job's logs into the run log.")
    log_interval_seconds: float = Field(default=2.0, gt=0)
    cancellation_check_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How often to check whether the Prefect run was cancelled (to cancel the job).",
    )
    poll_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Status polling period while the event stream is down; "
        "also how often a waiting job's scheduling reason is "
        "read.",
    )
    waiting_log_seconds: float = Field(
        default=60.0,
        gt=0,
        description="While a job waits, log why (the scheduler's reason) "
        "when it changes and at least this often.",
    )
    create_artifacts: bool = Field(default=True, description="Record the job in an artifact.")

    @model_validator(mode="after")
    def _one_shape(self) -> ArmadaJob:
        if (self.pod_spec is None) == (self.roles is None):
            raise ValueError("give exactly one of pod_spec and roles")
        if self.roles is not None and (self.replicas > 1 or self.minimum_cardinality):
            raise ValueError(
                "replicas and minimum_cardinality go with pod_spec; a pod group's "
                "sizes are its roles' minimum and maximum"
            )
        return self

    def items(self, client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
        """The submission under `client_id` (checked before sending; the lifecycle adds the
        task's external job URI and annotations)."""
        common: dict[str, Any] = dict(
            priority=self.priority,
            namespace=self.namespace,
            priority_class=self.priority_class,
            client_id=client_id,
            labels=self.labels,
            annotations=self.annotations,
            retry_policy=self.retry_policy,
        )
        if self.roles is not None:
            return pod_group_items(
                [r.model_dump() for r in self.roles],
                node_uniformity_label=self.node_uniformity_label,
                **common,
            )
        if isinstance(self.pod_spec, list) or self.replicas > 1:
            specs = self.pod_spec
            return gang_items(
                specs,
                replicas=None if isinstance(specs, list) else self.replicas,
                minimum_cardinality=self.minimum_cardinality,
                node_uniformity_label=self.node_uniformity_label,
                **common,
            )
        return [job_item(self.pod_spec, **common)]

    def identity(self) -> TaskIdentity:
        """The task this job is submitted as (see `_identity`)."""
        return explicit_identity(self.client_id) if self.client_id else current_identity()

    def resolved_job_set_id(self) -> str:
        if self.job_set_id:
            return self.job_set_id
        flow_run_id = _flow_run_id()
        return f"prefect-{flow_run_id}" if flow_run_id else "prefect"

    async def trigger(self) -> ArmadaJobRun:
        """Submit this job, or reattach to it (a re-executed run finds its live or succeeded
        job); a retry cancels the previous try's live job first."""
        identity = self.identity()
        job_set_id = self.resolved_job_set_id()
        logger = run_logger()

        def build(client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
            # A chosen client id is used as it is for the first generation.
            if self.client_id and client_id == identity.client_id(0):
                client_id = self.client_id
            return self.items(client_id)

        async with self.credentials.get_async_client() as client:
            submission = await asubmit_or_reattach(
                client, self.queue, job_set_id, identity, build, log=logger.info
            )
        run = ArmadaJobRun(self, job_set_id, submission.job_ids, reattached=submission.reattached)
        if self.create_artifacts:
            await run.record_artifacts()
        return run

    def trigger_sync(self) -> ArmadaJobRun:
        """`trigger` for synchronous code."""
        return run_sync(self.trigger)

    async def run(self) -> Payload:
        """Submit, wait, and return the result payload (outcome, summary, and per job its
        state, node, exit codes, termination messages, duration...); raises an ArmadaJobError
        subclass when the job or gang did not succeed."""
        job_run = await self.trigger()
        await job_run.wait_for_completion()
        return await job_run.fetch_result()

    def run_sync(self) -> Payload:
        """`run` for synchronous code."""
        return run_sync(self.run)


class ArmadaJobRun(JobRun[Payload]):
    """A submitted job or gang: wait for it, fetch its result, cancel it."""

    def __init__(
        self, job: ArmadaJob, job_set_id: str, job_ids: Sequence[str], *, reattached: bool = False
    ) -> None:
        self.job = job
        self.queue = job.queue
        self.job_set_id = job_set_id
        self.job_ids = list(job_ids)
        self.reattached = reattached
        self.results: dict[str, JobResult] = {}
        self.report: OutcomeReport | None = None
        self.payload: Payload | None = None
        self._flow_run_id = _flow_run_id()
        self._logger = run_logger()

    @property
    def logger(self) -> LoggerLike:
        return self._logger

    def handle(self) -> dict[str, Any]:
        """What other tasks need to find the jobs again (JSON-friendly)."""
        return {"queue": self.queue, "job_set_id": self.job_set_id, "job_ids": self.job_ids}

    async def wait_for_completion(self) -> None:  # type: ignore[override]  # Prefect's says Logger
        """Wait until every job has ended (server-side retries are waited through); raises
        the ArmadaJobError subclass of the outcome unless the job or gang succeeded. If the
        wait is interrupted (cancelled, killed, timed out), the jobs are cancelled first."""
        end = await await_task(
            self.job.credentials,
            self.queue,
            self.job_set_id,
            self.job_ids,
            logger=self._logger,
            flow_run_id=self._flow_run_id,
            stream_logs=self.job.stream_logs,
            log_interval=self.job.log_interval_seconds,
            cancellation_check=self.job.cancellation_check_seconds,
            timeout=self.job.timeout_seconds,
            options=WatchOptions(poll_interval=self.job.poll_interval_seconds),
            waiting_log=self._logger.info,
            waiting_interval=self.job.waiting_log_seconds,
            waiting_poll=self.job.poll_interval_seconds,
        )
        self.results, self.report, self.payload = end.results, end.report, end.payload()
        if self.job.create_artifacts:
            await self.record_artifacts()
        if end.cancelled or self.report.outcome is Outcome.CANCELLED:
            # The flow run's process may end on this: its own job is cancelled first.
            await cancel_own_job(self.job.credentials, self._logger)
        error = error_for(self.report, self.results)
        if error is not None:
            raise error
        self._logger.info("%s", self.report.summary)

    def wait_for_completion_sync(self) -> None:
        """`wait_for_completion` for synchronous code; an interrupt cancels the jobs."""
        try:
            run_sync(self.wait_for_completion)
        except BaseException as e:
            if not isinstance(e, (ArmadaJobError, WaitTimeout)) and not self.results:
                with contextlib.suppress(Exception), self.job.credentials.get_client() as c:
                    c.cancel_jobs(
                        self.queue,
                        self.job_set_id,
                        self.job_ids,
                        reason=f"Prefect run interrupted ({type(e).__name__})",
                    )
            raise

    async def fetch_result(self) -> Payload:
        """The result payload (`armada_core.client.lifecycle.result_payload`): outcome,
        summary, job ids, nodes, duration, and per job its state, run, node, exit codes,
        termination messages, failure and server-side retries."""
        if self.payload is None:
            raise RuntimeError("the job has not been waited for; call wait_for_completion")
        return self.payload

    async def cancel(self, reason: str = "cancelled from Prefect") -> list[str]:
        """Cancel every job of the run; returns the ids actually cancelled."""
        async with self.job.credentials.get_async_client() as client:
            return await client.cancel_jobs(
                self.queue, self.job_set_id, self.job_ids, reason=reason
            )

    async def record_artifacts(self) -> None:
        """A markdown artifact naming the jobs (and their outcome once ended), plus a link
        artifact per job when the credentials have a job URL template."""
        await record_artifacts(
            self.job.credentials,
            self.queue,
            self.job_set_id,
            self.job_ids,
            self.results,
            self.report,
        )


async def record_artifacts(
    credentials: ArmadaCredentials,
    queue: str,
    job_set_id: str,
    job_ids: Sequence[str],
    results: dict[str, JobResult],
    report: OutcomeReport | None,
) -> None:
    """Best effort: an artifact failure never fails the run."""
    if TaskRunContext.get() is None and FlowRunContext.get() is None:
        return
    from prefect.artifacts import acreate_link_artifact, acreate_markdown_artifact

    rows = ["| job | state | node | exit codes |", "|---|---|---|---|"]
    for job_id in job_ids:
        r = results.get(job_id)
        codes = ", ".join(f"{k}={v}" for k, v in (r.exit_codes if r else {}).items())
        rows.append(
            f"| `{job_id}` | {r.state_name if r else 'SUBMITTED'} | "
            f"{(r.node if r else '') or '-'} | {codes or '-'} |"
        )
    outcome = f"\n\n**Outcome:** {report.summary}" if report else ""
    markdown = (
        f"### Armada {'gang' if len(job_ids) > 1 else 'job'} in `{queue}` / "
        f"`{job_set_id}`\n\n"
        + "\n".join(rows)
        + outcome
        + f"\n\nFollow it: `armada watch {queue} {job_set_id}`; logs: "
        f"`armada logs {job_ids[0]}`"
    )
    try:
        await acreate_markdown_artifact(markdown, description="Armada jobs of this run")
        if not results:
            for job_id in job_ids:
                url = credentials.job_url(queue, job_set_id, job_id)
                if url:
                    await acreate_link_artifact(url, link_text=f"Armada job {job_id}")
    except Exception as e:  # artifacts are a convenience
        run_logger().debug("Could not record Armada artifacts: %s", e)


async def await_task(
    credentials: ArmadaCredentials,
    queue: str,
    job_set_id: str,
    job_ids: Sequence[str],
    *,
    logger: LoggerLike,
    flow_run_id: str | None = None,
    stream_logs: bool = True,
    log_interval: float = 2.0,
    cancellation_check: float = 5.0,
    timeout: float | None = None,
    options: WatchOptions | None = None,
    on_cancel_requested: Callable[[], None] | None = None,
    waiting_log: Callable[[str], None] | None = None,
    waiting_interval: float = 60.0,
    waiting_poll: float = 10.0,
    cancel_on_interrupt: bool = True,
) -> TaskEnd:
    """The lifecycle's one wait (`wait_async`) with Prefect's logging and cancellation: the
    jobs' log lines go to `logger` (a gang's prefixed with the job id); their progress and why
    they still wait to `waiting_log` (default `logger`); with `flow_run_id`, the jobs are
    cancelled once that flow run is cancelling (`on_cancel_requested` is told). A timeout
    cancels the jobs; so does any other interruption with `cancel_on_interrupt`."""
    ids = list(job_ids)
    prefix = len(ids) > 1

    def on_line(job_id: str, line: str) -> None:
        logger.info("%s%s", f"[{job_id}] " if prefix else "", line)

    settings = WaitSettings(
        stream_logs=stream_logs,
        log_interval=log_interval,
        check_interval=waiting_poll,
        waiting_interval=waiting_interval,
        cancel_check_interval=cancellation_check,
        timeout=timeout,
        watch=options or WatchOptions(),
    )
    async with credentials.get_async_client() as client, contextlib.AsyncExitStack() as stack:
        check = None
        if flow_run_id is not None:
            check = await stack.enter_async_context(
                _FlowRunCancelled(flow_run_id, logger, on_cancel_requested)
            )
        return await wait_async(
            client,
            queue,
            job_set_id,
            ids,
            log=waiting_log or logger.info,
            warn=logger.warning,
            on_line=on_line,
            settings=settings,
            cancel_check=check,
            cancel_reason="the Prefect run was interrupted" if cancel_on_interrupt else None,
        )


async def wait_for_jobs(
    credentials: ArmadaCredentials,
    queue: str,
    job_set_id: str,
    job_ids: Sequence[str],
    *,
    logger: LoggerLike,
    flow_run_id: str | None = None,
    stream_logs: bool = True,
    log_interval: float = 2.0,
    cancellation_check: float = 5.0,
    timeout: float | None = None,
    options: WatchOptions | None = None,
    on_cancel_requested: Callable[[], None] | None = None,
    waiting_log: Callable[[str], None] | None = None,
    waiting_interval: float = 60.0,
    waiting_poll: float = 10.0,
    cancel_on_interrupt: bool = True,
) -> dict[str, JobResult]:
    """Each job's result once every job ended (`await_task`)."""
    end = await await_task(
        credentials,
        queue,
        job_set_id,
        job_ids,
        logger=logger,
        flow_run_id=flow_run_id,
        stream_logs=stream_logs,
        log_interval=log_interval,
        cancellation_check=cancellation_check,
        timeout=timeout,
        options=options,
        on_cancel_requested=on_cancel_requested,
        waiting_log=waiting_log,
        waiting_interval=waiting_interval,
        waiting_poll=waiting_poll,
        cancel_on_interrupt=cancel_on_interrupt,
    )
    return end.results


class _FlowRunCancelled:
    """The wait's cancel check: cancelling a flow run reaches a process only if something
    kills it; this makes the jobs follow the flow run's cancellation even when nothing does.
    One Prefect client for the whole wait."""

    def __init__(
        self, flow_run_id: str, logger: LoggerLike, on_cancel_requested: Callable[[], None] | None
    ) -> None:
        self.flow_run_id = flow_run_id
        self.logger = logger
        self.on_cancel_requested = on_cancel_requested
        self._prefect: Any = None

    async def __aenter__(self) -> _FlowRunCancelled:
        from prefect.client.orchestration import get_client

        self._prefect = get_client()
        await self._prefect.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._prefect.__aexit__(*exc)

    async def __call__(self) -> str | None:
        try:
            flow_run = await self._prefect.read_flow_run(self.flow_run_id)
        except Exception as e:  # the API may be briefly down
            self.logger.debug("Could not read flow run %s: %s", self.flow_run_id, e)
            return None
        state = flow_run.state
        if state is None or not (state.is_cancelling() or state.is_cancelled()):
            return None
        if self.on_cancel_requested is not None:
            self.on_cancel_requested()
        return f"Prefect flow run {self.flow_run_id} was cancelled"


def run_sync(fn: Callable[[], Any]) -> Any:
    """Run a coroutine function from synchronous code: in this thread when it has no event
    loop (so a termination signal reaches the coroutine), else in Prefect's sync loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn())
    from prefect.utilities.asyncutils import run_coro_as_sync

    return run_coro_as_sync(fn())
