"""Prometheus metrics, served at /metrics by the HTTP app beside the gRPC port (web/).

Job counts are read from the database when scraped, so they are right on every replica; the
counters and histograms count what this process did.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from armada_core.jobs import JobState
from armada_server.storage.job_reads import JobReads

_COUNTED = {
    JobState.QUEUED: "queued",
    JobState.LEASED: "leased",
    JobState.PENDING: "pending",
    JobState.RUNNING: "running",
}


class _JobCounts(Collector):
    def __init__(self, jobs: JobReads) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "armada_jobs", "Jobs by queue and state (not finished)", labels=["queue", "state"]
        )
        for (queue, state), count in sorted(self.jobs.count_jobs_by_queue_and_state().items()):
            if state in _COUNTED:
                family.add_metric([queue, _COUNTED[state]], count)
        yield family


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
        for stage, count in sorted(self.counts.items()):
            family.add_metric([stage], count)
        yield family


class Metrics:
    def __init__(self, jobs: JobReads, isolated_failures: Mapping[str, int]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_JobCounts(jobs))
        self.registry.register(_IsolatedFailures(isolated_failures))
        self.jobs_submitted = Counter(
            "armada_jobs_submitted",
            "Jobs accepted through SubmitJobs",
            ["queue"],
            registry=self.registry,
        )
        self.event_lag = Histogram(
            "armada_event_stream_lag_seconds",
            "Time from an event's creation to its delivery on a watch stream",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60),
            registry=self.registry,
        )
        self.cycle_seconds = Histogram(
            "armada_scheduling_cycle_seconds",
            "Duration of the leader's scheduling cycles",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        # The HTTP port /metrics is served on, once the server listens (None: not served).
        self.port: int | None = None

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape's body and content type for an Accept header. Blocking: it reads job
        counts from the database, so callers run it off the event loop."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type
