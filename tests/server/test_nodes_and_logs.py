"""Binoculars against executors the server does not run: cordoning their nodes (stored, read
by every scheduling cycle) and the errors of Logs when the executor cannot answer.

The test speaks the executor protocol itself, as tests/server/test_scheduling_loop.py does.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import grpc
import pytest

from armada_core.api import binoculars_pb2, binoculars_pb2_grpc, executor_pb2, job_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_server.app import EmbeddedServer
from armada_server.config import ServerConfig
from armada_server.storage.nodes import decode_nodes, encode_nodes, encode_request_nodes

from .conftest import Stubs
from .test_scheduling_loop import Executor, low, submit, wait_state


@pytest.fixture
def server(executorless_server: EmbeddedServer) -> EmbeddedServer:
    return executorless_server


def executor(api: Stubs, name: str, cpu: str) -> Executor:
    ex = Executor(api.channel, name, nodes=1)
    ex.nodes = [executor_pb2.Node(name="shared", allocatable={"cpu": cpu, "memory": "8Gi"})]
    ex.sync()
    return ex


def code_of(call, *args) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as raised:
        call(*args)
    return raised.value.code().name, raised.value.details()


def reason(api: Stubs, job_id: str) -> str:
    details = api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[job_id]))
    return details.job_details[job_id].scheduling_reason


def test_a_cordoned_node_of_any_executor_takes_no_new_jobs(api: Stubs, queue: str) -> None:
    binoculars = binoculars_pb2_grpc.BinocularsStub(api.channel)
    big, small = executor(api, "big", "8"), executor(api, "small", "2")
    cordon = binoculars.Cordon
    code, details = code_of(cordon, binoculars_pb2.CordonRequest(node_name="shared"))
    assert code == "INVALID_ARGUMENT"
    assert "big, small" in details and "EXECUTOR/shared" in details
    assert code_of(cordon, binoculars_pb2.CordonRequest(node_name="ghost"))[0] == "NOT_FOUND"
    assert code_of(cordon, binoculars_pb2.CordonRequest())[0] == "INVALID_ARGUMENT"
    cordon(binoculars_pb2.CordonRequest(node_name="big/shared"))
    cordon(binoculars_pb2.CordonRequest(node_name="big/shared"))  # again: no change, no error

    # 6 CPUs fit only on the cordoned node: the job stays queued, saying why.
    [job] = submit(api, low(cpu="6"))
    wait_for_reason(api, job)
    big.sync(), small.sync()
    assert (
        api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=[job])).job_states[job]
        == submit_pb2.QUEUED
    )
    assert big.held == {} and small.held == {}
    # A job that fits on the other executor's node still runs there.
    [fits] = submit(api, low(cpu="1"))
    [lease] = small.wait_leases(1)
    assert lease.job.id == fits

    cordon(binoculars_pb2.CordonRequest(uncordon_node_name="big/shared"))
    [lease] = big.wait_leases(1)
    assert lease.job.id == job and lease.node == "shared"
    assert (
        code_of(
            cordon,
            binoculars_pb2.CordonRequest(node_name="big/shared", uncordon_node_name="big/shared"),
        )[0]
        == "INVALID_ARGUMENT"
    )


def wait_for_reason(api: Stubs, job_id: str) -> None:
    deadline = time.monotonic() + 10
    while not reason(api, job_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reason(api, job_id), "the scheduler gave no reason"


def test_logs_say_which_executor_cannot_answer(api: Stubs, queue: str) -> None:
    binoculars = binoculars_pb2_grpc.BinocularsStub(api.channel)
    ghost = Executor(api.channel, "ghost", nodes=1)
    [job] = submit(api, low())
    [lease] = ghost.wait_leases(1)
    ghost.sync(ghost.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    wait_state(api, job, submit_pb2.RUNNING, ghost)

    def logs(**options) -> tuple[str, str]:  # type: ignore[no-untyped-def]
        since = options.pop("since_time", "")
        return code_of(
            binoculars.Logs,
            binoculars_pb2.LogRequest(
                job_id=job, since_time=since, log_options=core_v1_pb2.PodLogOptions(**options)
            ),
        )

    code, details = logs()
    assert code == "UNAVAILABLE" and "'ghost'" in details and "has not said" in details
    assert logs(container="nope")[0] == "INVALID_ARGUMENT"
    assert "nope" in logs(container="nope")[1]
    assert logs(since_time="yesterday")[0] == "INVALID_ARGUMENT"
    # An address where nothing listens.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    ghost.stub.Sync(
        executor_pb2.SyncRequest(
            executor_id="ghost",
            pool="default",
            nodes=ghost.nodes,
            run_ids=list(ghost.held),
            control_address=dead,
            control_token="t",
        )
    )
    code, details = logs()
    assert code == "UNAVAILABLE" and "'ghost'" in details and dead in details
    code, details = code_of(binoculars.Logs, binoculars_pb2.LogRequest(job_id="nope"))
    assert code == "NOT_FOUND"


def test_cordons_survive_a_restart_of_the_server(database_url: str) -> None:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.1,
        lease_timeout=30.0,
    )
    with EmbeddedServer(config) as first, grpc.insecure_channel(first.address) as channel:
        Executor(channel, "e1", nodes=2).sync()
        binoculars_pb2_grpc.BinocularsStub(channel).Cordon(
            binoculars_pb2.CordonRequest(node_name="e1-n1")
        )
    with EmbeddedServer(config) as second:
        store = second.server.storage
        assert store is not None
        [executor] = store.scheduling_reads.scheduling_state(executor_timeout=30.0).executors
        assert {n.name: n.unschedulable for n in executor.nodes} == {"e1-n0": False, "e1-n1": True}
        cordoned = [
            (n.executor, n.name, n.cordoned_by)
            for n in store.nodes.nodes_with_cordons()
            if n.cordoned
        ]
        assert cordoned == [("e1", "e1-n1", "anonymous")]


def test_a_syncs_nodes_are_stored_as_their_own_list() -> None:
    """The bytes kept of a sync's nodes are the nodes alone, whatever else the sync carries."""
    nodes = [
        executor_pb2.Node(
            name=f"n{i}",
            labels={"rack": f"r{i % 3}"},
            taints=[executor_pb2.Taint(key="gpu", value="true", effect="NoSchedule")] if i else [],
            unschedulable=i == 2,
            allocatable={"cpu": "8", "memory": "32Gi"},
        )
        for i in range(5)
    ]
    request = executor_pb2.SyncRequest(
        executor_id="e",
        pool="p",
        nodes=nodes,
        run_ids=["r1", "r2"],
        updates=[executor_pb2.RunUpdate(run_id="r1", job_id="j1")],
        capabilities=executor_pb2.Capabilities(unsupported_pod_fields=["x"]),
        control_address="127.0.0.1:1",
        control_token="t",
    )
    stored = encode_request_nodes(request)
    assert stored == encode_nodes(nodes)
    assert decode_nodes(stored) == nodes
    assert request.executor_id == "e" and len(request.updates) == 1  # the request is untouched
    assert encode_request_nodes(executor_pb2.SyncRequest(executor_id="e")) == encode_nodes([])


_ENCODE_IN_A_NEW_PROCESS = """
import sys
from armada_core.api import executor_pb2
from armada_server.storage.nodes import encode_nodes, encode_request_nodes
nodes = [
    executor_pb2.Node(
        name=f"n{i}",
        labels={"rack": f"r{i % 3}", "zone": "z", "k": "v"},
        allocatable={"cpu": "8", "memory": "32Gi", "gpu": "1", "ephemeral-storage": "1Ti"},
    )
    for i in range(5)
]
request = executor_pb2.SyncRequest(executor_id="e", nodes=nodes)
sys.stdout.write(encode_nodes(nodes).hex() + " " + encode_request_nodes(request).hex())
"""


def test_the_same_nodes_are_the_same_bytes_in_every_process() -> None:
    """Maps (labels, allocatable) are written in a fixed order, not the hash order of one
    process: the server compares the stored bytes to skip a write and to wake the scheduler,
    and /metrics keys its decoded nodes by them."""
    encodings = set()
    for _ in range(6):
        out = subprocess.run(
            [sys.executable, "-c", _ENCODE_IN_A_NEW_PROCESS],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        encodings.update(out.split())
    assert len(encodings) == 1
