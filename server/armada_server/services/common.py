"""What every service needs: the store, errors as gRPC codes, the caller's identity."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from armada_core.jobs import SubmissionError
from armada_server.config import ServerConfig
from armada_server.errors import ApiError
from armada_server.eventhub import EventHub
from armada_server.storage.store import Store

log = logging.getLogger("armada_server")
T = TypeVar("T")


@dataclass(frozen=True)
class Principal:
    """Who is calling."""

    name: str
    groups: tuple[str, ...] = ()


ANONYMOUS = Principal("anonymous")


@dataclass
class Context:
    """Shared by the services of one server."""

    config: ServerConfig
    store: Store
    hub: EventHub
    pool: ThreadPoolExecutor

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking storage work off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


def principal_of(context: grpc.aio.ServicerContext) -> Principal:
    return getattr(context, "armada_principal", None) or ANONYMOUS


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Answer ApiError and SubmissionError with their status codes, log anything else."""

    @functools.wraps(method)
    async def unary(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return await method(self, request, context)
        except ApiError as e:
            await context.abort(e.code, str(e))
        except SubmissionError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))

    return unary


def streaming_rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def stream(self, request, context):  # type: ignore[no-untyped-def]
        try:
            async for item in method(self, request, context):
                yield item
        except ApiError as e:
            await context.abort(e.code, str(e))

    return stream
