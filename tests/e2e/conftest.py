"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .processes import Process


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Starts processes; stops every one of them at the end, whatever happened."""
    started: list[Process] = []

    def start(name: str, *argv: str) -> Process:
        process = Process(name, list(argv), tmp_path)
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        process.stop()
