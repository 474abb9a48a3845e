"""Calling the gRPC servicers from HTTP: same validation, authorisation and store calls.

A servicer method takes (request, context); its `rpc` wrapper turns ApiError into
`context.abort(code, message)`. `CallContext` is the context it gets here: `abort` raises
CallError, which the HTTP layer answers with the matching status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

# How gRPC status codes read in HTTP (the mapping grpc-gateway uses).
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


class CallError(Exception):
    """A servicer refused the call: its gRPC code and message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)

    @property
    def code_name(self) -> str:
        return self.code.name


class CallContext:
    """The part of grpc.aio.ServicerContext the servicers use."""

    def __init__(self, metadata: Sequence[tuple[str, str]] = ()) -> None:
        self._metadata = tuple(metadata)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: object = ()
    ) -> None:
        """HTTP answers with the code and message (the message says what the metadata does)."""
        raise CallError(code, details)

    def peer(self) -> str:
        return "http"


async def call(
    method: Callable[..., Any], request: Any, metadata: Sequence[tuple[str, str]] = ()
) -> Any:
    """A unary servicer method's answer, or CallError."""
    return await method(request, CallContext(metadata))


async def stream(
    method: Callable[..., Any], request: Any, metadata: Sequence[tuple[str, str]] = ()
) -> AsyncIterator[Any]:
    """A streaming servicer method's messages; CallError if it refuses."""
    async for message in method(request, CallContext(metadata)):
        yield message
