"""Following running jobs' logs through the Logs RPC, so their output reaches an
orchestrator's task log while they run rather than after they end.

Binoculars answers "the lines after `since_time`" (the local executor's timestamps strictly
increase), so polling with the last line's time never repeats or skips a line, also across the
server's retries of the job (a new run's lines are later still).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from .errors import TRANSIENT_CODES, ArmadaError
from .sync import ArmadaClient

#: Receives (job id, line) for every line a followed job writes.
LineHandler = Callable[[str, str], None]
#: Receives a warning worth showing (a job whose logs cannot be read, ...).
WarningHandler = Callable[[str], None]


class JobLogFollower:
    """Polls the logs of some jobs on a thread until stopped, then reads them one last time.

    Logs are best effort: a server (or executor) that does not serve them costs one warning
    per job, never the task that follows them.
    """

    def __init__(self, client: ArmadaClient, job_ids: Sequence[str], on_line: LineHandler, *,
                 interval: float = 1.0, on_warning: WarningHandler | None = None) -> None:
        self._client = client
        self._job_ids = list(dict.fromkeys(job_ids))
        self._on_line = on_line
        self._on_warning = on_warning
        self._interval = interval
        self._since: dict[str, str] = dict.fromkeys(self._job_ids, "")
        self._gave_up: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> JobLogFollower:
        if self._job_ids and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="armada-log-follower",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()

    def poll(self) -> None:
        """Read and hand over every line written since the last poll."""
        with self._lock:
            for job_id in self._job_ids:
                if job_id in self._gave_up:
                    continue
                try:
                    lines = self._client.logs(job_id, since_time=self._since[job_id])
                except ArmadaError as e:
                    if e.code not in TRANSIENT_CODES:
                        self._gave_up.add(job_id)
                        if self._on_warning is not None:
                            self._on_warning(f"cannot follow the logs of Armada job {job_id}: "
                                             f"{e.details or e.code.name}")
                    continue
                for line in lines:
                    self._on_line(job_id, line.line)
                    self._since[job_id] = line.timestamp or self._since[job_id]

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
