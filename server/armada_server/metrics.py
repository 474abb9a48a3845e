"""Prometheus metrics, served over HTTP beside the gRPC port.

Job counts are read from the database when scraped, so they are right on every replica; the
counters and histograms count what this process did.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from armada_core.jobs import JobState
from armada_server.storage.store import Store

_COUNTED = {
    JobState.QUEUED: "queued", JobState.LEASED: "leased", JobState.PENDING: "pending",
    JobState.RUNNING: "running",
}


class _JobCounts(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self):  # type: ignore[no-untyped-def]
        family = GaugeMetricFamily("armada_jobs", "Jobs by queue and state (not finished)",
                                   labels=["queue", "state"])
        for (queue, state), count in sorted(self.store.count_jobs_by_queue_and_state().items()):
            if state in _COUNTED:
                family.add_metric([queue, _COUNTED[state]], count)
        yield family


class Metrics:
    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_JobCounts(store))
        self.jobs_submitted = Counter(
            "armada_jobs_submitted", "Jobs accepted through SubmitJobs", ["queue"],
            registry=self.registry)
        self.event_lag = Histogram(
            "armada_event_stream_lag_seconds",
            "Time from an event's creation to its delivery on a watch stream",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60),
            registry=self.registry)
        self.cycle_seconds = Histogram(
            "armada_scheduling_cycle_seconds", "Duration of the leader's scheduling cycles",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry)
        self._http: WSGIServer | None = None
        self.port: int | None = None

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics on a background thread; returns the port (0 picks a free one)."""

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: object) -> None:  # scrapes are not news
                pass

        self._http = make_server(host, port, make_wsgi_app(self.registry),
                                 handler_class=Quiet)
        self.port = self._http.server_port
        threading.Thread(target=self._http.serve_forever, name="armada-metrics",
                         daemon=True).start()
        return self.port

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
