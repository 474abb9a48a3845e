"""examples/elastic_pod_group/run.py exits 0 only when every member of its pod group ran and
succeeded, the coordinator ending before the workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def test_every_member_of_the_pod_group_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "elastic_pod_group" / "run.py")],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # A node with room for everything: the coordinator and all four workers run, each
    # saying which role it plays.
    assert "5 of 5 members ran: 1 coordinator, 4 worker" in done.stdout
    # The coordinator ends first; the workers run on to their end and every member succeeds.
    assert "5 of 5 members succeeded" in done.stdout
    members = done.stdout.split("members:\n", 1)[1].splitlines()[:5]
    assert [line.split()[0] for line in members] == ["coordinator"] + ["worker"] * 4
    for line in members:
        role = line.split()[0]
        assert " ran on " in line and f", SUCCEEDED: role {role} on armada-" in line
    assert "preempted" not in done.stdout
