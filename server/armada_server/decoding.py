"""Requests that do not parse as their protobuf message get INVALID_ARGUMENT.

grpc would answer UNKNOWN ("Exception deserializing request") before any service code runs;
a client sending bad bytes deserves to be told its request was invalid.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from armada_server.guarded import guarded


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

        async def refuse_undecodable(request, context) -> None:  # type: ignore[no-untyped-def]
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)

        return guarded(handler, refuse_undecodable, request_deserializer=deserialize)
