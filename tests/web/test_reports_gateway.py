"""The scheduling reports over the REST gateway and on the web UI's queue and job pages, the
same reports as SchedulerReporting's, on both database backends; the fair-share chart's
samples are the latest cycle's own figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from armada_core.api import scheduler_reporting_pb2 as pb
from armada_core.api import scheduler_reporting_pb2_grpc
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup

from .conftest import start_server
from .helpers import Http, eventually

NO_ROOM = "0 of 1 matching node has 4 cpu, 1Gi memory free"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedServer]:
    overrides: dict[str, Any] = {"executor": "simulated", "nodes": (NodeGroup(1, "4", "16Gi"),)}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_server").new_database()
    running = start_server(tmp_path_factory.mktemp("reports"), **overrides)
    yield running
    running.stop()


def four_cpu() -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "1Gi"}
    return {
        "podSpec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "command": ["true"],
                    "resources": {"requests": resources, "limits": resources},
                }
            ]
        },
        "annotations": {"armadaproject.io/simulatedDuration": "600"},
    }


def test_reports_over_http_and_on_the_pages(server: EmbeddedServer) -> None:
    http = Http(f"http://127.0.0.1:{server.server.http_port}")
    http.post("/api/v1/queues", {"name": "r"}, expect=201)
    [running] = http.submit("r", "s", four_cpu())
    http.wait_state(running, "RUNNING")
    [waiting] = http.submit("r", "s", four_cpu())
    report = eventually(
        lambda: (r := http.get(f"/api/v1/jobs/{waiting}/report"))["history"] and r,
        timeout=60,
        what="a reason kept for the waiting job",
    )
    assert [s["reason"] for s in report["history"]] == [NO_ROOM]
    assert (report["placeInLine"], report["lineLength"], report["state"]) == (1, 1, "QUEUED")
    # The same report as SchedulerReporting's (the cycles counted move on between reads).
    with grpc.insecure_channel(server.address) as channel:
        stub = scheduler_reporting_pb2_grpc.SchedulerReportingStub(channel)
        over_grpc = json.loads(stub.GetJobReport(pb.JobReportRequest(job_id=waiting)).json)
    for key in ("jobId", "queue", "reason", "needs", "placeInLine", "lineLength", "nearestNodes"):
        assert report[key] == over_grpc[key], key

    queue = http.get("/api/v1/queues/r/report")
    assert [(g["reason"], g["count"], g["oldestJobId"]) for g in queue["waiting"]] == [
        (NO_ROOM, 1, waiting)
    ]
    assert queue["heldBy"] == NO_ROOM
    scheduling = http.get("/api/v1/reports/scheduling?cycles=1&pool=default")
    [cycle] = scheduling["cycles"]
    assert cycle["waiting"] == {NO_ROOM: 1} and list(cycle["pools"]) == ["default"]
    figures = cycle["queues"]["r"]
    assert (figures["share"], figures["demand"], figures["held"]) == (
        1.0,
        2.0,
        {"cpu": 4000, "memory": 2**30},
    )

    # The fair-share chart samples the latest cycle's figures, not a computation of its own.
    server.server.http.sampler.poke()

    def sampled() -> dict[str, Any] | None:
        samples = http.get("/api/v1/shares")["samples"]
        found = {q["name"]: q for q in samples[-1]["queues"]} if samples else {}
        return found["r"] if found.get("r", {}).get("running") == 1 else None

    share = eventually(sampled, timeout=60, what="a sample of the cycle's figures")
    assert (share["share"], share["demand"], share["fairShare"]) == (1.0, 2.0, 1.0)
    assert share["shares"] == {"cpu": 1.0, "memory": 1 / 16}

    status, _, body = http.request("GET", "/api/v1/reports/scheduling?cycles=0")
    assert status == 400 and "cycles" in json.loads(body)["error"]["message"]
    status, _, body = http.request("GET", "/api/v1/queues/nope/report")
    assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"
    status, _, _ = http.request("GET", "/api/v1/jobs/01NOSUCHJOB0000000000000000/report")
    assert status == 404

    _, _, page = http.request("GET", "/queues/r")
    text = page.decode()
    assert 'id="queue-report"' in text and f"<b>Held back by:</b> {NO_ROOM}" in text
    _, _, page = http.request("GET", f"/jobs/{waiting}")
    text = page.decode()
    assert 'id="reason-history"' in text and f"waited because {NO_ROOM}" in text
    assert '<b id="place-in-line">1</b> of 1' in text
