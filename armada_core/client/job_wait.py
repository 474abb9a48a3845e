"""The decisions of `wait_for_jobs`, shared by the blocking and asyncio clients.

The clients only read the stream, make the calls and sleep; `JobWait` says where the stream
resumes, what each message changes, when to poll job status instead, when every job has
ended and when the deadline has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from armada_core.api import event_pb2

from .errors import ArmadaError
from .tracking import JobResult, JobTracker
from .watching import NoticeHandler, Reconnector, WatchOptions

EventHandler = Callable[[event_pb2.EventStreamMessage, JobResult], None]


class JobWait:
    """One wait for jobs to end: their results so far and the stream's reconnection state."""

    def __init__(
        self,
        job_ids: Sequence[str],
        *,
        options: WatchOptions | None,
        timeout: float | None,
        on_event: EventHandler | None,
        on_notice: NoticeHandler | None,
    ) -> None:
        self.options = options or WatchOptions()
        self.tracker = JobTracker(job_ids)
        self.reconnector = Reconnector(
            self.options, timeout=timeout, on_notice=on_notice, can_poll=True
        )
        self.on_event = on_event

    @property
    def results(self) -> dict[str, JobResult]:
        return self.tracker.jobs

    @property
    def polling(self) -> bool:
        """The stream keeps failing (or the server has none): poll job status meanwhile."""
        return self.reconnector.polling

    @property
    def streaming(self) -> bool:
        """The server has an event service to follow."""
        return not self.reconnector.events_unsupported

    def pending(self) -> list[str]:
        return self.tracker.pending()

    def done(self) -> bool:
        return self.tracker.done()

    def polled(self, states: dict[str, int]) -> None:
        self.tracker.apply_status(states)

    def poll_failed(self, error: ArmadaError) -> None:
        self.reconnector.notify("polling", f"status poll failed: {error.details}", error)

    def opened(self) -> str:
        """A stream is opened; returns the message id it resumes after."""
        self.reconnector.opened(self.tracker.last_message_id)
        return self.tracker.last_message_id

    def silence(self) -> float:
        """How long the stream may stay silent before it is reopened."""
        return self.reconnector.stream_silence()

    def received(self, message: event_pb2.EventStreamMessage) -> bool:
        """Fold in a message; True once every job has ended (WaitTimeout past the
        deadline)."""
        self.reconnector.received()
        result = self.tracker.apply(message)
        if result is not None and self.on_event is not None:
            self.on_event(message, result)
        if self.tracker.done():
            return True
        self.check_deadline()
        return False

    def ended(self) -> None:
        """The server closed the stream."""
        self.reconnector.ended()

    def silent(self) -> None:
        """The stream was silent too long."""
        self.check_deadline()
        self.reconnector.silent()

    def failed(self, error: ArmadaError) -> float:
        """The stream failed; returns how long to wait before the next attempt, or raises."""
        return self.reconnector.failed(error)

    def pause(self, delay: float) -> float:
        """How long to sleep of `delay` before the next attempt (WaitTimeout past the
        deadline)."""
        self.check_deadline()
        return self.reconnector.sleep_time(delay)

    def check_deadline(self) -> None:
        self.reconnector.check_deadline(self.tracker.pending())
