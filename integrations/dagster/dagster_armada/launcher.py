"""`ArmadaRunLauncher`: every Dagster run executes as one Armada job running
``dagster api execute_run``, as dagster-k8s's K8sRunLauncher does with a Kubernetes Job.

The run worker follows the task lifecycle every integration shares
(`armada_core.client.lifecycle`): its task and its attempt are both the run id. Launching the
same run twice reattaches to the worker's job instead of starting a second one; resuming a run
(run monitoring found its worker gone) reattaches to the job while it can still succeed and
submits a new generation of it otherwise. Terminating the run cancels the job; the worker gets
SIGTERM, which Dagster turns into an interrupt, and its steps cancel their own Armada jobs.
A worker SIGKILLed before it recorded that (it ignored SIGTERM, or outlived its grace period)
never does: once the grace period is over the launcher records the run as canceled itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    Array,
    BoolSource,
    DagsterRunStatus,
    Field,
    IntSource,
    Noneable,
    Permissive,
    StringSource,
)
from dagster import _check as check
from dagster._core.launcher.base import (
    CheckRunHealthResult,
    LaunchRunContext,
    ResumeRunContext,
    RunLauncher,
    WorkerStatus,
)
from dagster._core.storage.dagster_run import DagsterRun
from dagster._grpc.types import ExecuteRunArgs, ResumeRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData

from armada_core.api import submit_pb2
from armada_core.client import ArmadaError, job_item
from armada_core.client.lifecycle import TaskIdentity, submit_or_reattach

from .instance_id import INSTANCE_ANNOTATION, instance_digest
from .job import ORCHESTRATOR, RUN_ID_ANNOTATION, container_pod_spec
from .resource import ArmadaResource

log = logging.getLogger(__name__)

JOB_ID_TAG = "armada/job_id"
QUEUE_TAG = "armada/queue"
JOB_SET_TAG = "armada/job_set_id"

# After a run worker's grace period, how long the launcher still leaves its cancellation for
# the worker to record: the executor starts the grace period at its next sync with the server.
KILL_MARGIN_SECONDS = 10.0

_RUNNING = (
    submit_pb2.QUEUED,
    submit_pb2.SUBMITTED,
    submit_pb2.LEASED,
    submit_pb2.PENDING,
    submit_pb2.RUNNING,
)


def run_task_identity(run_id: str) -> TaskIdentity:
    """The run worker's identity: a run is one task, and every launch of it one attempt."""
    return TaskIdentity(ORCHESTRATOR, run_id, run_id, name="run")


