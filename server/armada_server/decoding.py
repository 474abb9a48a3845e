"""Requests that do not parse as their protobuf message get INVALID_ARGUMENT.

grpc would answer UNKNOWN ("Exception deserializing request") before any service code runs;
a client sending bad bytes deserves to be told its request was invalid.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc


class _Undecodable:
    def __init__(self, error: Exception) -> None:
        self.error = error


class DecodingInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails],
                                     Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_deserializer is None or (
                handler.request_streaming):
            return handler
        parse = handler.request_deserializer

        def deserialize(data: bytes) -> object:
            try:
                return parse(data)
            except Exception as e:  # any parse failure is the client's
                return _Undecodable(e)

        message = f"the request is not a valid message for {details.method}"
        kw = {"request_deserializer": deserialize,
              "response_serializer": handler.response_serializer}
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request, context):  # type: ignore[no-untyped-def]
                if isinstance(request, _Undecodable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(unary, **kw)
        inner_stream = handler.unary_stream

        async def stream(request, context):  # type: ignore[no-untyped-def]
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
            async for item in inner_stream(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(stream, **kw)
