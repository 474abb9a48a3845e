"""The REST gateway over real HTTP against a running server: the same behaviour as gRPC."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import grpc
import pytest

from armada_core.api import job_pb2, job_pb2_grpc, submit_pb2
from armada_server.app import EmbeddedServer

from .conftest import start_server
from .helpers import Http, eventually, job


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedServer]:
    """The gateway's queries run on both backends (the browser tests use SQLite)."""
    tmp = tmp_path_factory.mktemp("gateway")
    overrides = {}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_server").new_database()
    running = start_server(tmp, **overrides)
    yield running
    running.stop()


def events(
    base_url: str,
    query: str,
    headers: dict[str, str] | None = None,
) -> list[tuple[str, str, dict]]:
    """(id, event, data) of a finished (watch=false) server-sent event stream."""
    req = urllib.request.Request(f"{base_url}/api/v1/events?{query}", headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        text = resp.read().decode()
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        if fields:
            out.append((fields.get("id", ""), fields["event"], json.loads(fields["data"])))
    return out


def test_submit_status_details_and_logs(http: Http, server) -> None:  # type: ignore[no-untyped-def]
    http.post("/api/v1/queues", {"name": "rest"}, expect=201)
    ids = http.submit("rest", "s", job("echo hi; exit 3", clientId="c-1"), job("echo ok"))
    assert len(ids) == 2
    assert http.submit("rest", "s", job("echo hi; exit 3", clientId="c-1")) == ids[:1]
    assert http.wait_state(ids[0], "FAILED") == "FAILED"
    assert http.wait_state(ids[1], "SUCCEEDED") == "SUCCEEDED"
    states = http.get(f"/api/v1/jobs/status?id={ids[0]}&id=nope")["jobStates"]
    assert states == {ids[0]: "FAILED", "nope": "UNKNOWN"}
    # The same answer as the gRPC API.
    with grpc.insecure_channel(server.address) as channel:
        grpc_states = (
            job_pb2_grpc.JobsStub(channel)
            .GetJobStatus(job_pb2.JobStatusRequest(job_ids=[ids[0]]), timeout=10)
            .job_states
        )
    assert grpc_states[ids[0]] == submit_pb2.FAILED
    detail = http.get(f"/api/v1/jobs/{ids[0]}")
    assert detail["state"] == "FAILED" and detail["jobSet"] == "s"
    [run] = detail["runs"]
    assert run["executor"] == "local" and run["containers"][0]["exitCode"] == 3
    assert (
        detail["spec"]["podSpecs"][0]["containers"][0]["resources"]["requests"]["cpu"] == "100m"
    )  # quantities read as Kubernetes writes them
    lines = http.get(f"/api/v1/jobs/{ids[0]}/logs")["lines"]
    assert [line["line"] for line in lines] == ["hi"]
    after = http.get(f"/api/v1/jobs/{ids[0]}/logs?sinceTime={lines[0]['timestamp']}")
    assert after["lines"] == []
    status, _, body = http.request("GET", "/api/v1/jobs/01NOSUCHJOB0000000000000000")
    assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"


def test_invalid_requests_name_the_field(http: Http) -> None:
    http.post("/api/v1/queues", {"name": "strict"}, expect=201)
    error = http.post(
        "/api/v1/jobs",
        {
            "queue": "strict",
            "jobSetId": "s",
            "jobs": [
                {
                    "podSpec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}]},
                    "priorty": 1,
                }
            ],
        },
        expect=400,
    )["error"]
    assert error["code"] == "INVALID_ARGUMENT" and "priorty" in error["message"]
    error = http.post(
        "/api/v1/jobs",
        {
            "queue": "strict",
            "jobSetId": "s",
            "jobs": [
                {"podSpec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}]}}
            ],
        },
        expect=400,
    )["error"]  # the server's own validation: no resources
    assert "resources" in error["message"] or "request" in error["message"]
    assert (
        http.post("/api/v1/jobs", {"queue": "nope", "jobSetId": "s", "jobs": [job()]}, expect=404)[
            "error"
        ]["code"]
        == "NOT_FOUND"
    )
    status, _, _ = http.request(
        "POST",
        "/api/v1/jobs/cancel",
        b"queue=strict",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 415
    status, _, body = http.request("GET", "/api/v1/nothing-here")
    assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"
    assert (
        http.post("/api/v1/queues", {"name": "strict"}, expect=409)["error"]["code"]
        == "ALREADY_EXISTS"
    )


def test_cancel_reprioritize_preempt_and_job_set_cancel(http: Http) -> None:
    http.post("/api/v1/queues", {"name": "acts"}, expect=201)
    a, b, c = http.submit("acts", "set", job("sleep 60"), job("sleep 60"), job("sleep 60"))
    for job_id in (a, b, c):
        http.wait_state(job_id, "RUNNING")
    results = http.post(
        "/api/v1/jobs/reprioritize",
        {"queue": "acts", "jobSetId": "set", "jobIds": [a], "newPriority": 3},
    )
    assert results == {"results": {a: ""}}
    assert http.get(f"/api/v1/jobs/{a}")["priority"] == 3
    assert http.post(
        "/api/v1/jobs/preempt", {"queue": "acts", "jobSetId": "set", "jobIds": [b]}
    ) == {"results": {b: ""}}
    assert http.post(
        "/api/v1/jobs/cancel", {"queue": "acts", "jobSetId": "set", "jobIds": [a]}
    ) == {"cancelledIds": [a]}
    assert http.post("/api/v1/jobsets/cancel", {"queue": "acts", "jobSetId": "set"}) == {}
    assert http.wait_state(b, "PREEMPTED", "FAILED", "CANCELLED") in (
        "PREEMPTED",
        "FAILED",
        "CANCELLED",
    )
    assert http.wait_state(c, "CANCELLED") == "CANCELLED"
    assert http.state(a) == "CANCELLED"


def test_job_set_events_as_server_sent_events(http: Http, base_url: str) -> None:
    http.post("/api/v1/queues", {"name": "ev"}, expect=201)
    [job_id] = http.submit("ev", "stream", job("true"))
    http.wait_state(job_id, "SUCCEEDED")
    found = events(base_url, "queue=ev&jobSetId=stream")
    kinds = [kind for _, kind, _ in found]
    assert kinds[:2] == ["submitted", "queued"] and kinds[-1] == "succeeded"
    assert [int(i) for i, _, _ in found] == list(range(1, len(found) + 1))
    assert all(data["jobId"] == job_id for _, _, data in found)
    # Resume after an id, with the query or with Last-Event-ID as EventSource sends it.
    assert events(base_url, "queue=ev&jobSetId=stream&fromMessageId=2") == found[2:]
    assert events(base_url, "queue=ev&jobSetId=stream", headers={"Last-Event-ID": "3"}) == found[3:]
    status, _, _ = Http(base_url).request("GET", "/api/v1/events?queue=ev")
    assert status == 400


def test_watching_events_delivers_new_ones(http: Http, base_url: str) -> None:
    http.post("/api/v1/queues", {"name": "watch"}, expect=201)
    req = urllib.request.Request(f"{base_url}/api/v1/events?queue=watch&jobSetId=w&watch=true")
    with urllib.request.urlopen(req, timeout=60) as resp:
        [job_id] = http.submit("watch", "w", job("true"))
        seen = []
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("event: "):
                seen.append(line[7:])
            if "succeeded" in seen:
                break
    assert seen[0] == "submitted" and job_id


def test_job_list_pages_sorts_and_filters(http: Http) -> None:
    http.post("/api/v1/queues", {"name": "list"}, expect=201)
    ids = http.submit("list", "a", *[job("true", annotations={"k": str(i % 3)}) for i in range(11)])
    other = http.submit("list", "b", job("true"))
    for job_id in (*ids, *other):
        http.wait_state(job_id, "SUCCEEDED")

    def walk(query: str) -> list[str]:
        out, cursor = [], None
        while True:
            page = http.get(f"/api/v1/jobs?{query}" + (f"&cursor={cursor}" if cursor else ""))
            out += [j["id"] for j in page["jobs"]]
            cursor = page["next"]
            if not cursor:
                return out

    assert walk("queue=list&jobSet=a&limit=4") == sorted(ids, reverse=True)
    assert walk("queue=list&jobSet=a&limit=4&order=asc") == sorted(ids)
    assert walk("queue=list&limit=5") == sorted([*ids, *other], reverse=True)
    assert walk("queue=list&annotation=k%3D1&limit=2") == sorted(
        [ids[i] for i in range(11) if i % 3 == 1], reverse=True
    )
    assert walk("queue=list&annotation=k&limit=50") == sorted(ids, reverse=True)
    assert walk("queue=list&state=failed") == []
    # Sorting on another column pages without gaps or repeats, ties broken by id.
    by_update = walk("queue=list&sort=updated&limit=3")
    assert sorted(by_update) == sorted([*ids, *other]) and len(set(by_update)) == 12
    # Going back from a page gives the page before it.
    first = http.get("/api/v1/jobs?queue=list&limit=4")
    second = http.get(f"/api/v1/jobs?queue=list&limit=4&cursor={first['next']}")
    back = http.get(f"/api/v1/jobs?queue=list&limit=4&cursor={second['prev']}")
    assert back["jobs"] == first["jobs"] and back["prev"] is None
    assert (
        http.get("/api/v1/jobs?queue=list&cursor=garbage", expect=400)["error"]["code"]
        == "INVALID_ARGUMENT"
    )
    sets = http.get("/api/v1/jobsets?queue=list")["jobSets"]
    assert {s["jobSet"]: s["counts"] for s in sets} == {
        "a": {"SUCCEEDED": 11},
        "b": {"SUCCEEDED": 1},
    }


def test_queues_crud_and_cordon(http: Http) -> None:
    created = http.post(
        "/api/v1/queues", {"name": "crud", "priorityFactor": 2, "userOwners": ["ann"]}, expect=201
    )
    assert created == {"name": "crud", "priorityFactor": 2.0, "userOwners": ["ann"]}
    assert http.post("/api/v1/queues/crud/cordon", {})["cordoned"] is True
    assert http.post("/api/v1/queues/crud/uncordon", {}).get("cordoned", False) is False
    updated = http.json("PUT", "/api/v1/queues/crud", {"priorityFactor": 3})
    assert updated["priorityFactor"] == 3.0
    assert "crud" in [q["name"] for q in http.get("/api/v1/queues")["queues"]]
    assert http.json("DELETE", "/api/v1/queues/crud") == {}
    http.get("/api/v1/queues/crud", expect=404)


def test_metrics_and_openapi_are_served(http: Http) -> None:
    status, _, body = http.request("GET", "/metrics")
    assert status == 200 and b"armada_jobs_submitted_total" in body
    doc = http.get("/api/v1/openapi.json")
    assert doc["openapi"].startswith("3.") and "/api/v1/jobs" in doc["paths"]


def test_fair_share_from_running_jobs_and_capacity(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from armada_server.config import NodeGroup

    from .conftest import start_server

    server = start_server(tmp_path, executor="simulated", nodes=(NodeGroup(1, "4", "16Gi"),))
    try:
        http = Http(f"http://127.0.0.1:{server.server.http_port}")
        http.post("/api/v1/queues", {"name": "big", "priorityFactor": 1}, expect=201)
        http.post("/api/v1/queues", {"name": "small", "priorityFactor": 2}, expect=201)
        long = {"armadaproject.io/simulatedDuration": "600"}
        one_cpu = {
            "podSpec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "command": ["true"],
                        "resources": {
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"cpu": "1", "memory": "1Gi"},
                        },
                    }
                ]
            },
            "annotations": long,
        }
        big = http.submit("big", "s", one_cpu, one_cpu)
        small = http.submit("small", "s", one_cpu)
        for job_id in (*big, *small):
            http.wait_state(job_id, "RUNNING")
        server.server.http.sampler.poke()

        def sample():  # type: ignore[no-untyped-def]
            samples = http.get("/api/v1/shares")["samples"]
            if not samples:
                return None
            queues = {q["name"]: q for q in samples[-1]["queues"]}
            running = {name: q["running"] for name, q in queues.items()}
            return queues if running == {"big": 2, "small": 1} else None

        queues = eventually(sample, timeout=60, what="a sample with the running jobs")
        assert queues["big"]["weight"] == 1.0 and queues["small"]["weight"] == 0.5
        assert abs(queues["big"]["fairShare"] - 2 / 3) < 1e-9
        assert abs(queues["small"]["fairShare"] - 1 / 3) < 1e-9
        assert queues["big"]["shares"]["cpu"] == 0.5 and queues["small"]["shares"]["cpu"] == 0.25
        assert queues["big"]["share"] == 0.5  # cpu dominates (1 of 4 cpus, 1 of 16Gi)
        # Demand is what they run: capped fair shares equal demand.
        assert queues["big"]["adjustedFairShare"] == 0.5
        assert queues["small"]["adjustedFairShare"] == 0.25
        # A job that cannot fit says why on its page as GetJobDetails does: the scheduler's
        # reason, its queue's standing and its place in line.
        four_cpu = json.loads(json.dumps(one_cpu).replace('"1"', '"4"'))
        [waiting] = http.submit("small", "s", four_cpu)
        reason = eventually(
            lambda: http.get(f"/api/v1/jobs/{waiting}")["schedulingReason"],
            timeout=60,
            what="a scheduling reason",
        )
        assert reason.startswith(
            "0 of 1 matching node has 4 cpu, 1Gi memory free; queue small at "
        ), reason
        assert reason.endswith("its fair share; 1st in line of 1 queued"), reason
        # The same text as GetJobDetails: read both until a new sample of the shares (the
        # waiting job's demand moves the queue's standing) falls between none of the reads.
        with grpc.insecure_channel(server.address) as channel:
            details = job_pb2_grpc.JobsStub(channel).GetJobDetails

            def both() -> tuple[str, str] | None:
                rest = http.get(f"/api/v1/jobs/{waiting}")["schedulingReason"]
                said = details(job_pb2.JobDetailsRequest(job_ids=[waiting])).job_details[waiting]
                return (rest, said.scheduling_reason) if rest == said.scheduling_reason else None

            eventually(both, timeout=60, what="the same reason over REST and gRPC")
    finally:
        server.stop()


