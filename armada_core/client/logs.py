"""Following running jobs' logs through the Logs RPC, so their output reaches an
orchestrator's task log while they run rather than after they end.

Binoculars answers "the lines after `since_time`" (the local executor's timestamps strictly
increase), so polling with the last line's time never repeats or skips a line, also across the
server's retries of the job (a new run's lines are later still). Logs are best effort: a job
whose logs cannot be read costs one warning, never the task that follows it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Sequence

from armada_core.api import binoculars_pb2
from armada_core.waiting import wait_event

from .aio import AsyncArmadaClient
from .errors import TRANSIENT_CODES, ArmadaError
from .sync import ArmadaClient

#: Receives (job id, line) for every line a followed job writes.
LineHandler = Callable[[str, str], None]
#: Receives a warning worth showing (a job whose logs cannot be read, ...).
WarningHandler = Callable[[str], None]


class LogCursor:
    """Where each followed job's log was read up to, and which jobs were given up on.

    Lines that share the last timestamp are counted, so a server whose `since_time` is
    inclusive (repeating those lines) never makes a line appear twice.
    """

    def __init__(
        self, job_ids: Iterable[str], on_line: LineHandler, on_warning: WarningHandler | None = None
    ) -> None:
        self.since: dict[str, str] = {}
        self.shown: dict[str, int] = {}
        self.gave_up: set[str] = set()
        self.on_line = on_line
        self.on_warning = on_warning
        for job_id in job_ids:
            self.restart(job_id)

    def restart(self, job_id: str) -> None:
        """Follow `job_id` from the start of its log (a new job, or a new run's new pod)."""
        self.since[job_id] = ""
        self.shown[job_id] = 0

    def jobs(self) -> list[str]:
        return [j for j in self.since if j not in self.gave_up]

    def take(self, job_id: str, lines: Iterable[binoculars_pb2.LogLine]) -> None:
        since, shown = self.since[job_id], self.shown[job_id]
        repeat = shown
        for line in lines:
            if since and line.timestamp == since and repeat > 0:
                repeat -= 1  # an inclusive since_time repeats the lines already shown
                continue
            if line.timestamp and line.timestamp != since:
                since, shown = line.timestamp, 0
            shown += 1
            self.on_line(job_id, line.line)
        self.since[job_id], self.shown[job_id] = since, shown

    def failed(self, job_id: str, error: ArmadaError) -> None:
        if error.code in TRANSIENT_CODES:
            return  # try again next time
        self.gave_up.add(job_id)
        if self.on_warning is not None:
            self.on_warning(
                f"cannot follow the logs of Armada job {job_id}: {error.details or error.code.name}"
            )

    async def poll_async(self, client: AsyncArmadaClient) -> None:
        """Read and hand over every followed job's new lines."""
        for job_id in self.jobs():
            try:
                lines = await client.logs(job_id, since_time=self.since[job_id])
            except ArmadaError as e:
                self.failed(job_id, e)
                continue
            self.take(job_id, lines)


class JobLogFollower:
    """Polls the logs of some jobs on a thread until stopped, then reads them one last time."""

    def __init__(
        self,
        client: ArmadaClient,
        job_ids: Sequence[str],
        on_line: LineHandler,
        *,
        interval: float = 1.0,
        on_warning: WarningHandler | None = None,
    ) -> None:
        self._client = client
        self._cursor = LogCursor(dict.fromkeys(job_ids), on_line, on_warning)
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> JobLogFollower:
        if self._cursor.since and self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="armada-log-follower", daemon=True
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()

    def poll(self) -> None:
        """Read and hand over every line written since the last poll."""
        with self._lock:
            for job_id in self._cursor.jobs():
                try:
                    lines = self._client.logs(job_id, since_time=self._cursor.since[job_id])
                except ArmadaError as e:
                    self._cursor.failed(job_id, e)
                    continue
                self._cursor.take(job_id, lines)

    def stop(self, *, final_read: bool = True) -> None:
        """Stop polling; with `final_read`, hand over what the jobs wrote last."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if final_read:
            self.poll()

    def __enter__(self) -> JobLogFollower:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def follow_logs(
    client: AsyncArmadaClient,
    job_ids: Sequence[str],
    on_line: LineHandler,
    *,
    stop: asyncio.Event,
    interval: float = 1.0,
    on_warning: WarningHandler | None = None,
) -> None:
    """The asyncio flavour: poll until `stop` is set, then read one last time."""
    cursor = LogCursor(dict.fromkeys(job_ids), on_line, on_warning)
    while True:
        last_round = stop.is_set()
        await cursor.poll_async(client)
        if last_round:
            return
        await wait_event(stop, interval)
