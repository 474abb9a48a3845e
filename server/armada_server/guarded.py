"""A method handler with a check run before the method: what server interceptors build.

The public API has only unary-request methods (single and streaming responses); a guard may
abort the call (`context.abort`) or prepare it (e.g. record who is calling). A guarded method
may answer with a response message or with its encoding.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

# The context grpc.aio gives a method on the server (any request and response types).
RpcContext = grpc.aio.ServicerContext[Any, Any]
Guard = Callable[[Any, RpcContext], Awaitable[None]]

Request = TypeVar("Request")
Response = TypeVar("Response")


def guarded(
    handler: grpc.RpcMethodHandler[Request, Response],
    guard: Guard,
    *,
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler[Request, Response]:
    """`handler`'s method with `guard(request, context)` awaited first."""
    deserializer = request_deserializer or handler.request_deserializer
    serializer = _bytes_as_they_are(handler.response_serializer)
    # grpc's stubs type a handler's methods as the synchronous API's; under grpc.aio they are
    # coroutine and async generator functions, so they are called here as what they are.
    if handler.unary_unary is not None:
        inner: Callable[..., Any] = handler.unary_unary

        async def unary(request: Any, context: RpcContext) -> Any:
            await guard(request, context)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=deserializer, response_serializer=serializer
        )
    if handler.unary_stream is not None:
        inner_stream: Callable[..., Any] = handler.unary_stream

        async def stream(request: Any, context: RpcContext) -> AsyncIterator[Any]:
            await guard(request, context)
            async for item in inner_stream(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=deserializer, response_serializer=serializer
        )
    # The public API has no client-streaming methods; refuse rather than pass one through.
    raise TypeError("client-streaming methods cannot be guarded")


def _bytes_as_they_are(
    serialize: Callable[[Any], bytes] | None,
) -> Callable[[Any], bytes] | None:
    """`serialize`, but a method may answer with its response already encoded: the event
    streams send each stored event as encoded once for all their watchers."""
    if serialize is None:
        return None
    encode = serialize

    def serialized(response: Any) -> bytes:
        return response if type(response) is bytes else encode(response)

    return serialized
