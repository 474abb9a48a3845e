"""A sync hands out leases in portions the executor can receive: what its SyncRequest says it
receives (`max_response_bytes`), or gRPC's default of 4 MiB when it does not say; and the
executors this project ships receive the larger portions they ask for."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from armada_core.api import executor_pb2, executor_pb2_grpc, submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig
from armada_server.executors.agent import MAX_RESPONSE_BYTES
from armada_server.executors.simulated import DURATION
from armada_server.scheduling.loop import _seen
from armada_server.storage import Storage
from armada_server.storage.database import open_database
from armada_server.storage.sync import GRPC_DEFAULT_LIMIT

from ..jobs.factories import container, item
from .conftest import Stubs
from .test_preemption_events import in_state, wait_until

NODE = executor_pb2.Node(name="n1", allocatable={"cpu": "64", "memory": "256Gi"})


def big_item() -> submit_pb2.JobSubmitRequestItem:
    """A job whose spec is about 0.9 MB (a job may have 1 MiB)."""
    job = item(pod={"containers": [container(args=["x" * 900_000])]})
    job.annotations[DURATION] = "0"
    return job


@pytest.fixture
def server(executorless_server: EmbeddedServer) -> EmbeddedServer:
    return executorless_server


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    engine = open_database(database_url)
    store = Storage(engine)
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    yield store
    engine.dispose()


def test_leases_come_in_portions_the_executor_receives(store: Storage) -> None:
    def sync(held: list[str], **declared: int) -> executor_pb2.SyncResponse:
        request = executor_pb2.SyncRequest(
            executor_id="e1", pool="default", nodes=[NODE], run_ids=held, **declared
        )
        return store.executors.executor_sync(request)

    sync([])
    jobs = store.submissions.submit("q", "s", [big_item() for _ in range(12)], owner="test")
    snapshot = store.scheduling_reads.scheduling_state(executor_timeout=60)
    leased = store.scheduling_writes.apply_schedule(
        scheduled={job: ("e1", "n1", "default") for job in jobs},
        preempted=(),
        failed={},
        reasons={},
        seen=_seen(snapshot, set(jobs), ()),
    )
    assert leased == 12

    # An executor that does not say: three quarters of gRPC's default, then the next portion.
    first = sync([])
    assert len(first.leases) == 3
    assert len(first.SerializeToString()) < GRPC_DEFAULT_LIMIT
    held = [lease.run_id for lease in first.leases]
    second = sync(held, max_response_bytes=GRPC_DEFAULT_LIMIT)  # the same, said
    assert len(second.leases) == 3

    # One that receives 64 MiB takes the other six at once.
    held += [lease.run_id for lease in second.leases]
    rest = sync(held, max_response_bytes=MAX_RESPONSE_BYTES)
    assert len(rest.leases) == 6
    handed = held + [lease.run_id for lease in rest.leases]
    assert sorted(
        lease.job.id for lease in [*first.leases, *second.leases, *rest.leases]
    ) == sorted(jobs)
    assert len(set(handed)) == 12


def test_the_servers_own_executor_receives_large_portions(database_url: str) -> None:
    """Eight jobs of 0.9 MB leased in one cycle go out in one response of over 7 MB,
    which an agent whose channel kept gRPC's default limit would refuse at every sync."""
    config = ServerConfig(
        port=0,
        executor="simulated",
        database_url=database_url,
        nodes=(NodeGroup(1, "64", "256Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
    )
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        ids = armada.submit_jobs("q", "big", [big_item() for _ in range(8)])
        for job_id in ids:
            wait_until(in_state(armada, job_id, submit_pb2.SUCCEEDED), "a large job to succeed")


def test_a_sync_saying_it_receives_too_little_is_refused(api: Stubs) -> None:
    stub = executor_pb2_grpc.ExecutorApiStub(api.channel)
    request = executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=[NODE])
    request.max_response_bytes = 1000
    with pytest.raises(grpc.RpcError) as raised:
        stub.Sync(request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        "max_response_bytes: must be 0 (gRPC's default of 4 MiB) or at least 2097152 "
        "(a lease carries a job of up to 1 MiB), got 1000"
    )
    request.max_response_bytes = 2 * 1024 * 1024  # the least it may say
    stub.Sync(request)
