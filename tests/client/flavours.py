"""Run one scenario on both clients: the asyncio client driven from a loop on its own thread."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from armada_core.client import AsyncArmadaClient


class AsyncOnThread:
    """An AsyncArmadaClient whose coroutine methods are called as blocking ones."""

    def __init__(self, address: str, **settings: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: AsyncArmadaClient = self.run(self._make(address, settings))

    @staticmethod
    async def _make(address: str, settings: dict[str, Any]) -> AsyncArmadaClient:
        return AsyncArmadaClient(address, **settings)

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attr = getattr(self.client, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self.run(attr(*a, **k))
        if inspect.isasyncgenfunction(attr):

            async def collect(*a: Any, **k: Any) -> list[Any]:
                return [m async for m in attr(*a, **k)]

            return lambda *a, **k: iter(self.run(collect(*a, **k)))
        return attr

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
