"""An executor's side of the executor protocol: sync nodes and runs with the server.

The same agent drives every kind of executor; a backend does the actual work (local
processes, a simulated cluster, Kubernetes). Run updates are queued as they happen and sent on
the next sync, which is triggered early whenever there is news, so the server hears of a
finished run within milliseconds rather than a full interval later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

import grpc

from armada_core.api import executor_pb2, executor_pb2_grpc
from armada_core.waiting import wait_event
from armada_server.executors.backend import Backend, update

log = logging.getLogger("armada_server.executor")

# Run updates per sync: each sync is one transaction on the server, and a sync of 80,000
# updates held the database (and the scheduler) for tens of seconds. The rest go at once in
# the next sync.
MAX_UPDATES_PER_SYNC = 10_000
# A response with this many leases may have been cut short by the server's size bound.
LARGE_LEASE_BATCH = 1_000
# The largest sync response an agent asks for: channels opened with CHANNEL_OPTIONS receive it,
# and the server then hands out tens of thousands of leases a sync instead of 8,000.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", MAX_RESPONSE_BYTES),)
# A sync failing with one of these moves the agent to the next server address, if it has one.
FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class Control(Protocol):
    """Where the executor serves ExecutorControl (see control.py), reported in each sync."""

    address: str
    token: str


class ExecutorAgent:
    """Syncs a backend with the server. Given several channels (one per server replica), a
    sync that fails as UNAVAILABLE or times out moves it to the next one; the backend keeps
    its runs meanwhile, and the next sync renews them all on whichever replica answers."""

    def __init__(
        self,
        channel: grpc.aio.Channel | Sequence[grpc.aio.Channel],
        executor_id: str,
        pool: str,
        backend: Backend,
        *,
        interval: float = 1.0,
        metadata: Sequence[tuple[str, str]] = (),
        control: Control | None = None,
        sync_timeout: float = 60.0,
        max_response_bytes: int = 0,
    ) -> None:
        """`max_response_bytes`: what the channels receive at most (MAX_RESPONSE_BYTES for
        channels opened with CHANNEL_OPTIONS); 0 for gRPC's default."""
        self.channels = [channel] if isinstance(channel, grpc.aio.Channel) else list(channel)
        if not self.channels:
            raise ValueError("at least one channel is required")
        self.current = 0  # index of the channel in use
        self.stub = executor_pb2_grpc.ExecutorApiStub(self.channels[0])
        self.control = control
        self.sync_timeout = sync_timeout
        self.failovers = 0
        self.executor_id = executor_id
        self.pool = pool
        self.backend = backend
        self.interval = interval
        self.metadata = tuple(metadata)
        self.max_response_bytes = max_response_bytes
        self._updates: list[executor_pb2.RunUpdate] = []
        self._news = asyncio.Event()
        self.syncs = 0

    def wake(self) -> None:
        """Sync now (e.g. the scheduler just leased work to this executor)."""
        self._news.set()

    def report(self, message: executor_pb2.RunUpdate) -> None:
        self._updates.append(message)
        self._news.set()

    async def sync_once(self) -> executor_pb2.SyncResponse:
        updates = self._updates[:MAX_UPDATES_PER_SYNC]
        self._updates = self._updates[MAX_UPDATES_PER_SYNC:]
        # Runs whose news waits for a later sync still count as held: otherwise the server
        # would take a run that ended, and whose end it has not heard of yet, as lost.
        held = self.backend.held() | {u.run_id for u in self._updates}
        request = executor_pb2.SyncRequest(
            executor_id=self.executor_id,
            pool=self.pool,
            nodes=self.backend.nodes(),
            run_ids=held,  # a set to the server: in any order
            updates=updates,
            max_response_bytes=self.max_response_bytes,
        )
        if self.control is not None:
            request.control_address = self.control.address
            request.control_token = self.control.token
        # What it cannot honour: the server refuses such jobs.
        request.capabilities.CopyFrom(self.backend.capabilities.declaration())
        sent = asyncio.get_running_loop().time()
        try:
            response = await self.stub.Sync(
                request, metadata=self.metadata, timeout=self.sync_timeout
            )
        except BaseException:
            self._updates[:0] = updates  # send them again next time, in order
            raise
        self.syncs += 1
        held = self.backend.held()
        for lease in response.leases:
            if lease.run_id not in held:
                try:
                    self.backend.start(lease, self.report)
                except Exception as e:  # one bad lease must not stop the executor
                    log.exception(
                        "executor %s could not start run %s", self.executor_id, lease.run_id
                    )
                    self.report(
                        update(
                            lease.run_id,
                            lease.job.id,
                            returned=executor_pb2.RunUpdate.Returned(
                                reason=f"the executor could not start it: {e}"
                            ),
                        )
                    )
        for stop in response.stop:
            try:
                self.backend.stop(stop.run_id, preempt=stop.preempt)
            except Exception:
                log.exception("executor %s could not stop run %s", self.executor_id, stop.run_id)
        # E.g. the local executor renews its pods' heartbeat (fencing).
        elapsed = asyncio.get_running_loop().time() - sent
        self.backend.synced(response.lease_timeout_seconds, elapsed)
        if response.sync_interval_seconds > 0:
            self.interval = response.sync_interval_seconds
        if self._updates or len(response.leases) >= LARGE_LEASE_BATCH:
            # More is waiting (we send updates in bounded portions) or may be (the server
            # sends leases in portions of bounded size): sync again straight away.
            self._news.set()
        return response

    def fail_over(self) -> None:
        """Use the next server address (after the last, the first again)."""
        self.current = (self.current + 1) % len(self.channels)
        self.stub = executor_pb2_grpc.ExecutorApiStub(self.channels[self.current])
        self.failovers += 1

    async def run(self) -> None:
        """Sync until cancelled; connection problems are retried, never fatal."""
        failed_in_a_row = 0
        while True:
            self._news.clear()
            try:
                await self.sync_once()
                failed_in_a_row = 0
            except grpc.aio.AioRpcError as e:
                log.warning(
                    "executor %s could not sync: %s %s",
                    self.executor_id,
                    e.code().name,
                    e.details(),
                )
                if e.code() in FAILOVER_CODES and len(self.channels) > 1:
                    self.fail_over()
                    failed_in_a_row += 1
                    log.warning(
                        "executor %s fails over to server address %d of %d",
                        self.executor_id,
                        self.current + 1,
                        len(self.channels),
                    )
                    if failed_in_a_row < len(self.channels):
                        continue  # try the next address at once; a full round waits
                    failed_in_a_row = 0
            except Exception:  # never let the executor die: its leases would all expire
                log.exception("executor %s: sync failed", self.executor_id)
            await wait_event(self._news, self.interval)
            # Gather what else happens in the next moment into the same sync.
            await asyncio.sleep(0.005)
