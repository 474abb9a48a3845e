"""`AsyncArmadaClient`: the asyncio client; the same methods as ArmadaClient, awaited.

Cancelling a task that waits on a stream (follow_events, wait_for_jobs) cancels the RPC too:
no stream is left open on the server. What each call sends and how its answer is read
(`operations`), and what a wait decides (`job_wait`, `watching`), are shared with the
blocking client; this class makes the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, TypeVar

import grpc

from armada_core.api import binoculars_pb2, event_pb2, job_pb2, nodes_pb2, submit_pb2, tasks_pb2
from armada_core.retry import RetryPolicy

from . import operations as ops
from .aio_streams import JobSetStream
from .builders import check_items
from .connection import ConnectionConfig, client_config
from .errors import ArmadaError, from_rpc_error
from .job_wait import EventHandler, JobWait
from .reports import AsyncReportCalls
from .tracking import JobResult
from .watching import Following, NoticeHandler, SilentStream, WatchOptions, job_set_request

__all__ = ["AsyncArmadaClient", "EventHandler"]

R = TypeVar("R")


class AsyncArmadaClient(AsyncReportCalls):
    """An asyncio client for an Armada server (ours or upstream).

        async with AsyncArmadaClient("localhost:50051") as client:
            [job_id] = await client.submit_jobs("queue", "job-set", [job_item(pod_spec)])
            results = await client.wait_for_jobs("queue", "job-set", [job_id])

    Create it inside the event loop that uses it. Every gRPC failure raises a subclass of
    ArmadaError.
    """

    def __init__(
        self, address: str | None = None, *, config: ConnectionConfig | None = None, **settings: Any
    ) -> None:
        self.config = config = client_config(address, config, settings)
        self._channel = config.aio_channel()
        self._logs_channel = (
            config.aio_channel(config.logs_address) if config.logs_address else self._channel
        )
        self._metadata = config.auth_metadata()
        self._stubs = ops.service_stubs(self._channel, self._logs_channel)

    # --- plumbing ---------------------------------------------------------------------------

    async def close(self) -> None:
        if self._logs_channel is not self._channel:
            await self._logs_channel.close()
        await self._channel.close()

    async def __aenter__(self) -> AsyncArmadaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, call: ops.Call[R], timeout: float | None = None) -> R:
        method = getattr(self._stubs[call.service], call.method)
        rpc = method(
            call.request,
            timeout=timeout or self.config.timeout,
            metadata=self._metadata,
            wait_for_ready=self.config.wait_for_ready,
        )
        try:
            response = await _keeping_cancel_message(rpc)
        except grpc.RpcError as e:
            raise from_rpc_error(e, call.name) from None
        return call.unpack(response)

    # --- Submit -----------------------------------------------------------------------------

    async def submit_jobs(
        self,
        queue: str,
        job_set_id: str,
        items: Iterable[submit_pb2.JobSubmitRequestItem],
        *,
        check: bool = True,
    ) -> list[str]:
        """See ArmadaClient.submit_jobs."""
        return (await self.submit(queue, job_set_id, items, check=check)).job_ids

    async def submit(
        self,
        queue: str,
        job_set_id: str,
        items: Iterable[submit_pb2.JobSubmitRequestItem],
        *,
        check: bool = True,
    ) -> ops.Submission:
        """See ArmadaClient.submit."""
        items = list(items)
        if check:
            check_items(items, queue=queue, job_set_id=job_set_id)
        return await self._run(ops.submit(queue, job_set_id, items))

    async def cancel_jobs(
        self, queue: str, job_set_id: str, job_ids: Iterable[str], *, reason: str = ""
    ) -> list[str]:
        return await self._run(ops.cancel_jobs(queue, job_set_id, job_ids, reason))

    async def cancel_job_set(
        self, queue: str, job_set_id: str, *, states: Iterable[ops.StateLike] = (), reason: str = ""
    ) -> None:
        await self._run(ops.cancel_job_set(queue, job_set_id, states, reason))

    async def reprioritize_jobs(
        self, queue: str, job_set_id: str, new_priority: float, job_ids: Iterable[str] = ()
    ) -> dict[str, str]:
        return await self._run(ops.reprioritize_jobs(queue, job_set_id, new_priority, job_ids))

    async def preempt_jobs(
        self, queue: str, job_set_id: str, job_ids: Iterable[str], *, reason: str = ""
    ) -> dict[str, str]:
        return await self._run(ops.preempt_jobs(queue, job_set_id, job_ids, reason))

    async def health(self, service: str = "Submit") -> int:
        return await self._run(ops.health(service))

    # --- queues -----------------------------------------------------------------------------

    async def create_queue(self, queue: submit_pb2.Queue) -> None:
        await self._run(ops.create_queue(queue))

    async def create_queues(
        self, queues: Iterable[submit_pb2.Queue]
    ) -> list[submit_pb2.QueueCreateResponse]:
        return await self._run(ops.create_queues(queues))

    async def update_queue(self, queue: submit_pb2.Queue) -> None:
        await self._run(ops.update_queue(queue))

    async def update_queues(
        self, queues: Iterable[submit_pb2.Queue]
    ) -> list[submit_pb2.QueueUpdateResponse]:
        return await self._run(ops.update_queues(queues))

    async def delete_queue(self, name: str) -> None:
        await self._run(ops.delete_queue(name))

    async def get_queue(self, name: str) -> submit_pb2.Queue:
        return await self._run(ops.get_queue(name))

    async def get_queues(self, num: int = 0) -> list[submit_pb2.Queue]:
        queues: list[submit_pb2.Queue] = []
        call = self._stubs["QueueService"].GetQueues(
            submit_pb2.StreamingQueueGetRequest(num=num),
            timeout=self.config.timeout,
            metadata=self._metadata,
        )
        try:
            async for message in call:
                if message.WhichOneof("event") == "end":
                    break
                queues.append(message.queue)
        except grpc.RpcError as e:
            raise from_rpc_error(e, "QueueService/GetQueues") from None
        finally:
            call.cancel()
        return queues

    async def cordon_queue(self, name: str) -> None:
        await self._run(ops.cordon_queue(name))

    async def uncordon_queue(self, name: str) -> None:
        await self._run(ops.uncordon_queue(name))

    async def preempt_on_queue(
        self, name: str, *, priority_classes: Iterable[str] = (), pools: Iterable[str] = ()
    ) -> None:
        await self._run(ops.preempt_on_queue(name, priority_classes, pools))

    async def cancel_on_queue(
        self,
        name: str,
        *,
        priority_classes: Iterable[str] = (),
        states: Iterable[ops.StateLike] = (),
        pools: Iterable[str] = (),
    ) -> None:
        await self._run(ops.cancel_on_queue(name, priority_classes, states, pools))

    # --- retry policies ---------------------------------------------------------------------

    async def create_retry_policy(self, policy: RetryPolicy | submit_pb2.RetryPolicy) -> None:
        await self._run(ops.create_retry_policy(policy))

    async def update_retry_policy(self, policy: RetryPolicy | submit_pb2.RetryPolicy) -> None:
        await self._run(ops.update_retry_policy(policy))

    async def delete_retry_policy(self, name: str) -> None:
        await self._run(ops.delete_retry_policy(name))

    async def get_retry_policy(self, name: str) -> submit_pb2.RetryPolicy:
        return await self._run(ops.get_retry_policy(name))

    async def get_retry_policies(self) -> list[submit_pb2.RetryPolicy]:
        return await self._run(ops.get_retry_policies())

    # --- job queries ------------------------------------------------------------------------

    async def get_job_status(self, job_ids: Iterable[str]) -> dict[str, int]:
        return await self._run(ops.get_job_status(job_ids))

    async def get_job_status_by_external_uri(
        self, queue: str, job_set_id: str, external_job_uri: str
    ) -> dict[str, int]:
        return await self._run(
            ops.get_job_status_by_external_uri(queue, job_set_id, external_job_uri)
        )

    async def get_job_details(
        self, job_ids: Iterable[str], *, expand_job_spec: bool = False, expand_job_run: bool = False
    ) -> dict[str, job_pb2.JobDetails]:
        return await self._run(ops.get_job_details(job_ids, expand_job_spec, expand_job_run))

    async def get_job_errors(self, job_ids: Iterable[str]) -> dict[str, str]:
        return await self._run(ops.get_job_errors(job_ids))

    async def get_job_run_details(self, run_ids: Iterable[str]) -> dict[str, job_pb2.JobRunDetails]:
        return await self._run(ops.get_job_run_details(run_ids))

    async def get_active_queues(self) -> dict[str, list[str]]:
        return await self._run(ops.get_active_queues())

    async def get_nodes(self, executor: str = "") -> list[nodes_pb2.NodeStatus]:
        """Every executor's nodes with capacity, use and cordons (our extension service
        `api.Nodes`; an upstream server answers Unimplemented)."""
        return await self._run(ops.get_nodes(executor))

    async def get_live_task_jobs(
        self, queue: str = "", orchestrator: str = ""
    ) -> list[tasks_pb2.LiveTaskJob]:
        """Live jobs of orchestrator tasks (external job URI `<orchestrator>://...`) in
        `queue` or every queue the caller may watch, with their annotations (our extension
        service `api.TaskJobs`; an upstream server answers Unimplemented)."""
        return await self._run(ops.get_live_task_jobs(queue, orchestrator))

    # --- logs -------------------------------------------------------------------------------

    async def logs(
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
        return await self._run(
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

    async def cordon_node(self, node: str) -> None:
        """Schedule nothing new on `node` (`NODE` or `EXECUTOR/NODE`); administrators only."""
        await self._run(ops.cordon_node(node))

    async def uncordon_node(self, node: str) -> None:
        """Undo cordon_node (an extension of upstream's Binoculars/Cordon)."""
        await self._run(ops.uncordon_node(node))

    # --- events -----------------------------------------------------------------------------

    async def get_job_set_events(
        self,
        queue: str,
        job_set_id: str,
        *,
        from_message_id: str = "",
        watch: bool = False,
        error_if_missing: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[event_pb2.EventStreamMessage]:
        """One raw GetJobSetEvents stream, exactly as the server sends it (no resume)."""
        request = job_set_request(
            queue, job_set_id, from_message_id, watch=watch, error_if_missing=error_if_missing
        )
        call = self._stubs["Event"].GetJobSetEvents(
            request, timeout=timeout, metadata=self._metadata
        )
        try:
            async for message in call:
                yield message
        except grpc.RpcError as e:
            raise from_rpc_error(e, "Event/GetJobSetEvents") from None
        finally:
            call.cancel()

    async def watch(
        self, queue: str, job_set_id: str, *, from_id: str = "", timeout: float | None = None
    ) -> AsyncIterator[event_pb2.EventStreamMessage]:
        """The older Event/Watch RPC, raw (prefer follow_events)."""
        request = event_pb2.WatchRequest(queue=queue, job_set_id=job_set_id, from_id=from_id)
        call = self._stubs["Event"].Watch(request, timeout=timeout, metadata=self._metadata)
        try:
            async for message in call:
                yield message
        except grpc.RpcError as e:
            raise from_rpc_error(e, "Event/Watch") from None
        finally:
            call.cancel()

    def _job_set(self, queue: str, job_set_id: str, options: WatchOptions) -> JobSetStream:
        return JobSetStream(self._stubs["Event"], self._metadata, queue, job_set_id, options)

    async def follow_events(
        self,
        queue: str,
        job_set_id: str,
        *,
        from_message_id: str = "",
        watch: bool = True,
        options: WatchOptions | None = None,
        on_notice: NoticeHandler | None = None,
    ) -> AsyncIterator[event_pb2.EventStreamMessage]:
        """See ArmadaClient.follow_events. Close it with `contextlib.aclosing` (or cancel the
        task) to close the stream promptly."""
        follow = Following(from_message_id, options, on_notice)
        stream = self._job_set(queue, job_set_id, follow.options)
        silence = follow.options.silence_timeout
        while True:
            try:
                opened = stream.open(follow.opened(), watch=watch, silence=silence)
                async with contextlib.aclosing(opened) as messages:
                    async for message in messages:
                        if follow.received(message):
                            yield message
                if not watch:
                    return
                follow.reconnector.ended()
            except SilentStream:
                follow.reconnector.silent()
            except ArmadaError as e:
                await asyncio.sleep(follow.reconnector.failed(e))

    async def wait_for_jobs(
        self,
        queue: str,
        job_set_id: str,
        job_ids: Sequence[str],
        *,
        timeout: float | None = None,
        options: WatchOptions | None = None,
        on_event: EventHandler | None = None,
        on_notice: NoticeHandler | None = None,
    ) -> dict[str, JobResult]:
        """See ArmadaClient.wait_for_jobs. Cancelling the awaiting task closes the stream."""
        wait = JobWait(
            job_ids, options=options, timeout=timeout, on_event=on_event, on_notice=on_notice
        )
        if not wait.results:
            return {}
        stream = self._job_set(queue, job_set_id, wait.options)
        while True:
            if wait.polling:
                try:
                    wait.polled(await self.get_job_status(wait.pending()))
                except ArmadaError as e:
                    wait.poll_failed(e)
                if wait.done():
                    await self._catch_up(stream, wait)
                    return wait.results
            if wait.streaming:
                try:
                    opened = stream.open(wait.opened(), watch=True, silence=wait.silence())
                    async with contextlib.aclosing(opened) as messages:
                        async for message in messages:
                            if wait.received(message):
                                return wait.results
                    wait.ended()
                    continue
                except SilentStream:
                    wait.silent()
                    continue
                except ArmadaError as e:
                    delay = wait.failed(e)
            else:
                delay = wait.options.poll_interval
            await asyncio.sleep(wait.pause(delay))
            wait.check_deadline()

    async def _catch_up(self, stream: JobSetStream, wait: JobWait) -> None:
        """See ArmadaClient._catch_up."""
        tracker = wait.tracker
        with contextlib.suppress(ArmadaError, SilentStream):
            opened = stream.open(tracker.last_message_id, watch=False)
            async with contextlib.aclosing(opened) as messages:
                async for message in messages:
                    tracker.apply(message)
        missing = tracker.from_status()
        if missing:
            with contextlib.suppress(ArmadaError):
                tracker.enrich(
                    await self.get_job_details(missing, expand_job_run=True),
                    await self.get_job_errors(missing),
                )


async def _keeping_cancel_message(rpc: Any) -> Any:
    """Await a unary call so that cancelling the awaiting task raises the CancelledError it was
    cancelled with. grpc.aio raises a fresh one without the message, and callers tell apart
    why they were cancelled by it (Airflow's triggerer kills a job only on its user-action
    message). The call is cancelled all the same."""
    answer = asyncio.ensure_future(rpc)
    answer.add_done_callback(lambda done: done.cancelled() or done.exception())
    try:
        return await asyncio.shield(answer)
    except asyncio.CancelledError:
        rpc.cancel()
        raise
