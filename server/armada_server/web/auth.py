"""Authentication for HTTP: the same credentials as gRPC, from the Authorization header.

When authentication is on, every page and API call needs `Authorization: Basic ...` or
`Bearer ...` (checked by armada_server.auth.Authenticator); otherwise the answer is 401 with a
Basic challenge, so a browser asks for a user name and password. The caller's identity is set
for the request the same way the gRPC interceptor sets it, so the servicers' permission
checks see the same principal. Public: /metrics, /static, /healthz and the OpenAPI document
(the schema is public, as the .proto files are).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from armada_server.auth import Authenticator
from armada_server.auth import _current as current  # the principal the servicers read
from armada_server.errors import Unauthenticated

PUBLIC_PREFIXES = ("/static/", "/metrics", "/healthz", "/api/v1/openapi.json", "/favicon.ico")
CHALLENGE = 'Basic realm="armada", charset="UTF-8"'


class AuthMiddleware:
    def __init__(self, app: ASGIApp, authenticator: Authenticator | None) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or self.authenticator is None
            or any(
                scope["path"] == p.rstrip("/") or scope["path"].startswith(p)
                for p in PUBLIC_PREFIXES
            )
        ):
            await self.app(scope, receive, send)
            return
        header = ""
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                header = value.decode("latin-1")
        try:
            who = self.authenticator.authenticate([("authorization", header)] if header else [])
        except Unauthenticated as e:
            await _refuse(scope, send, str(e))
            return
        token = current.set(who)
        try:
            await self.app(scope, receive, send)
        finally:
            current.reset(token)


async def _refuse(scope: Scope, send: Send, message: str) -> None:
    if scope["path"].startswith("/api/"):
        body = json.dumps({"error": {"code": "UNAUTHENTICATED", "message": message}}).encode()
        content_type = b"application/json"
    else:
        body = (
            f"<!doctype html><title>Sign in</title><h1>401: sign in</h1><p>{_escape(message)}</p>"
        ).encode()
        content_type = b"text/html; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", CHALLENGE.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
