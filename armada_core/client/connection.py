"""Where the server is and how to talk to it: address, TLS, credentials, keepalive.

One frozen value describes a connection, so the sync and asyncio clients (and the CLI, from
flags and environment variables) build identical channels from it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

DEFAULT_ADDRESS = "localhost:50051"
#: The largest gRPC message sent or received, by the client and by the server.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ConnectionConfig:
    """How to reach an Armada server.

    Authentication travels as the `authorization` metadata of every call (bearer token or
    basic user/password), which works on plaintext and TLS channels alike; `call_credentials`
    adds any grpc.CallCredentials (e.g. an OIDC plugin) and requires TLS.
    """

    address: str = DEFAULT_ADDRESS
    tls: bool = False
    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None
    token: str | None = None
    username: str | None = None
    password: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    call_credentials: grpc.CallCredentials | None = field(default=None, compare=False)
    #: Default deadline (seconds) of unary calls; None waits for ever.
    timeout: float | None = 60.0
    #: Unary calls wait (within their deadline) for an unreachable server to come up instead
    #: of failing at once with Unavailable.
    wait_for_ready: bool = False
    #: Client keepalive pings; None leaves gRPC's default (no pings). The server must permit
    #: the interval (grpc.http2.min_ping_interval_without_data_ms) or it closes the channel.
    keepalive_time: float | None = None
    keepalive_timeout: float = 20.0
    options: tuple[tuple[str, Any], ...] = ()
    #: The binoculars (logs) service; None: the same address.
    logs_address: str | None = None

    def __post_init__(self) -> None:
        if self.token and (self.username or self.password):
            raise ValueError("use either a bearer token or a username/password, not both")
        if (self.username is None) != (self.password is None):
            raise ValueError("basic authentication needs both a username and a password")
        if self.call_credentials is not None and not self.tls:
            raise ValueError("call_credentials need a TLS channel (tls=True)")

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> ConnectionConfig:
        """ARMADA_URL, ARMADA_TLS, ARMADA_CA_CERT (a PEM file), ARMADA_TOKEN,
        ARMADA_USERNAME / ARMADA_PASSWORD; explicit overrides (not None) win."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {"address": env.get("ARMADA_URL") or DEFAULT_ADDRESS}
        if env.get("ARMADA_TLS", "").lower() in ("1", "true", "yes"):
            values["tls"] = True
        if env.get("ARMADA_CA_CERT"):
            values["root_certificates"] = Path(env["ARMADA_CA_CERT"]).read_bytes()
            values["tls"] = True
        for key, name in (
            ("token", "ARMADA_TOKEN"),
            ("username", "ARMADA_USERNAME"),
            ("password", "ARMADA_PASSWORD"),
        ):
            if env.get(name):
                values[key] = env[name]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def auth_metadata(self) -> tuple[tuple[str, str], ...]:
        """The metadata every call carries: authorization (if any) and extra metadata."""
        out = list(self.metadata)
        if self.token:
            out.append(("authorization", f"Bearer {self.token}"))
        elif self.username is not None:
            pair = f"{self.username}:{self.password}".encode()
            out.append(("authorization", "Basic " + base64.b64encode(pair).decode("ascii")))
        return tuple(out)

    def channel_options(self) -> list[tuple[str, Any]]:
        opts: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        if self.keepalive_time is not None:
            opts += [
                ("grpc.keepalive_time_ms", int(self.keepalive_time * 1000)),
                ("grpc.keepalive_timeout_ms", int(self.keepalive_timeout * 1000)),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.max_pings_without_data", 0),
            ]
        return opts + list(self.options)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        creds = grpc.ssl_channel_credentials(
            self.root_certificates, self.private_key, self.certificate_chain
        )
        if self.call_credentials is not None:
            creds = grpc.composite_channel_credentials(creds, self.call_credentials)
        return creds

    def sync_channel(self, address: str | None = None) -> grpc.Channel:
        target = address or self.address
        if self.tls:
            return grpc.secure_channel(
                target, self.channel_credentials(), options=self.channel_options()
            )
        return grpc.insecure_channel(target, options=self.channel_options())

    def aio_channel(self, address: str | None = None) -> grpc.aio.Channel:
        target = address or self.address
        if self.tls:
            return grpc.aio.secure_channel(
                target, self.channel_credentials(), options=self.channel_options()
            )
        return grpc.aio.insecure_channel(target, options=self.channel_options())


def client_config(
    address: str | None, config: ConnectionConfig | None, settings: Mapping[str, Any]
) -> ConnectionConfig:
    """What a client was given: a ConnectionConfig, or an address and ConnectionConfig's
    fields as keywords (the defaults for the rest)."""
    if config is not None:
        if address or settings:
            raise TypeError("give either a ConnectionConfig or address/settings, not both")
        return config
    fields = dict(settings)
    if address:
        fields["address"] = address
    return ConnectionConfig(**fields)


def merge_metadata(*parts: Sequence[tuple[str, str]] | None) -> tuple[tuple[str, str], ...]:
    """Concatenate metadata sequences, skipping None."""
    return tuple(pair for part in parts if part for pair in part)
