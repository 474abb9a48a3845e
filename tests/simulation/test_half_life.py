"""Seed 004's flow: with a half-life, a queue's past use counts against it for a while. One
queue has the cluster to itself for two hours; when a second arrives, with as much work, its
share rises faster under a one-hour half-life than without one (instantaneous fair share),
since the first queue's decayed usage still counts."""

from __future__ import annotations

import pytest

from armada_server.config import SchedulingSettings, ServerConfig
from armada_server.simulation.generators import generate
from armada_server.simulation.recording import Recording
from armada_server.simulation.run import simulate

pytestmark = pytest.mark.slow  # simulations of hours, through real storage

ARRIVAL = 2 * 3600.0


def newcomer_share(rec: Recording) -> list[float]:
    """The second queue's share over its first hour."""
    return [
        s for t, s in zip(rec.times, rec.shares["b"], strict=True) if ARRIVAL <= t < ARRIVAL + 3600
    ]


def test_the_newcomer_share_rises_faster_with_a_half_life() -> None:
    workload = generate("latecomer,nodes=2,alone=2,after=1,runtime=1800", seed=3)
    runs = {
        half_life: simulate(
            workload,
            ServerConfig(
                scheduling_period=60.0,
                scheduling=SchedulingSettings(usage_half_life=half_life),
            ),
        )
        for half_life in (None, 3600.0)
    }
    without, with_half_life = (newcomer_share(runs[h]) for h in (None, 3600.0))
    # Alone, the first queue had everything; the newcomer had nothing before it arrived.
    for rec in runs.values():
        assert max(s for t, s in zip(rec.times, rec.shares["b"], strict=True) if t < ARRIVAL) == 0
        assert rec.shares["a"][rec.times.index(ARRIVAL - 60)] == 1.0
    # Instantaneous fair share stops the newcomer at half the cluster; with the half-life
    # it goes on past half while the first queue's decayed usage is still high.
    assert max(without) == 0.5
    assert max(with_half_life) > 0.6
    assert sum(with_half_life) / len(with_half_life) > sum(without) / len(without)
    # It reaches half the cluster no later with the half-life.
    assert next(i for i, s in enumerate(with_half_life) if s >= 0.5) <= next(
        i for i, s in enumerate(without) if s >= 0.5
    )
