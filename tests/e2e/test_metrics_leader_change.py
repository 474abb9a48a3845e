"""/metrics across a leader change: two armada-server replicas on one PostgreSQL database,
the scheduling leader killed mid-story. The series read from the database (jobs ended by
outcome) give the whole story on the replica that takes over; the series a replica counts
itself (manual preemptions it took, whether it leads) add up over the replicas, as
docs/metrics.md says to sum them."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import annotations as ann

from .processes import LEADER, Process, start_executor, start_server, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

METRICS_URL = re.compile(r"metrics: (http://\S+)")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(replica: Process) -> Samples:
    url = replica.wait_for(METRICS_URL).group(1).rstrip("/") + "/metrics"
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def one_cpu(seconds: float) -> submit_pb2.JobSubmitRequestItem:
    resources = {"cpu": "1", "memory": "32Mi"}
    pod = {
        "containers": [
            {
                "name": "main",
                "command": ["true"],
                "resources": {"requests": resources, "limits": resources},
            }
        ]
    }
    return job_item(pod, annotations={ann.PREFIX + "simulatedDuration": str(seconds)})


def settle(client: ArmadaClient, job_ids: list[str], state: int, what: str) -> None:
    wait_until(lambda: set(client.get_job_status(job_ids).values()) == {state}, 60, what)


@pytest.mark.postgres
def test_counters_stay_right_across_a_leader_change(
    processes: Callable[..., Process], tmp_path: Path, postgres_server: Any
) -> None:
    database = postgres_server.new_database()
    settings = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": 10}
    first, first_address = start_server(processes, "a", tmp_path, database, **settings)
    first.wait_for(LEADER, timeout=60)
    second, address = start_server(processes, "b", tmp_path, database, **settings)
    start_executor(processes, "e1", address, "simulated", tmp_path, "1x4x8Gi")
    with ArmadaClient(first_address) as via_first, ArmadaClient(address) as via_second:
        via_first.create_queue(submit_pb2.Queue(name="q"))
        # While the first replica leads: 2 succeed, 1 is cancelled, 1 preempted by hand.
        done = via_first.submit_jobs("q", "before", [one_cpu(0)] * 2)
        settle(via_first, done, submit_pb2.SUCCEEDED, "the first jobs to succeed")
        cancelled, preempted = via_first.submit_jobs("q", "before", [one_cpu(600)] * 2)
        settle(via_first, [cancelled, preempted], submit_pb2.RUNNING, "two jobs to run")
        assert via_first.cancel_jobs("q", "before", [cancelled]) == [cancelled]
        assert via_first.preempt_jobs("q", "before", [preempted]) == {preempted: ""}
        settle(via_first, [preempted], submit_pb2.PREEMPTED, "the first preemption")
        settle(via_first, [cancelled], submit_pb2.CANCELLED, "the cancel")
        before = scrape(first)
        assert before[("armada_scheduler_leader", frozenset())] == 1
        manual = ("armada_preemptions_total", frozenset({("queue", "q"), ("kind", "manual")}))
        assert before[manual] == 1

        first.kill()
        second.wait_for(LEADER, timeout=60)
        # While the second leads: 1 more succeeds, 1 more is preempted by hand.
        [later] = via_second.submit_jobs("q", "after", [one_cpu(0)])
        [victim] = via_second.submit_jobs("q", "after", [one_cpu(600)])
        settle(via_second, [later], submit_pb2.SUCCEEDED, "the later job to succeed")
        settle(via_second, [victim], submit_pb2.RUNNING, "the later victim to run")
        assert via_second.preempt_jobs("q", "after", [victim]) == {victim: ""}
        settle(via_second, [victim], submit_pb2.PREEMPTED, "the second preemption")

    after = scrape(second)
    assert after[("armada_scheduler_leader", frozenset())] == 1

    def ended(outcome: str) -> float:
        return after[("armada_jobs_ended_total", frozenset({("queue", "q"), ("outcome", outcome)}))]

    # The whole story, on the replica that took over.
    assert (ended("succeeded"), ended("cancelled"), ended("preempted")) == (3, 1, 2)
    # Counted where each request was taken: the sum over the replicas is the story's.
    assert before[manual] + after[manual] == ended("preempted") == 2
