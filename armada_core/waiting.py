"""Waiting on an asyncio.Event with a timeout without losing a cancellation (Python 3.11's
`asyncio.wait_for` can swallow one that arrives with the timeout)."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """True if `event` was set within `timeout` seconds, False on timeout."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
