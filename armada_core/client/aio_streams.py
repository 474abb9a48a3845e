"""Reading a job set's event stream with the asyncio client.

Each read waits at most the silence timeout; cancelling the task that reads cancels the call,
so no stream is left open on the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import grpc

from armada_core.api import event_pb2

from .errors import from_rpc_error
from .watching import SilentStream, WatchOptions, job_set_request, stream_metadata


async def read_events(
    call: Any, *, silence: float | None
) -> AsyncGenerator[event_pb2.EventStreamMessage, None]:
    """The messages of one GetJobSetEvents call, heartbeats included. Raises SilentStream
    when `silence` seconds pass without a message, else ArmadaError; closing the generator
    cancels the call."""
    try:
        while True:
            try:
                if silence:
                    # Not asyncio.wait_for: on Python 3.11 it drops a cancellation that
                    # lands as a message arrives, and a cancelled wait must stop.
                    async with asyncio.timeout(silence):
                        message = await call.read()
                else:
                    message = await call.read()
            except TimeoutError:
                raise SilentStream() from None
            except grpc.RpcError as e:
                raise from_rpc_error(e, "Event/GetJobSetEvents") from None
            if message is grpc.aio.EOF:
                return
            yield message
    finally:
        call.cancel()


class JobSetStream:
    """One job set's GetJobSetEvents stream, opened as often as following it takes: with
    heartbeats asked for (`options`), each read bounded by the silence timeout."""

    def __init__(
        self,
        stub: Any,
        metadata: Sequence[tuple[str, str]],
        queue: str,
        job_set_id: str,
        options: WatchOptions,
    ) -> None:
        self._stub = stub
        self._metadata = stream_metadata(metadata, options)
        self.queue = queue
        self.job_set_id = job_set_id

    def open(
        self, after: str, *, watch: bool, silence: float | None = None
    ) -> AsyncGenerator[event_pb2.EventStreamMessage, None]:
        """One connection, from after message `after`, heartbeats included; raises
        SilentStream or ArmadaError. Read it at once, and close it (`contextlib.aclosing`)
        to cancel the call."""
        request = job_set_request(self.queue, self.job_set_id, after, watch=watch)
        call = self._stub.GetJobSetEvents(request, metadata=self._metadata)
        return read_events(call, silence=silence if watch else None)
