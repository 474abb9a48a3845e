"""Every gRPC status the server produces arrives as its own ArmadaError subclass; auth works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from armada_core import client as ac
from armada_core.client import (
    AlreadyExists,
    ArmadaClient,
    ArmadaError,
    ConnectionConfig,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
    error_for,
    job_item,
    queue,
)
from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig, BasicUser, StaticToken

from .conftest import Servers, pod
from .flavours import AsyncOnThread


def test_every_status_code_has_a_class() -> None:
    for code in grpc.StatusCode:
        if code is grpc.StatusCode.OK:
            continue
        error = error_for(code, "the server's words", "Svc/Method")
        assert isinstance(error, ArmadaError)
        assert error.code is code and error.details == "the server's words"
        assert type(error).__name__ != "ArmadaError"
        assert str(error) == f"Svc/Method: {code.name}: the server's words"
    assert isinstance(ac.WaitTimeout("x"), TimeoutError)


@pytest.mark.parametrize(
    ("action", "expected", "words"),
    [
        (lambda c: c.create_queue(queue("bad name")), InvalidArgument, "not a valid queue name"),
        (lambda c: c.get_queue("ghost"), NotFound, "queue 'ghost' not found"),
        (lambda c: c.create_queue(queue("q")), AlreadyExists, "already exists"),
        (lambda c: c.submit_jobs("ghost", "s", [job_item(pod())]), NotFound, "ghost"),
        (lambda c: c.reprioritize_jobs("q", "s", -1, ["x"]), InvalidArgument, "new_priority"),
        (
            lambda c: list(c.get_job_set_events("q", "s", from_message_id="abc")),
            InvalidArgument,
            "from_message_id",
        ),
        (lambda c: c.logs("job"), NotFound, "job 'job' not found"),
        (
            lambda c: list(c.get_job_set_events("q", "s", watch=True, timeout=0.3)),
            DeadlineExceeded,
            "",
        ),
    ],
)
def test_server_errors_map_to_exceptions(
    any_client: Any, action, expected: type, words: str
) -> None:
    any_client.create_queue(queue("q"))
    with pytest.raises(expected) as raised:
        action(any_client)
    assert raised.value.code == expected.code
    assert words in raised.value.details


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_unreachable_server_is_unavailable(servers: Servers, flavour: str) -> None:
    address = servers.address
    servers.stop()
    c: Any = (
        ArmadaClient(address, timeout=5) if flavour == "sync" else AsyncOnThread(address, timeout=5)
    )
    try:
        with pytest.raises(Unavailable):
            c.get_job_status(["x"])
    finally:
        c.close()


@pytest.fixture
def secured(tmp_path: Path):  # type: ignore[no-untyped-def]
    auth = AuthConfig(
        enabled=True,
        basic_users={"alice": BasicUser("secret")},
        tokens=(StaticToken("tok-123", "bob"), StaticToken("tok-456", "mallory")),
        admins=("alice", "bob"),
    )
    with EmbeddedServer(
        database_url=f"sqlite:///{tmp_path / 'a.db'}", auth=auth, http_port=None
    ) as server:
        yield server


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_basic_and_bearer_authentication(secured: EmbeddedServer, flavour: str) -> None:
    def make(**settings: Any) -> Any:
        return (
            ArmadaClient(secured.address, **settings)
            if flavour == "sync"
            else AsyncOnThread(secured.address, **settings)
        )

    anonymous, alice, bob, mallory, wrong = (
        make(),
        make(username="alice", password="secret"),
        make(token="tok-123"),
        make(token="tok-456"),
        make(username="alice", password="nope"),
    )
    try:
        assert anonymous.health() == 1  # health checks are public
        with pytest.raises(Unauthenticated) as raised:
            anonymous.get_queues()
        assert "credentials required" in raised.value.details
        with pytest.raises(Unauthenticated):
            wrong.get_queues()
        alice.create_queue(queue("q"))
        assert [q.name for q in bob.get_queues()] == ["q"]
        with pytest.raises(PermissionDenied) as denied:
            mallory.submit_jobs("q", "s", [job_item(pod())])
        assert "mallory" in denied.value.details
    finally:
        for c in (anonymous, alice, bob, mallory, wrong):
            c.close()


def test_connection_config_from_env(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    config = ConnectionConfig.from_env(
        {"ARMADA_URL": "armada:443", "ARMADA_CA_CERT": str(ca), "ARMADA_TOKEN": "t"}, timeout=3
    )
    assert (config.address, config.tls, config.timeout) == ("armada:443", True, 3)
    assert config.root_certificates == ca.read_bytes()
    assert config.auth_metadata() == (("authorization", "Bearer t"),)
    basic = ConnectionConfig.from_env({"ARMADA_USERNAME": "u", "ARMADA_PASSWORD": "p"})
    assert basic.address == "localhost:50051" and not basic.tls
    assert basic.auth_metadata() == (("authorization", "Basic dTpw"),)
    with pytest.raises(ValueError, match="either a bearer token"):
        ConnectionConfig(token="t", username="u", password="p")
    with pytest.raises(ValueError, match="both a username and a password"):
        ConnectionConfig(username="u")
    with pytest.raises(ValueError, match="need a TLS channel"):
        ConnectionConfig(call_credentials=grpc.access_token_call_credentials("t"))
    keepalive = dict(ConnectionConfig(keepalive_time=30).channel_options())
    assert keepalive["grpc.keepalive_time_ms"] == 30_000
    # A TLS channel can be built (no TLS server here to talk to).
    ConnectionConfig(
        tls=True, call_credentials=grpc.access_token_call_credentials("t")
    ).sync_channel().close()
