"""The decisions behind following an event stream, shared by the sync and asyncio clients.

A watch must survive anything between client and server: a dropped connection, a restarted
server, a proxy that silently stops forwarding. The client resumes from the last message id it
saw, so nothing is missed or repeated. It asks our server for heartbeats (messages with an id
and no event, swallowed here) so that silence means a dead stream; upstream Armada sends
nothing while a job set is idle, so there a silent stream is simply reopened, which is cheap.
When the stream keeps failing, `wait_for_jobs` polls GetJobStatus until it comes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from armada_core.api import event_pb2

from .connection import merge_metadata
from .errors import TRANSIENT_CODES, ArmadaError, WaitTimeout

#: Metadata asking our server for heartbeats on idle watch streams.
HEARTBEAT_METADATA = ("x-armada-heartbeat", "1")


@dataclass(frozen=True)
class WatchOptions:
    """How hard to hold on to an event stream."""

    #: Ask for heartbeats (our server sends one every 30 s by default; upstream ignores it).
    heartbeats: bool = True
    #: No message at all (not even a heartbeat) for this long: the stream is dead, reopen it.
    silence_timeout: float = 90.0
    #: Delay before reconnecting after a failure; doubles per failure up to the maximum.
    reconnect_delay: float = 0.2
    max_reconnect_delay: float = 5.0
    #: wait_for_jobs: after this many consecutive failures, poll GetJobStatus meanwhile.
    fallback_after: int = 3
    #: wait_for_jobs: how often to poll while the stream is down.
    poll_interval: float = 5.0
    #: follow_events: give up after this many consecutive failures (None: never).
    max_failures: int | None = None


@dataclass(frozen=True)
class Notice:
    """Something a watcher may want to show: `kind` is one of connected, reconnecting,
    silent, ended, polling, resumed."""

    kind: str
    message: str
    error: ArmadaError | None = None
    failures: int = 0


NoticeHandler = Callable[[Notice], None]


def is_heartbeat(message: event_pb2.EventStreamMessage) -> bool:
    """A message that carries no event: our server's heartbeat."""
    return not message.HasField("message") or message.message.WhichOneof("events") is None


def job_set_request(
    queue: str,
    job_set_id: str,
    from_message_id: str,
    *,
    watch: bool,
    error_if_missing: bool = False,
) -> event_pb2.JobSetRequest:
    return event_pb2.JobSetRequest(
        id=job_set_id,
        queue=queue,
        watch=watch,
        from_message_id=from_message_id,
        errorIfMissing=error_if_missing,
    )


def stream_metadata(
    metadata: Sequence[tuple[str, str]], options: WatchOptions
) -> tuple[tuple[str, str], ...]:
    """A followed stream's metadata: the call's own, and the request for heartbeats."""
    return merge_metadata(metadata, [HEARTBEAT_METADATA] if options.heartbeats else None)


class SilentStream(Exception):
    """No message (not even a heartbeat) arrived within the silence timeout: the stream is
    taken for dead and reopened."""


class Reconnector:
    """Counts failures, paces reconnects, decides when to poll and when to give up."""

    def __init__(
        self,
        options: WatchOptions,
        *,
        timeout: float | None = None,
        on_notice: NoticeHandler | None = None,
        can_poll: bool = False,
    ) -> None:
        self.options = options
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.on_notice = on_notice
        self.can_poll = can_poll
        self.failures = 0
        self.polling = False
        self.events_unsupported = False
        self.connections = 0
        self._resumed_from: str | None = None

    def notify(self, kind: str, message: str, error: ArmadaError | None = None) -> None:
        if self.on_notice is not None:
            self.on_notice(Notice(kind, message, error, self.failures))

    def remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def check_deadline(self, pending: list[str]) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise WaitTimeout(
                f"jobs still not finished: {', '.join(pending)}",
                code=grpc.StatusCode.DEADLINE_EXCEEDED,
            )

    def stream_silence(self) -> float:
        """How long a stream may stay silent before it is reopened (or the deadline hits)."""
        remaining = self.remaining()
        silence = self.options.silence_timeout
        return silence if remaining is None else max(0.01, min(silence, remaining))

    def opened(self, from_message_id: str) -> None:
        self.connections += 1
        self._resumed_from = from_message_id if self.connections > 1 else None

    def received(self) -> None:
        """Any message (heartbeats too) proves the stream alive."""
        if self.polling:
            self.notify("resumed", "event stream is back; stopped polling")
        elif self._resumed_from is not None and self.failures:
            self.notify(
                "connected",
                f"event stream reopened after message {self._resumed_from or '(start)'}",
            )
        self._resumed_from = None
        self.failures = 0
        self.polling = False

    def silent(self) -> None:
        self.notify(
            "silent", f"no message for {self.stream_silence():.3g} s; reopening the event stream"
        )

    def ended(self) -> None:
        self.notify("ended", "the server closed the event stream; reopening it")

    def failed(self, error: ArmadaError) -> float:
        """Record a failure; returns how long to wait before retrying, or raises it."""
        if error.code == grpc.StatusCode.UNIMPLEMENTED and self.can_poll:
            self.events_unsupported = True
            if not self.polling:
                self.polling = True
                self.notify(
                    "polling", "the server has no event service; polling job status instead", error
                )
            return self.options.poll_interval
        if error.code not in TRANSIENT_CODES:
            raise error
        self.failures += 1
        limit = self.options.max_failures
        if not self.can_poll and limit is not None and self.failures >= limit:
            raise error
        if self.can_poll and self.failures >= self.options.fallback_after:
            if not self.polling:
                self.polling = True
                self.notify(
                    "polling",
                    f"event stream failed {self.failures} times "
                    f"({error.details or error.code.name}); polling job "
                    "status until it is back",
                    error,
                )
            return self.options.poll_interval
        delay = min(
            self.options.max_reconnect_delay,
            # The exponent is capped: 2.0 ** 1024 overflows, and any cap past the maximum
            # delay gives the same answer.
            self.options.reconnect_delay * 2.0 ** min(self.failures - 1, 64),
        )
        self.notify(
            "reconnecting",
            f"event stream failed ({error.details or error.code.name}); "
            f"reconnecting in {delay:.2g} s",
            error,
        )
        return delay

    def sleep_time(self, delay: float) -> float:
        remaining = self.remaining()
        return delay if remaining is None else min(delay, remaining)


class Following:
    """The decisions of `follow_events`, shared by both clients: where a reopened stream
    resumes (after the last message seen) and which messages to hand on."""

    def __init__(
        self, from_message_id: str, options: WatchOptions | None, on_notice: NoticeHandler | None
    ) -> None:
        self.options = options or WatchOptions()
        self.reconnector = Reconnector(self.options, on_notice=on_notice)
        self.last = from_message_id

    def opened(self) -> str:
        """A stream is opened; returns the message id it resumes after."""
        self.reconnector.opened(self.last)
        return self.last

    def received(self, message: event_pb2.EventStreamMessage) -> bool:
        """Note a message (a heartbeat too: it proves the stream alive); True for one to hand
        on."""
        self.reconnector.received()
        self.last = message.id or self.last
        return not is_heartbeat(message)
