"""Fair share per queue sampled for the last hour's chart (armada_server.shares reads a
sample: the latest scheduling cycle's figures)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from concurrent.futures import Executor

from armada_server.shares import Sample, compute, pause
from armada_server.storage.cycle_reports import CycleReports
from armada_server.storage.queues import Queues

log = logging.getLogger("armada_server.web")

PERIOD = 10.0  # seconds between samples
WINDOW = 3600.0  # seconds of history kept


class ShareSampler:
    """Samples every `period` seconds into a ring holding the last hour."""

    def __init__(
        self,
        cycles: CycleReports,
        queues: Queues,
        period: float = PERIOD,
        window: float = WINDOW,
    ) -> None:
        self.cycles = cycles
        self.queues = queues
        self.period = period
        self.samples: deque[Sample] = deque(maxlen=max(2, int(window / period) + 1))
        self._wake = asyncio.Event()

    @property
    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def sample(self) -> Sample:
        """Take a sample now and keep it. Blocking."""
        found = compute(self.cycles, self.queues)
        self.samples.append(found)
        return found

    def poke(self) -> None:
        self._wake.set()

    async def run(self, pool: Executor) -> None:
        """Sample every period (sooner when poked) on `pool`'s threads, until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            started = time.monotonic()
            try:
                await loop.run_in_executor(pool, self.sample)
            except Exception:
                log.exception("fair-share sample failed; trying again next period")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause(self.period, time.monotonic() - started)):
                    await self._wake.wait()

    def history(self, since: float | None = None) -> list[Sample]:
        cutoff = since if since is not None else time.time() - WINDOW
        return [s for s in self.samples if s.time >= cutoff]
