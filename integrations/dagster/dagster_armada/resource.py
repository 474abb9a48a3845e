"""`ArmadaResource`: how Dagster code reaches an Armada server, and the job operations every
piece of this integration (assets, ops, Pipes, the run launcher) shares."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from armada_core.api import event_pb2, submit_pb2
from armada_core.client import (
    ArmadaClient,
    ConnectionConfig,
    JobResult,
    PodSpecLike,
    Role,
    WatchOptions,
    gang_items,
    job_item,
    pod_group_items,
)
from armada_core.client.lifecycle import WaitSettings
from armada_core.client.lifecycle import wait as lifecycle_wait

EventHandler = Callable[[event_pb2.EventStreamMessage, JobResult], None]
LogDestination = Literal["compute_log", "event_log", "both", "none"]


class ArmadaResource(ConfigurableResource):
    """Connection to an Armada server plus the defaults jobs are submitted with.

    Secrets belong in environment variables: ``token=EnvVar("ARMADA_TOKEN")``.
    """

    address: str = Field(default="localhost:50051", description="host:port of the server.")
    tls: bool = Field(default=False, description="Use TLS (implied by root_certificates).")
    root_certificates: str | None = Field(
        default=None, description="PEM text of the CA that signed the server's certificate."
    )
    token: str | None = Field(default=None, description="Bearer token (use EnvVar).")
    username: str | None = Field(default=None, description="Basic-auth user.")
    password: str | None = Field(default=None, description="Basic-auth password (use EnvVar).")
    logs_address: str | None = Field(
        default=None, description="Where binoculars (the Logs RPC) runs, if not the server."
    )
    request_timeout: float = Field(default=60.0, description="Deadline of unary calls (s).")

    queue: str = Field(description="Queue jobs are submitted to.")
    job_set_id: str = Field(
        default="dagster-{run_id}",
        description="Job set naming; {run_id} and {job_name} are filled in from the run.",
    )
    namespace: str = Field(default="default", description="Namespace of submitted jobs.")
    priority_class: str | None = Field(
        default=None, description="Priority class of submitted jobs (server default if unset)."
    )
    lookout_url_template: str | None = Field(
        default=None,
        description="Link shown in metadata, e.g. 'https://lookout/jobs/{job_id}' "
        "({queue} and {job_set_id} are filled in too).",
    )

    log_destination: LogDestination = Field(
        default="compute_log",
        description="Where job log lines go while it runs: compute_log (stdout of the step), "
        "event_log (one Dagster log entry per line), both, or none.",
    )
    log_poll_interval: float = Field(default=1.0, description="Seconds between log reads.")
    status_check_interval: float = Field(
        default=60.0,
        description="While waiting, a job the server has not known for this long fails the "
        "step (ArmadaJobDisappeared) instead of hanging it; checked with the "
        "waiting reasons, at least this often.",
    )
    poll_interval: float = Field(
        default=5.0, description="Status polling period while the event stream is down."
    )
    wait_timeout: float | None = Field(
        default=None, description="Give up waiting for a job after this many seconds."
    )
    max_infrastructure_retries: int = Field(
        default=2,
        description="Retries of an infrastructure failure when the op has no RetryPolicy.",
    )
    waiting_log_interval: float = Field(
        default=60.0,
        description="While a job waits to run, the step's log says why (the scheduler's "
        "reason) when it changes and again every this many seconds.",
    )
    waiting_poll_interval: float = Field(
        default=10.0, description="How often the waiting reason is read (s)."
    )
    cancel_wait: float = Field(
        default=300.0,
        description="How long a new attempt waits for the jobs of earlier attempts it "
        "cancelled to end before giving up (it never submits beside them).",
    )

    _client: ArmadaClient | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    # --- connection ------------------------------------------------------------------------

    def connection_config(self) -> ConnectionConfig:
        """The armada_core connection settings this resource describes."""
        return ConnectionConfig(
            address=self.address,
            tls=self.tls or self.root_certificates is not None,
            root_certificates=self.root_certificates.encode() if self.root_certificates else None,
            token=self.token,
            username=self.username,
            password=self.password,
            logs_address=self.logs_address,
            timeout=self.request_timeout,
        )

    def get_client(self) -> ArmadaClient:
        """The shared (thread-safe) client, created on first use."""
        with self._lock:
            if self._client is None:
                self._client = ArmadaClient(config=self.connection_config())
            return self._client

    def teardown_after_execution(self, context: InitResourceContext | None) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # --- naming ----------------------------------------------------------------------------

    def job_set_for(self, run_id: str, job_name: str = "") -> str:
        """The job set a run's jobs go to (one per run by default, so a run's jobs can be
        followed and cancelled together)."""
        return self.job_set_id.format(run_id=run_id, job_name=job_name or "job")

    def job_url(self, job_id: str, job_set_id: str) -> str | None:
        if not self.lookout_url_template:
            return None
        return self.lookout_url_template.format(
            job_id=job_id, queue=self.queue, job_set_id=job_set_id
        )

    # --- operations ------------------------------------------------------------------------

    def _defaults(self, job: dict[str, Any]) -> dict[str, Any]:
        job.setdefault("namespace", self.namespace)
        if self.priority_class is not None:
            job.setdefault("priority_class", self.priority_class)
        return job

    def submit_items(
        self, job_set_id: str, items: Iterable[submit_pb2.JobSubmitRequestItem]
    ) -> list[str]:
        """Submit prepared items (job_item / gang_items / pod_group_items) to the resource's
        queue."""
        return self.get_client().submit_jobs(self.queue, job_set_id, list(items))

    def submit_job(
        self, pod_spec: PodSpecLike, *, job_set_id: str, client_id: str = "", **job: Any
    ) -> str:
        """Submit one job; with a client_id, resubmitting returns the same job."""
        [job_id] = self.submit_items(
            job_set_id, [job_item(pod_spec, client_id=client_id, **self._defaults(job))]
        )
        return job_id

    def submit_gang(
        self,
        pod_specs: PodSpecLike | Sequence[PodSpecLike],
        *,
        job_set_id: str,
        replicas: int | None = None,
        client_id: str = "",
        **job: Any,
    ) -> list[str]:
        """Submit a gang (all members scheduled together or not at all)."""
        return self.submit_items(
            job_set_id,
            gang_items(pod_specs, replicas=replicas, client_id=client_id, **self._defaults(job)),
        )

    def submit_pod_group(
        self,
        roles: Sequence[Role | Mapping[str, Any]],
        *,
        job_set_id: str,
        client_id: str = "",
        **job: Any,
    ) -> list[str]:
        """Submit an elastic pod group (`pod_group_items`): it starts once every role's
        minimum fits; members above a minimum run as room allows and give way first."""
        return self.submit_items(
            job_set_id, pod_group_items(roles, client_id=client_id, **self._defaults(job))
        )

    def cancel(self, job_ids: Iterable[str], *, job_set_id: str, reason: str = "") -> list[str]:
        """Cancel jobs; returns the ids the server cancelled."""
        return self.get_client().cancel_jobs(self.queue, job_set_id, list(job_ids), reason=reason)

    def logs(self, job_id: str, **options: Any) -> list[str]:
        """A job's log lines (binoculars options: tail_lines, since_time, container, ...)."""
        return [line.line for line in self.get_client().logs(job_id, **options)]

    def wait_settings(
        self, timeout: float | None = None, *, stream_logs: bool = True
    ) -> WaitSettings:
        """This resource's options as the task lifecycle's wait settings."""
        return WaitSettings(
            stream_logs=stream_logs,
            log_interval=self.log_poll_interval,
            check_interval=min(self.waiting_poll_interval, self.status_check_interval),
            waiting_interval=self.waiting_log_interval,
            vanish_after=self.status_check_interval,
            timeout=self.wait_timeout if timeout is None else timeout,
            watch=WatchOptions(poll_interval=self.poll_interval),
        )

    def wait(
        self,
        job_ids: Sequence[str],
        *,
        job_set_id: str,
        on_event: EventHandler | None = None,
        timeout: float | None = None,
    ) -> dict[str, JobResult]:
        """Follow the job set until every job ended (through the server's retries): the task
        lifecycle's wait (`armada_core.client.lifecycle.wait`), without logs.

        It rides out disconnects and a server restarting; a job the server has not known for
        `status_check_interval` seconds raises ArmadaJobDisappeared rather than waiting
        forever. The jobs are left running if the wait is interrupted (but cancelled when
        `timeout` runs out).
        """
        return lifecycle_wait(
            self.get_client(),
            self.queue,
            job_set_id,
            job_ids,
            on_event=on_event,
            settings=self.wait_settings(timeout, stream_logs=False),
        ).results

    def log_lines_to(self, destination: LogDestination | None = None) -> tuple[bool, bool]:
        """(to stdout, to the event log) for a destination (the resource's by default)."""
        destination = destination or self.log_destination
        return (destination in ("compute_log", "both"), destination in ("event_log", "both"))
