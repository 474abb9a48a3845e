"""A method handler with a check run before the method: what server interceptors build.

The public API has only unary-request methods (single and streaming responses); a guard may
abort the call (`context.abort`) or prepare it (e.g. record who is calling).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

Guard = Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]


def guarded(
    handler: grpc.RpcMethodHandler,
    guard: Guard,
    *,
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """`handler`'s method with `guard(request, context)` awaited first."""
    kw = {
        "request_deserializer": request_deserializer or handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request, context):  # type: ignore[no-untyped-def]
            await guard(request, context)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(unary, **kw)
    if handler.unary_stream is not None:
        inner_stream = handler.unary_stream

        async def stream(request, context):  # type: ignore[no-untyped-def]
            await guard(request, context)
            async for item in inner_stream(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(stream, **kw)
    # The public API has no client-streaming methods; refuse rather than pass one through.
    raise TypeError("client-streaming methods cannot be guarded")
