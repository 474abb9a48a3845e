"""`ArmadaClient`: the blocking client, one method per public RPC plus resumable watching.

What each call sends and how its answer is read (`operations`), and what a wait decides
(`job_wait`, `watching`), are shared with the asyncio client; this class makes the calls.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from armada_core.api import binoculars_pb2, event_pb2, job_pb2, nodes_pb2, submit_pb2, tasks_pb2
from armada_core.retry import RetryPolicy

from . import operations as ops
from .builders import check_items
from .connection import ConnectionConfig, client_config
from .errors import ArmadaError, from_rpc_error
from .job_wait import EventHandler, JobWait
from .reports import ReportCalls
from .streams import JobSetStream, StopSignal, relay
from .tracking import JobResult
from .watching import (
    Following,
    NoticeHandler,
    SilentStream,
    WatchOptions,
    job_set_request,
)

__all__ = ["ArmadaClient", "EventHandler", "StopSignal"]

R = TypeVar("R")


class ArmadaClient(ReportCalls):
    """A blocking client for an Armada server (ours or upstream), thread-safe.

        with ArmadaClient("localhost:50051") as client:
            [job_id] = client.submit_jobs("queue", "job-set", [job_item(pod_spec)])
            results = client.wait_for_jobs("queue", "job-set", [job_id])

    Every gRPC failure raises a subclass of ArmadaError (NotFound, InvalidArgument, ...).
    """

    def __init__(
        self, address: str | None = None, *, config: ConnectionConfig | None = None, **settings: Any
    ) -> None:
        self.config = config = client_config(address, config, settings)
        self._channel = config.sync_channel()
        self._logs_channel = (
            config.sync_channel(config.logs_address) if config.logs_address else self._channel
        )
        self._metadata = config.auth_metadata()
        self._stubs = ops.service_stubs(self._channel, self._logs_channel)

    # --- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the channel(s); open streams end with Cancelled."""
        if self._logs_channel is not self._channel:
            self._logs_channel.close()
        self._channel.close()

    def __enter__(self) -> ArmadaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: ops.Call[R], timeout: float | None = None) -> R:
        method = getattr(self._stubs[call.service], call.method)
        try:
            response = method(
                call.request,
                timeout=timeout or self.config.timeout,
                metadata=self._metadata,
                wait_for_ready=self.config.wait_for_ready,
            )
        except grpc.RpcError as e:
            raise from_rpc_error(e, call.name) from None
        return call.unpack(response)

    # --- Submit -----------------------------------------------------------------------------

    def submit_jobs(
        self,
        queue: str,
        job_set_id: str,
        items: Iterable[submit_pb2.JobSubmitRequestItem],
        *,
        check: bool = True,
    ) -> list[str]:
        """Submit jobs to one queue and job set; returns their ids in order. With `check`,
        a request the server would reject raises SpecError before anything is sent."""
        return self.submit(queue, job_set_id, items, check=check).job_ids

    def submit(
        self,
        queue: str,
        job_set_id: str,
        items: Iterable[submit_pb2.JobSubmitRequestItem],
        *,
        check: bool = True,
    ) -> ops.Submission:
        """As submit_jobs, answering the ids with what the server notes of the jobs."""
        items = list(items)
        if check:
            check_items(items, queue=queue, job_set_id=job_set_id)
        return self._run(ops.submit(queue, job_set_id, items))

    def cancel_jobs(
        self, queue: str, job_set_id: str, job_ids: Iterable[str], *, reason: str = ""
    ) -> list[str]:
        """Cancel jobs by id; returns the ids actually cancelled."""
        return self._run(ops.cancel_jobs(queue, job_set_id, job_ids, reason))

    def cancel_job_set(
        self, queue: str, job_set_id: str, *, states: Iterable[ops.StateLike] = (), reason: str = ""
    ) -> None:
        """Cancel a whole job set, or only its jobs in `states` (queued, pending, running)."""
        self._run(ops.cancel_job_set(queue, job_set_id, states, reason))

    def reprioritize_jobs(
        self, queue: str, job_set_id: str, new_priority: float, job_ids: Iterable[str] = ()
    ) -> dict[str, str]:
        """New priority for jobs (none given: the whole job set); id -> error ("" = done)."""
        return self._run(ops.reprioritize_jobs(queue, job_set_id, new_priority, job_ids))

    def preempt_jobs(
        self, queue: str, job_set_id: str, job_ids: Iterable[str], *, reason: str = ""
    ) -> dict[str, str]:
        """Ask for running jobs to be preempted; id -> error ("" = requested)."""
        return self._run(ops.preempt_jobs(queue, job_set_id, job_ids, reason))

    def health(self, service: str = "Submit") -> int:
        """The Submit (or "Event") service's HealthCheckResponse.ServingStatus."""
        return self._run(ops.health(service))

    # --- queues -----------------------------------------------------------------------------

    def create_queue(self, queue: submit_pb2.Queue) -> None:
        self._run(ops.create_queue(queue))

    def create_queues(
        self, queues: Iterable[submit_pb2.Queue]
    ) -> list[submit_pb2.QueueCreateResponse]:
        """Create several queues; returns the ones that failed, each with its error."""
        return self._run(ops.create_queues(queues))

    def update_queue(self, queue: submit_pb2.Queue) -> None:
        self._run(ops.update_queue(queue))

    def update_queues(
        self, queues: Iterable[submit_pb2.Queue]
    ) -> list[submit_pb2.QueueUpdateResponse]:
        """Update several queues; returns the ones that failed, each with its error."""
        return self._run(ops.update_queues(queues))

    def delete_queue(self, name: str) -> None:
        self._run(ops.delete_queue(name))

    def get_queue(self, name: str) -> submit_pb2.Queue:
        return self._run(ops.get_queue(name))

    def get_queues(self, num: int = 0) -> list[submit_pb2.Queue]:
        """Every queue (at most `num` when given), read from the stream up to its end marker."""
        call = self._stubs["QueueService"].GetQueues(
            submit_pb2.StreamingQueueGetRequest(num=num),
            timeout=self.config.timeout,
            metadata=self._metadata,
        )
        return ops.queues_until_end(relay(call, "QueueService/GetQueues"))

    def cordon_queue(self, name: str) -> None:
        self._run(ops.cordon_queue(name))

    def uncordon_queue(self, name: str) -> None:
        self._run(ops.uncordon_queue(name))

    def preempt_on_queue(
        self, name: str, *, priority_classes: Iterable[str] = (), pools: Iterable[str] = ()
    ) -> None:
        """Preempt the queue's running jobs (optionally only some priority classes/pools)."""
        self._run(ops.preempt_on_queue(name, priority_classes, pools))

    def cancel_on_queue(
        self,
        name: str,
        *,
        priority_classes: Iterable[str] = (),
        states: Iterable[ops.StateLike] = (),
        pools: Iterable[str] = (),
    ) -> None:
        """Cancel the queue's jobs (optionally only some priority classes/states/pools)."""
        self._run(ops.cancel_on_queue(name, priority_classes, states, pools))

    # --- retry policies ---------------------------------------------------------------------

    def create_retry_policy(self, policy: RetryPolicy | submit_pb2.RetryPolicy) -> None:
        self._run(ops.create_retry_policy(policy))

    def update_retry_policy(self, policy: RetryPolicy | submit_pb2.RetryPolicy) -> None:
        self._run(ops.update_retry_policy(policy))

    def delete_retry_policy(self, name: str) -> None:
        self._run(ops.delete_retry_policy(name))

    def get_retry_policy(self, name: str) -> submit_pb2.RetryPolicy:
        return self._run(ops.get_retry_policy(name))

    def get_retry_policies(self) -> list[submit_pb2.RetryPolicy]:
        return self._run(ops.get_retry_policies())

    # --- job queries ------------------------------------------------------------------------

    def get_job_status(self, job_ids: Iterable[str]) -> dict[str, int]:
        """id -> JobState number; ids the server never saw are UNKNOWN."""
        return self._run(ops.get_job_status(job_ids))

    def get_job_status_by_external_uri(
        self, queue: str, job_set_id: str, external_job_uri: str
    ) -> dict[str, int]:
        return self._run(ops.get_job_status_by_external_uri(queue, job_set_id, external_job_uri))

    def get_job_details(
        self, job_ids: Iterable[str], *, expand_job_spec: bool = False, expand_job_run: bool = False
    ) -> dict[str, job_pb2.JobDetails]:
        return self._run(ops.get_job_details(job_ids, expand_job_spec, expand_job_run))

    def get_job_errors(self, job_ids: Iterable[str]) -> dict[str, str]:
        return self._run(ops.get_job_errors(job_ids))

    def get_job_run_details(self, run_ids: Iterable[str]) -> dict[str, job_pb2.JobRunDetails]:
        return self._run(ops.get_job_run_details(run_ids))

    def get_active_queues(self) -> dict[str, list[str]]:
        """pool -> queues with active jobs."""
        return self._run(ops.get_active_queues())

    def get_nodes(self, executor: str = "") -> list[nodes_pb2.NodeStatus]:
        """Every executor's nodes with capacity, use and cordons (our extension service
        `api.Nodes`; an upstream server answers Unimplemented)."""
        return self._run(ops.get_nodes(executor))

    def get_live_task_jobs(
        self, queue: str = "", orchestrator: str = ""
    ) -> list[tasks_pb2.LiveTaskJob]:
        """Live jobs of orchestrator tasks (external job URI `<orchestrator>://...`) in
        `queue` or every queue the caller may watch, with their annotations (our extension
        service `api.TaskJobs`; an upstream server answers Unimplemented)."""
        return self._run(ops.get_live_task_jobs(queue, orchestrator))

    # --- logs -------------------------------------------------------------------------------

    def logs(
        self,
        job_id: str,
        *,
        pod_number: int = 0,
        namespace: str = "",
        since_time: str = "",
        tail_lines: int | None = None,
        timestamps: bool = False,
        container: str = "",
        previous: bool = False,
        run_id: str = "",
    ) -> list[binoculars_pb2.LogLine]:
        """A job's pod log through binoculars.Binoculars/Logs (ConnectionConfig.logs_address
        when binoculars runs elsewhere): of its latest run, or of the run `run_id` (our
        extension; a server without it refuses the call)."""
        return self._run(
            ops.logs(
                job_id,
                pod_number=pod_number,
                namespace=namespace,
                since_time=since_time,
                tail_lines=tail_lines,
                timestamps=timestamps,
                container=container,
                previous=previous,
                run_id=run_id,
            )
        )

    def cordon_node(self, node: str) -> None:
        """Schedule nothing new on `node` (`NODE` or `EXECUTOR/NODE`); administrators only."""
        self._run(ops.cordon_node(node))

    def uncordon_node(self, node: str) -> None:
        """Undo cordon_node (an extension of upstream's Binoculars/Cordon)."""
        self._run(ops.uncordon_node(node))

    # --- events -----------------------------------------------------------------------------

    def get_job_set_events(
        self,
        queue: str,
        job_set_id: str,
        *,
        from_message_id: str = "",
        watch: bool = False,
        error_if_missing: bool = False,
        timeout: float | None = None,
    ) -> Iterator[event_pb2.EventStreamMessage]:
        """One raw GetJobSetEvents stream, exactly as the server sends it (no resume)."""
        request = job_set_request(
            queue, job_set_id, from_message_id, watch=watch, error_if_missing=error_if_missing
        )
        call = self._stubs["Event"].GetJobSetEvents(
            request, timeout=timeout, metadata=self._metadata
        )
        yield from relay(call, "Event/GetJobSetEvents")

    def watch(
        self, queue: str, job_set_id: str, *, from_id: str = "", timeout: float | None = None
    ) -> Iterator[event_pb2.EventStreamMessage]:
        """The older Event/Watch RPC, raw (prefer follow_events)."""
        request = event_pb2.WatchRequest(queue=queue, job_set_id=job_set_id, from_id=from_id)
        call = self._stubs["Event"].Watch(request, timeout=timeout, metadata=self._metadata)
        yield from relay(call, "Event/Watch")

    def _job_set(self, queue: str, job_set_id: str, options: WatchOptions) -> JobSetStream:
        return JobSetStream(self._stubs["Event"], self._metadata, queue, job_set_id, options)

    def follow_events(
        self,
        queue: str,
        job_set_id: str,
        *,
        from_message_id: str = "",
        watch: bool = True,
        options: WatchOptions | None = None,
        on_notice: NoticeHandler | None = None,
    ) -> Iterator[event_pb2.EventStreamMessage]:
        """A job set's events from `from_message_id` on, across any disconnect: reconnects
        resume after the last message id seen, so nothing is repeated or missed. Heartbeats
        are swallowed. With watch=False, ends once the events that existed are delivered.
        Closing the iterator closes the stream."""
        follow = Following(from_message_id, options, on_notice)
        stream = self._job_set(queue, job_set_id, follow.options)
        silence = follow.options.silence_timeout
        while True:
            try:
                for message in stream.open(follow.opened(), watch=watch, silence=silence):
                    if follow.received(message):
                        yield message
                if not watch:
                    return
                follow.reconnector.ended()
            except SilentStream:
                follow.reconnector.silent()
            except ArmadaError as e:
                time.sleep(follow.reconnector.failed(e))

    def wait_for_jobs(
        self,
        queue: str,
        job_set_id: str,
        job_ids: Sequence[str],
        *,
        timeout: float | None = None,
        options: WatchOptions | None = None,
        on_event: EventHandler | None = None,
        on_notice: NoticeHandler | None = None,
        stop: StopSignal | None = None,
    ) -> dict[str, JobResult]:
        """Follow the job set's events until every job in `job_ids` has ended; returns each
        job's result. A failure the server will retry (retryable=true) is not an end. When
        the stream keeps failing, polls GetJobStatus meanwhile. Raises WaitTimeout after
        `timeout` seconds, and Cancelled once `stop` is set (from another thread)."""
        wait = JobWait(
            job_ids, options=options, timeout=timeout, on_event=on_event, on_notice=on_notice
        )
        if not wait.results:
            return {}
        stream = self._job_set(queue, job_set_id, wait.options)
        sleep = stop.sleep if stop is not None else time.sleep
        while True:
            if stop is not None:
                stop.check()
            if wait.polling:
                try:
                    wait.polled(self.get_job_status(wait.pending()))
                except ArmadaError as e:
                    wait.poll_failed(e)
                if wait.done():
                    self._catch_up(stream, wait)
                    return wait.results
            if wait.streaming:
                try:
                    for message in stream.open(
                        wait.opened(), watch=True, silence=wait.silence(), stop=stop
                    ):
                        if wait.received(message):
                            return wait.results
                    wait.ended()
                    continue
                except SilentStream:
                    wait.silent()
                    continue
                except ArmadaError as e:
                    if stop is not None:
                        stop.check()
                    delay = wait.failed(e)
            else:
                delay = wait.options.poll_interval
            sleep(wait.pause(delay))
            wait.check_deadline()

    def _catch_up(self, stream: JobSetStream, wait: JobWait) -> None:
        """After polling saw every job end: read the events that exist (best effort), then
        ask GetJobDetails/GetJobErrors for what the events did not tell."""
        tracker = wait.tracker
        with contextlib.suppress(ArmadaError, SilentStream):
            for message in stream.open(tracker.last_message_id, watch=False):
                tracker.apply(message)
        missing = tracker.from_status()
        if missing:
            with contextlib.suppress(ArmadaError):
                tracker.enrich(
                    self.get_job_details(missing, expand_job_run=True), self.get_job_errors(missing)
                )
