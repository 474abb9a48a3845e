"""The history export (GET /api/v1/history) gives a caller the jobs of the queues it may
watch, only what the server still keeps, with their real runtimes; the simulator replays it.

The history is made by the simulator's own driver against the server (over gRPC, on a
virtual clock), so submission times and runtimes are known to the second."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from sqlalchemy import delete

from armada_core.api import submit_pb2, submit_pb2_grpc
from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig, BasicUser
from armada_server.config import ServerConfig, TaintConfig
from armada_server.executors.nodes import virtual_nodes
from armada_server.simulation.clock import VirtualClock
from armada_server.simulation.driver import EXECUTOR, Driver
from armada_server.simulation.history import HistoryError, fetch_history, workload_from_export
from armada_server.simulation.ports import OverGrpc
from armada_server.simulation.workload import parse_workload
from armada_server.storage import schema as t

pytestmark = pytest.mark.slow  # simulations of hours, through real storage


def basic(user: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{user}-pw".encode()).decode()


AUTH = AuthConfig(
    enabled=True,
    basic_users={u: BasicUser(f"{u}-pw") for u in ("admin", "olga", "vic")},
    admins=("admin",),
)
# alpha runs at the start; beta two hours later.
WORKLOAD = {
    "queues": [{"name": "alpha"}, {"name": "beta", "priority_factor": 2}],
    # The tainted node takes no job (none tolerates it), but is part of the cluster exported.
    "nodes": [
        "2x4x8Gi",
        {"count": 1, "cpu": "4", "memory": "8Gi", "taints": [{"key": "dedicated", "value": "a"}]},
    ],
    "jobs": [
        {"queue": "alpha", "count": 5, "every": 10, "runtime": 100, "cpu": "1"},
        {"queue": "beta", "at": "2h", "count": 3, "runtime": 50, "cpu": "2", "job_set": "b"},
    ],
}


@pytest.fixture
def history(database_url: str) -> Iterator[tuple[EmbeddedServer, str]]:
    clock = VirtualClock()
    config = ServerConfig(
        port=0,
        http_port=0,
        executor="none",
        scheduling_period=10.0,
        lease_timeout=60.0,
        auth=AUTH,
        database_url=database_url,
    )
    server = EmbeddedServer(config, clock=clock.now, cycles=False).start()
    assert server.server.scheduler is not None
    admin = [("authorization", basic("admin"))]
    port = OverGrpc(server.address, server.server.scheduler, admin)
    workload = parse_workload(WORKLOAD, "history")
    nodes = virtual_nodes(workload.nodes, EXECUTOR)
    try:
        asyncio.run(Driver(workload, config, port, clock, nodes).run())
        # olga owns beta; vic may watch nothing yet.
        port.queues.UpdateQueue(
            submit_pb2.Queue(name="beta", priority_factor=2, user_owners=["olga"]), metadata=admin
        )
        yield server, f"http://127.0.0.1:{server.server.http_port}"
    finally:
        port.close()
        server.stop()


def export(url: str, user: str, since: float) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/api/v1/history?since={since}", headers={"Authorization": basic(user)}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        body: dict[str, Any] = json.load(response)
    return body


def test_each_caller_gets_the_queues_it_may_watch(history: tuple[EmbeddedServer, str]) -> None:
    server, url = history
    everything = export(url, "admin", 86400)
    assert [q["name"] for q in everything["queues"]] == ["alpha", "beta"]
    assert [j["queue"] for j in everything["jobs"]] == ["alpha"] * 5 + ["beta"] * 3
    olga = export(url, "olga", 86400)
    assert [q["name"] for q in olga["queues"]] == ["beta"]
    assert {j["queue"] for j in olga["jobs"]} == {"beta"}
    assert export(url, "vic", 86400)["jobs"] == []
    # Given the watch verb on alpha, vic exports alpha and only alpha.
    channel = grpc.insecure_channel(server.address)
    submit_pb2_grpc.QueueServiceStub(channel).UpdateQueue(
        submit_pb2.Queue(
            name="alpha",
            priority_factor=1,
            permissions=[
                submit_pb2.Queue.Permissions(
                    subjects=[submit_pb2.Queue.Permissions.Subject(kind="User", name="vic")],
                    verbs=["watch"],
                )
            ],
        ),
        metadata=[("authorization", basic("admin"))],
    )
    channel.close()
    assert {j["queue"] for j in export(url, "vic", 86400)["jobs"]} == {"alpha"}
    # Without credentials: refused.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/api/v1/history?since=60", timeout=60)
    assert refused.value.code == 401


def test_runtimes_and_submission_times_are_the_real_ones(
    history: tuple[EmbeddedServer, str],
) -> None:
    _, url = history
    body = export(url, "admin", 86400)
    assert [j["runtime"] for j in body["jobs"]] == [100.0] * 5 + [50.0] * 3
    assert all(j["state"] == "SUCCEEDED" for j in body["jobs"])
    assert body["jobs"][0]["requests"]["cpu"] == "1000m"
    # Replayed: the same queues, arrivals, runtimes and cluster as the workload that made it.
    replay = workload_from_export(body, "replay")
    original = parse_workload(WORKLOAD, "history")
    assert [(a.queue, a.at, a.runtime) for a in replay.arrivals] == [
        (a.queue, a.at, a.runtime) for a in original.arrivals
    ]
    assert {q.name: q.priority_factor for q in replay.queues} == {"alpha": 1.0, "beta": 2.0}
    assert [(g.count, g.cpu, g.memory, g.taints) for g in replay.nodes] == [
        (2, "4", "8Gi", ()),
        (1, "4", "8Gi", (TaintConfig("dedicated", "a", "NoSchedule"),)),
    ]
    assert replay.nodes == original.nodes
    # The command's path: over HTTP with credentials.
    fetched = fetch_history(url, 86400, token="admin:admin-pw")
    assert len(fetched.arrivals) == 8
    with pytest.raises(HistoryError, match="HTTP 401"):
        fetch_history(url, 86400, token="admin:wrong")


def test_only_the_window_and_what_the_server_keeps(history: tuple[EmbeddedServer, str]) -> None:
    server, url = history
    # The last hour holds beta's jobs only (alpha's ran two hours before).
    recent = export(url, "admin", 3600)
    assert [j["queue"] for j in recent["jobs"]] == ["beta"] * 3
    # Jobs the server no longer keeps (their rows gone, as retention removes them) are not
    # exported, and kept_since moves to the oldest job kept.
    before = export(url, "admin", 86400)
    gone = [j["id"] for j in before["jobs"] if j["queue"] == "alpha"]
    assert server.server.storage is not None
    with server.server.storage.engine.begin() as conn:
        conn.execute(delete(t.runs).where(t.runs.c.job_id.in_(gone)))
        conn.execute(delete(t.jobs).where(t.jobs.c.id.in_(gone)))
    after = export(url, "admin", 86400)
    assert [j["queue"] for j in after["jobs"]] == ["beta"] * 3
    assert after["kept_since"] == after["jobs"][0]["submitted"] > before["kept_since"]


@pytest.mark.parametrize("since", ["0", "-5", "x", "1e9"])
def test_a_bad_window_is_refused_naming_it(history: tuple[EmbeddedServer, str], since: str) -> None:
    _, url = history
    request = urllib.request.Request(
        f"{url}/api/v1/history?since={since}", headers={"Authorization": basic("admin")}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 400
    assert "since:" in json.loads(refused.value.read())["error"]["message"]
