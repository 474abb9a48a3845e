"""Reading a server stream with the blocking client: the silence watchdog and the stop signal.

A blocking read inside gRPC cannot be interrupted by a timeout or a flag; only cancelling the
call ends it. So silence is detected by a watchdog thread that cancels the call, and another
thread stops a wait by cancelling the call it reads (`StopSignal`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from armada_core.api import event_pb2

from .errors import Cancelled, from_rpc_error
from .watching import SilentStream, WatchOptions, job_set_request, stream_metadata


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


def relay(call: Any, method: str) -> Iterator[Any]:
    """A raw stream's messages, as the server sends them; gRPC failures raise ArmadaError
    (naming `method`), and closing the iterator cancels the call."""
    try:
        yield from call
    except grpc.RpcError as e:
        raise from_rpc_error(e, method) from None
    finally:
        call.cancel()


def read_events(
    call: Any, *, silence: float | None, stop: StopSignal | None = None
) -> Iterator[event_pb2.EventStreamMessage]:
    """The messages of one GetJobSetEvents call, heartbeats included. Raises SilentStream
    when `silence` seconds pass without a message, else ArmadaError (Cancelled once `stop`
    is set); closing the iterator cancels the call."""
    dog = _Watchdog(call, silence) if silence else None
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
            raise SilentStream() from None
        raise from_rpc_error(e, "Event/GetJobSetEvents") from None
    finally:
        if stop is not None:
            stop.detach(call)
        if dog is not None:
            dog.close()
        call.cancel()


class JobSetStream:
    """One job set's GetJobSetEvents stream, opened as often as following it takes: with
    heartbeats asked for (`options`), read under the silence watchdog and the stop signal."""

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
        self,
        after: str,
        *,
        watch: bool,
        silence: float | None = None,
        stop: StopSignal | None = None,
    ) -> Iterator[event_pb2.EventStreamMessage]:
        """One connection, from after message `after`, heartbeats included; raises
        SilentStream or ArmadaError (Cancelled once `stop` is set)."""
        request = job_set_request(self.queue, self.job_set_id, after, watch=watch)
        call = self._stub.GetJobSetEvents(request, metadata=self._metadata)
        yield from read_events(call, silence=silence if watch else None, stop=stop)
