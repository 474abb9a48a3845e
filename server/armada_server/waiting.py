"""Waiting on an asyncio.Event with a timeout, without losing a cancellation.

Python 3.11's `asyncio.wait_for` can swallow a cancellation that arrives together with the
timeout or the wake-up, leaving a task that was told to stop still running (and a server whose
shutdown waits on it forever). `asyncio.timeout` does not have that race.
"""

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
