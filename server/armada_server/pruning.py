"""The server's pruning of ended jobs, in the background, as gently as a batch allows.

Every `PRUNE_INTERVAL` seconds it deletes the jobs that ended more than the configured
retention ago (storage/retention.py), one batch per transaction with a pause between batches,
on the server's database threads: a scheduling cycle, a sync or a watcher's read waits at
most one batch. The settings are read from the server's config at each round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import datetime, timedelta

from armada_server.config import ServerConfig
from armada_server.retention_period import retention_seconds
from armada_server.storage.retention import Pruned, Retention

log = logging.getLogger("armada_server")

PRUNE_INTERVAL = 60.0  # seconds between rounds that found nothing more to prune


class Pruner:
    """Rounds of pruning while the server runs; `rounds` counts the finished ones."""

    def __init__(
        self,
        retention: Retention,
        config: Callable[[], ServerConfig],
        clock: Callable[[], datetime],
        interval: float = PRUNE_INTERVAL,
    ) -> None:
        self.retention = retention
        self.config = config
        self.clock = clock
        self.interval = interval
        self.rounds = 0
        self.pruned = Pruned()  # everything pruned since the server started

    async def round(self, pool: Executor) -> Pruned:
        """Prune every job that ended before the retention, batch by batch."""
        loop = asyncio.get_running_loop()
        config = self.config()
        done = Pruned()
        seconds = retention_seconds(config.retention)
        if seconds is None:
            return done
        cutoff = self.clock() - timedelta(seconds=seconds)
        while True:
            batch = await loop.run_in_executor(
                pool, self.retention.prune_batch, cutoff, config.prune_batch
            )
            if batch is None:  # another replica is pruning
                break
            done.add(batch)
            if batch.jobs < config.prune_batch:
                break
            await asyncio.sleep(config.prune_pause)
        if done.jobs:
            log.info("pruned %d jobs that ended before %s", done.jobs, cutoff.isoformat())
        self.pruned.add(done)
        return done

    async def run(self, pool: Executor) -> None:
        while True:
            try:
                await self.round(pool)
            except Exception:
                log.exception("pruning ended jobs failed; trying again next round")
            self.rounds += 1
            await asyncio.sleep(self.interval)
