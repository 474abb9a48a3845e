"""`ArmadaClient`: the blocking client, one method per public RPC plus resumable watching."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from armada_core.api import (
    binoculars_pb2,
    binoculars_pb2_grpc,
    event_pb2,
    event_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_core.retry import RetryPolicy

from . import operations as ops
from .builders import check_items
from .connection import ConnectionConfig, merge_metadata
from .errors import ArmadaError, Cancelled, from_rpc_error
from .tracking import JobResult, JobTracker
from .watching import (
    HEARTBEAT_METADATA,
    NoticeHandler,
    Reconnector,
    WatchOptions,
    is_heartbeat,
    job_set_request,
)

R = TypeVar("R")
EventHandler = Callable[[event_pb2.EventStreamMessage, JobResult], None]


class _Silent(Exception):
    """The silence watchdog cancelled the stream."""


class _Watchdog:
    """Cancels a streaming call when the server sends nothing for `timeout` seconds.

    Only time spent waiting for the server counts: while the caller holds a message (the
    generator is suspended at `yield`) the watchdog is paused.
    """

    def __init__(self, call: grpc.Call, timeout: float) -> None:
        self._call = call
        self._timeout = timeout
        self._cond = threading.Condition()
        self._deadline = time.monotonic() + timeout
        self._paused = False
        self._done = False
        self.fired = False
        threading.Thread(target=self._run, name="armada-watchdog", daemon=True).start()

    def _run(self) -> None:
        with self._cond:
            while not self._done:
                if self._paused:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining <= 0:
                    self.fired = True
                    break
                self._cond.wait(remaining)
        if self.fired:
            self._call.cancel()

    def alive(self) -> None:
        """A message arrived (or the caller is back for the next one): restart the clock."""
        with self._cond:
            self._deadline = time.monotonic() + self._timeout
            self._paused = False
            self._cond.notify()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify()


class StopSignal:
    """Ends a blocking `ArmadaClient.wait_for_jobs` from another thread: `set()` cancels the
    stream it is reading at once and cuts its pauses short, and the wait raises `Cancelled`.
    (A `threading.Event` alone cannot wake a read blocked inside gRPC.)"""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._calls: set[Any] = set()

    def set(self) -> None:
        with self._lock:
            self._event.set()
            calls = list(self._calls)
        for call in calls:
            call.cancel()

    def is_set(self) -> bool:
        return self._event.is_set()

    def sleep(self, seconds: float) -> None:
        """Sleep `seconds`, or less if set meanwhile."""
        self._event.wait(seconds)

    def check(self) -> None:
        """Raise `Cancelled` once set."""
        if self._event.is_set():
            raise Cancelled("the wait was stopped", method="Event/GetJobSetEvents")

    def attach(self, call: Any) -> None:
        """Cancel `call` when set (at once if set already)."""
        with self._lock:
            if not self._event.is_set():
                self._calls.add(call)
                return
        call.cancel()

    def detach(self, call: Any) -> None:
        with self._lock:
            self._calls.discard(call)


class ArmadaClient:
    """A blocking client for an Armada server (ours or upstream), thread-safe.

        with ArmadaClient("localhost:50051") as client:
            [job_id] = client.submit_jobs("queue", "job-set", [job_item(pod_spec)])
            results = client.wait_for_jobs("queue", "job-set", [job_id])

    Every gRPC failure raises a subclass of ArmadaError (NotFound, InvalidArgument, ...).
    """

    def __init__(
        self, address: str | None = None, *, config: ConnectionConfig | None = None, **settings: Any
    ) -> None:
        if config is None:
            config = ConnectionConfig(**({"address": address} if address else {}), **settings)
        elif address or settings:
            raise TypeError("give either a ConnectionConfig or address/settings, not both")
        self.config = config
        self._channel = config.sync_channel()
        self._logs_channel = (
            config.sync_channel(config.logs_address) if config.logs_address else self._channel
        )
        self._metadata = config.auth_metadata()
        self._stubs: dict[str, Any] = {
            "Submit": submit_pb2_grpc.SubmitStub(self._channel),
            "QueueService": submit_pb2_grpc.QueueServiceStub(self._channel),
            "RetryPolicyService": submit_pb2_grpc.RetryPolicyServiceStub(self._channel),
            "Event": event_pb2_grpc.EventStub(self._channel),
            "Jobs": job_pb2_grpc.JobsStub(self._channel),
            "Binoculars": binoculars_pb2_grpc.BinocularsStub(self._logs_channel),
        }

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
        items = list(items)
        if check:
            check_items(items, queue=queue, job_set_id=job_set_id)
        return self._run(ops.submit_jobs(queue, job_set_id, items))

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
        queues: list[submit_pb2.Queue] = []
        stub = self._stubs["QueueService"]
        try:
            for message in stub.GetQueues(
                submit_pb2.StreamingQueueGetRequest(num=num),
                timeout=self.config.timeout,
                metadata=self._metadata,
            ):
                if message.WhichOneof("event") == "end":
                    break
                queues.append(message.queue)
        except grpc.RpcError as e:
            raise from_rpc_error(e, "QueueService/GetQueues") from None
        return queues

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
    ) -> list[binoculars_pb2.LogLine]:
        """A job's pod log through binoculars.Binoculars/Logs (ConnectionConfig.logs_address
        when binoculars runs elsewhere)."""
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
        request = event_pb2.JobSetRequest(
            id=job_set_id,
            queue=queue,
            watch=watch,
            from_message_id=from_message_id,
            errorIfMissing=error_if_missing,
        )
        call = self._stubs["Event"].GetJobSetEvents(
            request, timeout=timeout, metadata=self._metadata
        )
        try:
            yield from call
        except grpc.RpcError as e:
            raise from_rpc_error(e, "Event/GetJobSetEvents") from None
        finally:
            call.cancel()

    def watch(
        self, queue: str, job_set_id: str, *, from_id: str = "", timeout: float | None = None
    ) -> Iterator[event_pb2.EventStreamMessage]:
        """The older Event/Watch RPC, raw (prefer follow_events)."""
        request = event_pb2.WatchRequest(queue=queue, job_set_id=job_set_id, from_id=from_id)
        call = self._stubs["Event"].Watch(request, timeout=timeout, metadata=self._metadata)
        try:
            yield from call
        except grpc.RpcError as e:
            raise from_rpc_error(e, "Event/Watch") from None
        finally:
            call.cancel()

    def _stream(
        self,
        queue: str,
        job_set_id: str,
        from_message_id: str,
        *,
        watch: bool,
        options: WatchOptions,
        silence: float | None,
        stop: StopSignal | None = None,
    ) -> Iterator[event_pb2.EventStreamMessage]:
        """One connection, heartbeats included; raises _Silent or ArmadaError (Cancelled
        once `stop` is set)."""
        metadata = merge_metadata(
            self._metadata, [HEARTBEAT_METADATA] if options.heartbeats else None
        )
        call = self._stubs["Event"].GetJobSetEvents(
            job_set_request(queue, job_set_id, from_message_id, watch=watch), metadata=metadata
        )
        dog = _Watchdog(call, silence) if watch and silence else None
        if stop is not None:
            stop.attach(call)
        try:
            for message in call:
                if dog is not None:
                    dog.pause()
                yield message
                if dog is not None:
                    dog.alive()
        except grpc.RpcError as e:
            if stop is not None:
                stop.check()
            if dog is not None and dog.fired:
                raise _Silent() from None
            raise from_rpc_error(e, "Event/GetJobSetEvents") from None
        finally:
            if stop is not None:
                stop.detach(call)
            if dog is not None:
                dog.close()
            call.cancel()

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
        options = options or WatchOptions()
        state = Reconnector(options, on_notice=on_notice)
        last = from_message_id
        while True:
            state.opened(last)
            try:
                for message in self._stream(
                    queue,
                    job_set_id,
                    last,
                    watch=watch,
                    options=options,
                    silence=options.silence_timeout,
                ):
                    state.received()
                    last = message.id or last
                    if not is_heartbeat(message):
                        yield message
                if not watch:
                    return
                state.ended()
            except _Silent:
                state.silent()
            except ArmadaError as e:
                time.sleep(state.failed(e))

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
        options = options or WatchOptions()
        tracker = JobTracker(job_ids)
        if not tracker.jobs:
            return {}
        state = Reconnector(options, timeout=timeout, on_notice=on_notice, can_poll=True)
        sleep = stop.sleep if stop is not None else time.sleep
        while True:
            if stop is not None:
                stop.check()
            if state.polling:
                try:
                    tracker.apply_status(self.get_job_status(tracker.pending()))
                except ArmadaError as e:
                    state.notify("polling", f"status poll failed: {e.details}", e)
                if tracker.done():
                    self._catch_up(queue, job_set_id, tracker, options)
                    return tracker.jobs
            if not state.events_unsupported:
                state.opened(tracker.last_message_id)
                try:
                    for message in self._stream(
                        queue,
                        job_set_id,
                        tracker.last_message_id,
                        watch=True,
                        options=options,
                        silence=state.stream_silence(),
                        stop=stop,
                    ):
                        state.received()
                        result = tracker.apply(message)
                        if result is not None and on_event is not None:
                            on_event(message, result)
                        if tracker.done():
                            return tracker.jobs
                        state.check_deadline(tracker.pending())
                    state.ended()
                    continue
                except _Silent:
                    state.check_deadline(tracker.pending())
                    state.silent()
                    continue
                except ArmadaError as e:
                    if stop is not None:
                        stop.check()
                    delay = state.failed(e)
            else:
                delay = options.poll_interval
            state.check_deadline(tracker.pending())
            sleep(state.sleep_time(delay))
            state.check_deadline(tracker.pending())

    def _catch_up(
        self, queue: str, job_set_id: str, tracker: JobTracker, options: WatchOptions
    ) -> None:
        """After polling saw every job end: read the events that exist (best effort), then
        ask GetJobDetails/GetJobErrors for what the events did not tell."""
        try:
            for message in self._stream(
                queue,
                job_set_id,
                tracker.last_message_id,
                watch=False,
                options=options,
                silence=None,
            ):
                tracker.apply(message)
        except (ArmadaError, _Silent):
            pass
        missing = tracker.from_status()
        if missing:
            with contextlib.suppress(ArmadaError):
                tracker.enrich(
                    self.get_job_details(missing, expand_job_run=True), self.get_job_errors(missing)
                )