def test_the_share_sampler_keeps_to_a_tenth_of_a_core() -> None:
    from armada_server.web.shares import pause

    assert pause(10.0, 0.2) == 9.8  # cheap samples: one per period
    assert pause(10.0, 3.0) == 27.0  # a 3 s sample waits nine times as long
    assert pause(10.0, 12.0) == 108.0
    assert pause(0.1, 0.01) == 0.5  # never busy-loops


def test_nodes_are_listed_cordoned_and_uncordoned(http: Http) -> None:
    [node] = eventually(lambda: http.get("/api/v1/nodes")["nodes"], what="the executor's node")
    assert (node["id"], node["executor"], node["cordoned"]) == ("local/local-0", "local", False)
    assert node["allocatable"]["cpu"] and node["lastSeen"]
    cordoned = http.post("/api/v1/nodes/cordon", {"node": "local-0"})
    assert cordoned["cordoned"] is True and cordoned["cordonedAt"]
    assert http.get("/api/v1/nodes")["nodes"][0]["cordoned"] is True
    assert http.post("/api/v1/nodes/uncordon", {"node": "local/local-0"})["cordoned"] is False
    error = http.post("/api/v1/nodes/cordon", {"node": "ghost"}, expect=404)["error"]
    assert error["code"] == "NOT_FOUND" and "ghost" in error["message"]
    assert http.post("/api/v1/nodes/cordon", {}, expect=400)["error"]["code"] == "INVALID_ARGUMENT"


