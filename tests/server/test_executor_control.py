"""The pieces of the executor side of logs and failover: the ExecutorControl server and its
token, the time format it compares at nanoseconds, where it listens, and --server parsing."""

from __future__ import annotations

import grpc
import pytest

from armada_core.api import executor_pb2, executor_pb2_grpc
from armada_server.config import ConfigError, NodeGroup
from armada_server.executor_cli import server_addresses
from armada_server.executors.control import (
    ControlServer,
    join_address,
    local_address_towards,
    split_address,
)
from armada_server.executors.logs import parse_time_ns
from armada_server.executors.nodes import virtual_nodes
from armada_server.executors.simulated import SimulatedBackend


def test_server_addresses_are_repeatable_and_comma_separated() -> None:
    assert server_addresses(None) == ["localhost:50051"]
    assert server_addresses(["a:1, b:2", "c:3"]) == ["a:1", "b:2", "c:3"]
    with pytest.raises(ConfigError):
        server_addresses([" , "])


def test_times_compare_at_nanoseconds() -> None:
    a = parse_time_ns("2024-05-01T10:00:00.123456789Z")
    assert parse_time_ns("2024-05-01T10:00:00.12345679Z") - a == 1
    assert parse_time_ns("2024-05-01T12:00:00.123456789+02:00") == a
    assert parse_time_ns("2024-05-01T10:00:00Z") == a - 123_456_789
    for bad in ("", "yesterday", "2024-05-01T10:00:00.Z"):
        with pytest.raises(ValueError):
            parse_time_ns(bad)


def test_addresses() -> None:
    assert split_address("[::1]:7070") == ("::1", 7070)
    assert join_address("::1", 7070) == "[::1]:7070"
    assert join_address("10.0.0.1", 0) == "10.0.0.1:0"
    with pytest.raises(ValueError):
        split_address("no-port")
    assert local_address_towards("127.0.0.1:50051") == "127.0.0.1"
    assert local_address_towards("localhost:50051") == "127.0.0.1"
    assert local_address_towards("not an address") == "127.0.0.1"


async def test_control_answers_only_with_its_token() -> None:
    backend = SimulatedBackend(virtual_nodes([NodeGroup(1, "1", "1Gi")], "sim"))
    control = ControlServer(backend, advertise=None)
    address = await control.start()
    assert address.startswith("127.0.0.1:") and control.token
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = executor_pb2_grpc.ExecutorControlStub(channel)
            request = executor_pb2.ExecutorLogsRequest(run_id="r", container="main")
            for metadata in ([], [("authorization", "Bearer wrong")]):
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await stub.Logs(request, metadata=metadata)
                assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
            mine = [("authorization", f"Bearer {control.token}")]
            # The simulated executor writes no logs: nothing, not an error.
            assert list((await stub.Logs(request, metadata=mine)).log) == []
            request.since_time = "soon"
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.Logs(request, metadata=mine)
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await control.stop()
        await backend.close()
