"""Authentication (basic, static bearer tokens, OpenID Connect JWTs) and queue permissions.

Off unless configured. When on, every call except health checks must authenticate
(UNAUTHENTICATED otherwise); what a caller may do to a queue follows upstream's Queue message:
its user and group owners may do everything, `permissions` grant verbs to users and groups,
and the configured admins may do everything everywhere (PERMISSION_DENIED otherwise).
"""

from __future__ import annotations

import base64
import contextvars
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import jwt

from armada_core.api import submit_pb2
from armada_server.errors import PermissionDenied, Unauthenticated
from armada_server.guarded import Request, Response, RpcContext, guarded

VERBS = ("submit", "cancel", "preempt", "reprioritize", "watch")

# Calls anyone may make without credentials.
PUBLIC_METHODS = frozenset(
    {
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/api.Submit/Health",
        "/api.Event/Health",
        # The schema is public anyway: the .proto files ship with every client.
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)


@dataclass(frozen=True)
class Principal:
    """Who is calling."""

    name: str
    groups: tuple[str, ...] = ()


ANONYMOUS = Principal("anonymous")
_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("principal", default=ANONYMOUS)


def current_principal() -> Principal:
    return _current.get()


@dataclass(frozen=True)
class BasicUser:
    password: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class StaticToken:
    token: str
    user: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    jwks_file: str
    audience: str | None = None
    username_claim: str = "sub"
    groups_claim: str = "groups"
    algorithms: tuple[str, ...] = ("RS256", "ES256")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> OidcConfig:
        """From the `auth.oidc:` block (its keys are the field names)."""
        fields: dict[str, Any] = {k: tuple(v) if k == "algorithms" else v for k, v in data.items()}
        return cls(**fields)


@dataclass(frozen=True)
class AuthConfig:
    enabled: bool = False
    basic_users: Mapping[str, BasicUser] = field(default_factory=dict)
    tokens: tuple[StaticToken, ...] = ()
    oidc: OidcConfig | None = None
    admins: tuple[str, ...] = ()
    admin_groups: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> AuthConfig:
        """From the `auth:` block of the server's YAML config (see docs/server.md)."""
        users = {
            name: BasicUser(str(u["password"]), tuple(u.get("groups", ())))
            for name, u in (data.get("basic", {}) or {}).get("users", {}).items()
        }
        tokens = tuple(
            StaticToken(str(t["token"]), str(t["user"]), tuple(t.get("groups", ())))
            for t in data.get("tokens", ()) or ()
        )
        oidc = data.get("oidc")
        return cls(
            enabled=bool(data.get("enabled", bool(users or tokens or oidc))),
            basic_users=users,
            tokens=tokens,
            oidc=OidcConfig.from_mapping(oidc) if oidc else None,
            admins=tuple(data.get("admins", ())),
            admin_groups=tuple(data.get("admin_groups", ())),
        )


class Authenticator:
    """Turns a call's `authorization` metadata into a Principal."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config
        self._jwks: jwt.PyJWKSet | None = None
        if config.oidc is not None:
            keys = json.loads(Path(config.oidc.jwks_file).read_text())
            self._jwks = jwt.PyJWKSet.from_dict(keys)

    def authenticate(self, metadata: Sequence[tuple[str, Any]] | None) -> Principal:
        header = next((str(v) for k, v in metadata or () if k == "authorization"), "")
        scheme, _, credentials = header.partition(" ")
        scheme = scheme.lower()
        if scheme == "basic":
            return self._basic(credentials.strip())
        if scheme == "bearer":
            return self._bearer(credentials.strip())
        raise Unauthenticated(
            "credentials required: send an authorization header with Basic or Bearer credentials"
        )

    def _basic(self, credentials: str) -> Principal:
        try:
            user, _, password = base64.b64decode(credentials, validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            raise Unauthenticated("malformed basic credentials") from None
        known = self.config.basic_users.get(user)
        if known is None or not hmac.compare_digest(known.password.encode(), password.encode()):
            raise Unauthenticated("invalid user name or password")
        return Principal(user, known.groups)

    def _bearer(self, token: str) -> Principal:
        for static in self.config.tokens:
            if hmac.compare_digest(static.token.encode(), token.encode()):
                return Principal(static.user, static.groups)
        oidc = self.config.oidc
        if oidc is None or self._jwks is None:
            raise Unauthenticated("invalid bearer token")
        try:
            header = jwt.get_unverified_header(token)
            key = self._jwks[header["kid"]] if "kid" in header else self._jwks.keys[0]
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=list(oidc.algorithms),
                issuer=oidc.issuer,
                audience=oidc.audience,
                options={"verify_aud": oidc.audience is not None, "require": ["exp", "iss"]},
            )
        except (jwt.PyJWTError, KeyError, IndexError) as e:
            raise Unauthenticated(f"invalid bearer token: {e}") from None
        name = claims.get(oidc.username_claim)
        if not name:
            raise Unauthenticated(f"token has no {oidc.username_claim!r} claim")
        groups = claims.get(oidc.groups_claim) or ()
        return Principal(str(name), tuple(str(g) for g in groups))


class Authorizer:
    """What a principal may do."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config

    def is_admin(self, who: Principal) -> bool:
        if not self.config.enabled:
            return True
        return who.name in self.config.admins or bool(
            set(who.groups) & set(self.config.admin_groups)
        )

    def require_admin(self, who: Principal, action: str) -> None:
        if not self.is_admin(who):
            raise PermissionDenied(f"user {who.name!r} may not {action}: only administrators may")

    def may(self, who: Principal, queue: submit_pb2.Queue, verb: str) -> bool:
        if self.is_admin(who):
            return True
        if who.name in queue.user_owners or set(who.groups) & set(queue.group_owners):
            return True
        for permission in queue.permissions:
            if verb not in permission.verbs:
                continue
            for subject in permission.subjects:
                if (subject.kind == "User" and subject.name == who.name) or (
                    subject.kind == "Group" and subject.name in who.groups
                ):
                    return True
        return False

    def require(self, who: Principal, queue: submit_pb2.Queue, verb: str) -> None:
        if not self.may(who, queue, verb):
            raise PermissionDenied(f"user {who.name!r} may not {verb} on queue {queue.name!r}")


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates every call before its handler runs and records who is calling."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Request, Response] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Request, Response] | None:
        handler = await continuation(details)
        if handler is None or details.method in PUBLIC_METHODS:
            return handler
        try:
            who = self.authenticator.authenticate(details.invocation_metadata)
        except Unauthenticated as e:
            return _refusal(handler, str(e))
        return _as(handler, who)


def _refusal(
    handler: grpc.RpcMethodHandler[Request, Response], message: str
) -> grpc.RpcMethodHandler[Request, Response]:
    async def refuse(request: object, context: RpcContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return guarded(handler, refuse)


def _as(
    handler: grpc.RpcMethodHandler[Request, Response], who: Principal
) -> grpc.RpcMethodHandler[Request, Response]:
    async def record(request: object, context: RpcContext) -> None:
        _current.set(who)  # same task as the method: its code sees this principal

    return guarded(handler, record)
