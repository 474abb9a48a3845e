"""Prometheus metrics, served at /metrics by the HTTP app beside the gRPC port (web/).

Two kinds of series (docs/metrics.md says how each sums over replicas): what the database
holds (metrics_db.py: job counts, ended jobs, the latest cycle's shares, nodes, executors),
the same on every replica; and what this process did (submissions, preemptions it decided
or was asked for, cycle times, watch lag, whether it leads, its database pool), summed
over replicas.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from armada_core import scheduling as s
from armada_server.metrics_db import DatabaseSeries
from armada_server.scheduling.preemption_kind import PREEMPTION_KINDS
from armada_server.storage.job_reads import JobReads
from armada_server.storage.nodes import Nodes


def preemption_kinds(snapshot: s.Snapshot, kinds: Mapping[str, str]) -> Tally[tuple[str, str]]:
    """(queue, kind) -> jobs the cycle preempted, from each preempted job's kind
    (scheduling/preemption_kind.py), the one its run keeps."""
    if not kinds:
        return Tally()  # most cycles: not a walk over a backlog's million jobs
    queues = {j.id: j.queue for j in snapshot.jobs if j.id in kinds}
    return Tally((queues[job_id], kind) for job_id, kind in kinds.items())


class _IsolatedFailures(Collector):
    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "armada_isolated_job_failures",
            "Jobs failed alone because processing them raised, so that the scheduling loop "
            "and executor syncs went on for everyone else",
            labels=["stage"],
        )
        for stage, count in sorted({"scheduling": 0, **self.counts}.items()):
            family.add_metric([stage], count)
        yield family


class _Preemptions(Collector):
    """Preemptions this process decided (the leader's cycles) or was asked for (manual),
    every queue the same scrape found in the database at 0 for every kind (the registry
    collects the database's series first)."""

    def __init__(self, queues: Callable[[], list[str]]) -> None:
        self.counts: Tally[tuple[str, str]] = Tally()
        self.queues = queues
        self._lock = threading.Lock()

    def add(self, counts: Mapping[tuple[str, str], int]) -> None:
        with self._lock:
            self.counts.update(counts)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "armada_preemptions",
            "Jobs preempted, by queue and kind, counted by the replica that decided or "
            "took the request (sum over replicas)",
            labels=["queue", "kind"],
        )
        with self._lock:
            for queue in sorted(set(self.queues()) | {q for q, _ in self.counts}):
                for kind in PREEMPTION_KINDS:
                    family.add_metric([queue, kind], self.counts[(queue, kind)])
        yield family


class _DatabasePool(Collector):
    """This process's connections to the database: in use, idle, and the pool's size."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        pool = self.engine.pool
        family = GaugeMetricFamily(
            "armada_database_connections",
            "This replica's database connections: in_use, idle, and size (the pool's limit "
            "before overflow; 0 for a pool without one)",
            labels=["state"],
        )
        for state, method in (("in_use", "checkedout"), ("idle", "checkedin"), ("size", "size")):
            read = getattr(pool, method, None)
            family.add_metric([state], float(read()) if callable(read) else 0.0)
        yield family


class Metrics:
    def __init__(
        self,
        jobs: JobReads,
        isolated_failures: Mapping[str, int],
        *,
        nodes: Nodes | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.database = DatabaseSeries(jobs, nodes)
        self.registry.register(self.database)
        self.registry.register(_IsolatedFailures(isolated_failures))
        self.registry.register(_DatabasePool(jobs.engine))
        self.preemptions = _Preemptions(lambda: self.database.known_queues)
        self.registry.register(self.preemptions)
        self.jobs_submitted = Counter(
            "armada_jobs_submitted",
            "Jobs accepted through SubmitJobs",
            ["queue"],
            registry=self.registry,
        )
        self.event_lag = Histogram(
            "armada_event_stream_lag_seconds",
            "Time from a live event's creation to its delivery on a watch stream (events "
            "stored before the watch began are history, not lag, and are not observed)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60),
            registry=self.registry,
        )
        self.cycle_seconds = Histogram(
            "armada_scheduling_cycle_seconds",
            "Duration of the leader's scheduling cycles",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.leader = Gauge(
            "armada_scheduler_leader",
            "1 while this replica leads the scheduling cycles, else 0",
            registry=self.registry,
        )
        # The HTTP port /metrics is served on, once the server listens (None: not served).
        self.port: int | None = None

    def count_preemptions(self, counts: Mapping[tuple[str, str], int]) -> None:
        self.preemptions.add(counts)

    def count_manual_preemptions(self, queue: str, results: Iterable[str]) -> None:
        """A preemption request's results (job id -> error, "" when asked for)."""
        asked = sum(1 for error in results if not error)
        self.preemptions.add({(queue, "manual"): asked})

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape's body and content type for an Accept header. Blocking: it reads job
        counts from the database, so callers run it off the event loop."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type
