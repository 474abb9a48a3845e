"""The scheduling reports survive a leader change: two armada-server replicas on one
PostgreSQL database, the scheduling leader is killed, and the follower that takes over goes on
numbering cycles from the last kept one and goes on with a waiting job's reason history (one
row per change, not restarted), while either replica answers the reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import annotations as ann

from .processes import LEADER, Process, start_executor, start_server, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NO_ROOM = "0 of 1 matching node has 4 cpu, 32Mi memory free"


def four_cpu(seconds: float) -> submit_pb2.JobSubmitRequestItem:
    resources = {"cpu": "4", "memory": "32Mi"}
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


@pytest.mark.postgres
def test_reports_survive_a_leader_change(
    processes: Callable[..., Process], tmp_path: Path, postgres_server: Any
) -> None:
    database = postgres_server.new_database()
    settings = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": 10}
    leader, leader_address = start_server(processes, "a", tmp_path, database, **settings)
    leader.wait_for(LEADER, timeout=60)
    follower, address = start_server(processes, "b", tmp_path, database, **settings)
    start_executor(processes, "e1", address, "simulated", tmp_path, "1x4x8Gi")
    with ArmadaClient(address) as client, ArmadaClient(leader_address) as via_leader:
        client.create_queue(submit_pb2.Queue(name="q"))
        [running] = client.submit_jobs("q", "s", [four_cpu(600)])
        wait_until(
            lambda: client.get_job_status([running])[running] == submit_pb2.RUNNING,
            60,
            "the first job to run",
        )
        [waiting] = client.submit_jobs("q", "s", [four_cpu(1)])

        def history() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = client.job_report(waiting).data["history"]
            return found

        wait_until(lambda: (history() or [{}])[0].get("cycles", 0) >= 3, 60, "cycles to pass")
        [before] = history()
        assert before["reason"] == NO_ROOM
        # Both replicas answer from the database.
        assert via_leader.job_report(waiting).data["history"][0]["fromCycle"] == before["fromCycle"]
        last = client.scheduling_report().data["cycles"][0]["cycle"]

        leader.kill()
        follower.wait_for(LEADER, timeout=60)

        def newest() -> int:
            cycles = client.scheduling_report(cycles=100).data["cycles"]
            return int(cycles[0]["cycle"]) if cycles else 0

        wait_until(lambda: newest() > last + 3, 60, "the new leader's cycles")
        numbers = [c["cycle"] for c in client.scheduling_report(cycles=100).data["cycles"]]
        assert numbers == sorted(numbers, reverse=True) and last in numbers  # kept, numbered on
        [after] = history()  # the same change: the new leader found the reason unchanged
        assert after["fromCycle"] == before["fromCycle"] and after["reason"] == NO_ROOM
        assert after["cycles"] > before["cycles"]
        queue = client.queue_report("q").data
        assert [(g["reason"], g["count"]) for g in queue["waiting"]] == [(NO_ROOM, 1)]
        assert queue["cycle"] > last
