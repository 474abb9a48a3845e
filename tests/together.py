"""Running a test's work on several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_together(work: Callable[[int], None], count: int, timeout: float = 120) -> None:
    """Call `work(k)` for k in 0..count-1, each on its own thread, released together by a
    barrier; raises the first error a thread raised, or if one did not end in time."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def one(k: int) -> None:
        try:
            barrier.wait(30)
            work(k)
        except BaseException as e:  # raised below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]
    assert not any(thread.is_alive() for thread in threads), "a thread did not end in time"