def test_job_groups_count_what_the_list_lists(http: Http) -> None:
    http.post("/api/v1/queues", {"name": "grouped"}, expect=201)
    done = http.submit("grouped", "a", *[job("true") for _ in range(3)])
    stopped = http.submit("grouped", "b", job("sleep 60"), job("sleep 60"))
    for job_id in done:
        http.wait_state(job_id, "SUCCEEDED")
    for job_id in stopped:
        http.wait_state(job_id, "RUNNING")
    http.post("/api/v1/jobs/cancel", {"queue": "grouped", "jobSetId": "b", "jobIds": stopped[:1]})
    http.wait_state(stopped[0], "CANCELLED")
    rows = http.get("/api/v1/jobs?queue=grouped&limit=500")["jobs"]
    nodes = {}
    for row in rows:
        runs = http.get(f"/api/v1/jobs/{row['id']}")["runs"]
        nodes[row["id"]] = runs[-1]["node"] if runs else ""

    def groups(by: str, query: str = "queue=grouped") -> dict[str, int]:
        answer = http.get(f"/api/v1/jobs/groups?groupBy={by}&{query}")
        assert answer["groupBy"] == by and answer["more"] is False
        counts = [g["count"] for g in answer["groups"]]
        assert counts == sorted(counts, reverse=True)  # largest first
        return {g["value"]: g["count"] for g in answer["groups"]}

    def expected(key: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in rows:
            value = nodes[row["id"]] if key == "node" else row[key]
            out[value] = out.get(value, 0) + 1
        return out

    assert groups("state") == {"SUCCEEDED": 3, "CANCELLED": 1, "RUNNING": 1} == expected("state")
    assert groups("jobSet") == {"a": 3, "b": 2}
    assert groups("reason") == expected("reason")
    assert groups("priorityClass") == expected("priorityClass")
    assert groups("node") == expected("node") and "" not in groups("node")
    assert groups("queue", "state=cancelled&state=running")["grouped"] == 2  # every queue
    assert groups("queue", "queue=grouped&state=succeeded&state=cancelled") == {"grouped": 4}
    answer = http.get("/api/v1/jobs/groups?groupBy=jobSet&queue=grouped&state=running")
    assert answer["groups"] == [{"value": "b", "count": 1, "queue": "grouped"}]
    for query, field in (
        ("groupBy=owner", "groupBy"),
        ("groupBy=", "groupBy"),
        ("groupBy=state&annotation=k", "groupBy"),
        ("groupBy=state&state=nonsense", "state"),
        ("groupBy=state&jobSet=a", "jobSet"),
    ):
        error = http.get(f"/api/v1/jobs/groups?{query}", expect=400)["error"]
        assert error["code"] == "INVALID_ARGUMENT" and error["message"].startswith(field), error
    http.post("/api/v1/jobsets/cancel", {"queue": "grouped", "jobSetId": "b"})


def test_bulk_cancel_and_reprioritize_every_live_job_a_filter_matches(http: Http) -> None:
    http.post("/api/v1/queues", {"name": "bulk"}, expect=201)
    [done] = http.submit("bulk", "done", job("true"))
    http.wait_state(done, "SUCCEEDED")
    a = http.submit("bulk", "a", *[job("sleep 60") for _ in range(3)])
    b = http.submit("bulk", "b", job("sleep 60"), job("sleep 60"))
    assert http.post("/api/v1/bulk/cancel", {"queue": "bulk", "dryRun": True}) == {
        "count": 5,  # the live ones: the finished job is not counted
        "excluded": 0,
    }
    answer = http.post("/api/v1/bulk/cancel", {"queue": "bulk", "jobSet": "a", "reason": "bye"})
    assert answer["count"] == 3 and sorted(answer["jobIds"]) == sorted(a)
    for job_id in a:
        assert http.state(job_id) == "CANCELLED"
        assert http.get(f"/api/v1/jobs/{job_id}")["cancelReason"] == "bye"
    answer = http.post("/api/v1/bulk/reprioritize", {"queue": "bulk", "newPriority": 7})
    assert answer["count"] == 2 and sorted(answer["jobIds"]) == sorted(b)
    assert {http.get(f"/api/v1/jobs/{j}")["priority"] for j in b} == {7}
    assert http.get(f"/api/v1/jobs/{done}")["priority"] != 7  # ended jobs are left alone
    assert http.post("/api/v1/bulk/cancel", {"queue": "bulk", "state": ["succeeded"]}) == {
        "count": 0,
        "excluded": 0,
        "jobIds": [],
    }
    for body, field in (
        ({"queue": "bulk", "jobs": []}, "jobs"),
        ({"jobSet": "a"}, "jobSet"),
        ({"queue": "bulk", "state": ["nonsense"]}, "state"),
        ({"queue": "bulk", "state": "queued"}, "state"),
        ({"queue": "bulk", "dryRun": "yes"}, "dryRun"),
        ({"queue": 3}, "queue"),
    ):
        error = http.post("/api/v1/bulk/cancel", body, expect=400)["error"]
        assert error["code"] == "INVALID_ARGUMENT" and error["message"].startswith(field), error
    for priority in (-1, "high", None, True):
        body = {"queue": "bulk", "newPriority": priority}
        error = http.post("/api/v1/bulk/reprioritize", body, expect=400)["error"]
        assert error["message"].startswith("newPriority"), error
    missing = http.post("/api/v1/bulk/cancel", {"queue": "nowhere"}, expect=404)
    assert missing["error"]["code"] == "NOT_FOUND"
    http.post("/api/v1/bulk/cancel", {"queue": "bulk"})
    assert {http.state(j) for j in b} == {"CANCELLED"}


def test_job_list_rows_carry_client_id_annotations_and_pod_group_role(http: Http) -> None:
    http.post("/api/v1/queues", {"name": "columns"}, expect=201)
    group = {
        "armadaproject.io/gangId": "g",
        "armadaproject.io/gangCardinality": "1",
        "armadaproject.io/gangRole": "driver",
        "armadaproject.io/gangRoleMinimum": "1",
        "team": "ml",
    }
    [member] = http.submit("columns", "s", job("true", clientId="c-7", annotations=group))
    [plain] = http.submit("columns", "s", job("true"))
    rows = {r["id"]: r for r in http.get("/api/v1/jobs?queue=columns")["jobs"]}
    assert rows[member]["clientId"] == "c-7" and rows[member]["gangRole"] == "driver"
    assert rows[member]["annotations"]["team"] == "ml"
    assert (rows[plain]["clientId"], rows[plain]["gangRole"]) == ("", "")
    # The annotation filter's rows carry them too.
    [row] = http.get("/api/v1/jobs?queue=columns&annotation=team%3Dml")["jobs"]
    assert row["id"] == member and row["gangRole"] == "driver"
