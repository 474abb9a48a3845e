"""A real server over loopback gRPC, on each database backend."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from armada_core.api import event_pb2_grpc, job_pb2_grpc, submit_pb2, submit_pb2_grpc
from armada_server.app import EmbeddedServer


@dataclass
class Stubs:
    channel: grpc.Channel
    submit: submit_pb2_grpc.SubmitStub
    queues: submit_pb2_grpc.QueueServiceStub
    policies: submit_pb2_grpc.RetryPolicyServiceStub
    events: event_pb2_grpc.EventStub
    jobs: job_pb2_grpc.JobsStub


@pytest.fixture
def server(database_url: str) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(database_url=database_url, heartbeat_seconds=0.5) as running:
        yield running


@pytest.fixture
def executorless_server(database_url: str) -> Iterator[EmbeddedServer]:
    """A server without an executor of its own, whose tests speak the executor protocol
    themselves; leases last long enough that a slow test never loses one."""
    from armada_server.config import ServerConfig

    from .test_scheduling_loop import CLASSES

    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.1,
        lease_timeout=30.0,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as running:
        yield running


@pytest.fixture
def api(server: EmbeddedServer) -> Iterator[Stubs]:
    channel = grpc.insecure_channel(server.address)
    yield Stubs(
        channel,
        submit_pb2_grpc.SubmitStub(channel),
        submit_pb2_grpc.QueueServiceStub(channel),
        submit_pb2_grpc.RetryPolicyServiceStub(channel),
        event_pb2_grpc.EventStub(channel),
        job_pb2_grpc.JobsStub(channel),
    )
    channel.close()


@pytest.fixture
def queue(api: Stubs) -> str:
    api.queues.CreateQueue(submit_pb2.Queue(name="q", priority_factor=1))
    return "q"