def _env(entries: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` sets a value; a bare `KEY` copies it from the launcher's environment."""
    out: dict[str, str] = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if sep:
            out[key] = value
        elif key in os.environ:
            out[key] = os.environ[key]
    return out


class ArmadaRunLauncher(RunLauncher, ConfigurableClass):
    """Launches each Dagster run as an Armada job (configured in dagster.yaml)."""

    def __init__(
        self,
        *,
        queue: str,
        address: str = "localhost:50051",
        tls: bool = False,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        job_set_id: str = "dagster-{run_id}",
        namespace: str = "default",
        priority_class: str | None = None,
        image: str = "python:3.11",
        cpu: str = "1",
        memory: str = "2Gi",
        env_vars: Sequence[str] = (),
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        termination_grace_period_seconds: int = 30,
        entry_point: Sequence[str] | None = None,
        inst_data: ConfigurableClassData | None = None,
    ) -> None:
        self._inst_data = inst_data
        self.armada = ArmadaResource(
            address=address,
            tls=tls,
            token=token,
            username=username,
            password=password,
            queue=queue,
            job_set_id=job_set_id,
            namespace=namespace,
            priority_class=priority_class,
        )
        self.image = image
        self.cpu = cpu
        self.memory = memory
        self.env_vars = list(env_vars)
        self.annotations = dict(annotations or {})
        self.labels = dict(labels or {})
        self.grace = termination_grace_period_seconds
        self.entry_point = list(entry_point) if entry_point else None
        super().__init__()

    # --- ConfigurableClass -----------------------------------------------------------------

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {
            "queue": Field(StringSource, description="Queue the run workers are submitted to."),
            "address": Field(StringSource, is_required=False, default_value="localhost:50051"),
            "tls": Field(BoolSource, is_required=False, default_value=False),
            "token": Field(
                Noneable(StringSource),
                is_required=False,
                default_value=None,
                description="Bearer token; use {env: VAR}.",
            ),
            "username": Field(Noneable(StringSource), is_required=False, default_value=None),
            "password": Field(Noneable(StringSource), is_required=False, default_value=None),
            "job_set_id": Field(
                StringSource,
                is_required=False,
                default_value="dagster-{run_id}",
                description="Job set naming ({run_id}, {job_name}).",
            ),
            "namespace": Field(StringSource, is_required=False, default_value="default"),
            "priority_class": Field(Noneable(StringSource), is_required=False, default_value=None),
            "image": Field(
                StringSource,
                is_required=False,
                default_value="python:3.11",
                description="Image with your code and dagster-armada installed.",
            ),
            "cpu": Field(StringSource, is_required=False, default_value="1"),
            "memory": Field(StringSource, is_required=False, default_value="2Gi"),
            "env_vars": Field(
                Array(str),
                is_required=False,
                default_value=[],
                description="KEY=VALUE, or KEY to copy from this process.",
            ),
            "annotations": Field(Permissive(), is_required=False, default_value={}),
            "labels": Field(Permissive(), is_required=False, default_value={}),
            "termination_grace_period_seconds": Field(
                IntSource, is_required=False, default_value=30
            ),
            "entry_point": Field(
                Noneable(Array(str)),
                is_required=False,
                default_value=None,
                description="Replaces the code location's entry point "
                "(`dagster`), e.g. [/venv/bin/python, -m, dagster].",
            ),
        }

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> ArmadaRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    # --- launching -------------------------------------------------------------------------

    def _submit(self, run: DagsterRun, command: Sequence[str]) -> str:
        if self.entry_point:
            command = [*self.entry_point, *command[list(command).index("api") :]]
        job_set = self.armada.job_set_for(run.run_id, run.job_name)
        spec = container_pod_spec(
            command,
            image=self.image,
            cpu=self.cpu,
            memory=self.memory,
            env=_env(self.env_vars),
            name="dagster",
            terminationGracePeriodSeconds=self.grace,
        )

        def build(client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
            return [
                job_item(
                    spec,
                    client_id=client_id,
                    namespace=self.armada.namespace,
                    priority_class=self.armada.priority_class,
                    labels=self.labels,
                    annotations={
                        **self.annotations,
                        RUN_ID_ANNOTATION: run.run_id,
                        INSTANCE_ANNOTATION: instance_digest(self._instance),
                    },
                )
            ]

        def log(message: str) -> None:
            self._instance.report_engine_event(message, run, cls=self.__class__)

        submission = submit_or_reattach(
            self.armada.get_client(),
            self.armada.queue,
            job_set,
            run_task_identity(run.run_id),
            build,
            log=log,
            cancel_wait=self.armada.cancel_wait,
        )
        job_id = submission.job_ids[0]
        self._instance.add_run_tags(
            run.run_id, {JOB_ID_TAG: job_id, QUEUE_TAG: self.armada.queue, JOB_SET_TAG: job_set}
        )
        verb = "reattached to" if submission.reattached else "submitted as"
        self._instance.report_engine_event(
            f"Run worker {verb} Armada job {job_id} (queue {self.armada.queue!r}, job set "
            f"{job_set!r})",
            run,
            cls=self.__class__,
        )
        return job_id

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        origin = check.not_none(context.job_code_origin)
        command = ExecuteRunArgs(
            job_origin=origin,
            run_id=run.run_id,
            instance_ref=self._instance.get_ref(),
            set_exit_code_on_failure=True,
        ).get_command_args()
        self._submit(run, command)

    @property
    def supports_resume_run(self) -> bool:
        return True

    def resume_run(self, context: ResumeRunContext) -> None:
        run = context.dagster_run
        origin = check.not_none(context.job_code_origin)
        command = ResumeRunArgs(
            job_origin=origin,
            run_id=run.run_id,
            instance_ref=self._instance.get_ref(),
            set_exit_code_on_failure=True,
        ).get_command_args()
        self._submit(run, command)

    # --- watching and stopping -------------------------------------------------------------

    def _job_of(self, run: DagsterRun) -> tuple[str, str] | None:
        job_id = run.tags.get(JOB_ID_TAG)
        if not job_id:
            return None
        return job_id, run.tags.get(JOB_SET_TAG) or self.armada.job_set_for(
            run.run_id, run.job_name
        )

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        job = self._job_of(run)
        if job is None:
            return False
        job_id, job_set = job
        self._instance.report_run_canceling(run)
        try:
            state = self.armada.get_client().get_job_status([job_id]).get(job_id)
            self.armada.cancel(
                [job_id], job_set_id=job_set, reason=f"Dagster run {run_id} was terminated"
            )
        except ArmadaError as e:
            self._instance.report_engine_event(
                f"Could not cancel Armada job {job_id}: {e}", run, cls=self.__class__
            )
            return False
        if state != submit_pb2.RUNNING:
            # The worker never started, so nothing else will record the cancellation.
            self._instance.report_run_canceled(
                run, message=f"Armada job {job_id} cancelled before its run worker started"
            )
        else:
            self._instance.report_engine_event(
                f"Cancelled Armada job {job_id}; the run worker is stopping",
                run,
                cls=self.__class__,
            )
            self._record_cancellation_after_grace(run_id, job_id)
        return True

    def _record_cancellation_after_grace(self, run_id: str, job_id: str) -> None:
        """Record the run as canceled if its worker has not done so once its grace period
        is over: the worker has been SIGKILLed by then, and without this (or run monitoring's
        cancel timeout) the run would stay CANCELING for good."""

        def record() -> None:
            time.sleep(self.grace + KILL_MARGIN_SECONDS)
            try:
                run = self._instance.get_run_by_id(run_id)
                if run is not None and run.status == DagsterRunStatus.CANCELING:
                    self._instance.report_run_canceled(
                        run,
                        message=f"Armada job {job_id} was cancelled and its run worker "
                        "stopped without recording the cancellation",
                    )
            except Exception:  # the instance may be gone with its process; monitoring remains
                log.warning("could not record Dagster run %s as canceled", run_id, exc_info=True)

        threading.Thread(target=record, name=f"armada-cancel-{run_id}", daemon=True).start()

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        job = self._job_of(run)
        if job is None:
            return CheckRunHealthResult(WorkerStatus.UNKNOWN, "no Armada job recorded for run")
        job_id, _ = job
        try:
            state = (
                self.armada.get_client().get_job_status([job_id]).get(job_id, submit_pb2.UNKNOWN)
            )
        except ArmadaError as e:
            return CheckRunHealthResult(WorkerStatus.UNKNOWN, str(e), transient=True)
        if state in _RUNNING:
            return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=job_id)
        if state == submit_pb2.SUCCEEDED:
            return CheckRunHealthResult(WorkerStatus.SUCCESS, run_worker_id=job_id)
        if state == submit_pb2.UNKNOWN:
            return CheckRunHealthResult(
                WorkerStatus.NOT_FOUND, f"Armada does not know job {job_id}"
            )
        try:
            reason = self.armada.get_client().get_job_errors([job_id]).get(job_id, "")
        except ArmadaError:
            reason = ""
        name = submit_pb2.JobState.Name(submit_pb2.JobState.ValueType(state))
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"Armada job {job_id} is {name}" + (f": {reason}" if reason else ""),
            run_worker_id=job_id,
        )

    def dispose(self) -> None:
        self.armada.teardown_after_execution(None)
