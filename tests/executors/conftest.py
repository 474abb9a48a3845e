"""A local pod runner per test, and the guarantee that no test leaves a process behind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from armada_server.executors.local import LocalPodRunner

from .helpers import processes_under


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[LocalPodRunner]:
    pods = LocalPodRunner(tmp_path / "pods")
    yield pods
    await pods.shutdown(grace_seconds=0)
    assert processes_under(pods.sandbox_root) == []
