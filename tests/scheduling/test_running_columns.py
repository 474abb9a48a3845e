"""A cycle keeps what it read of each running job (its node's row, its start time) for the
next by ``Job.serial`` while the node index is the same: every cycle's columns equal a fresh
read whatever started, ended or moved, and cycles over running jobs decide as the reference."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from armada_core.scheduling import Queue, SchedulingConfig, Snapshot
from armada_core.scheduling.fast import fast_schedule, job_columns, running_columns
from armada_core.scheduling.fast.state import NodeIndex
from armada_core.scheduling.model import Job
from armada_core.scheduling.reference import reference_schedule

from .helpers import PRIORITY_CLASSES, job, node, read_on_threads


def _index(names: list[str]) -> NodeIndex:
    records = [node(n, cpu=4) for n in names]
    n = len(records)
    return NodeIndex(tuple(records), records, np.zeros((n, 1), np.int64), np.zeros(n, bool))


def _read(records: list[Job], index: NodeIndex) -> running_columns.RunningColumns:
    serial = np.array([j.serial for j in records], dtype=np.int64)
    rows = np.array([i for i, j in enumerate(records) if j.node is not None], dtype=np.int64)
    got = running_columns.running_columns(records, rows, serial, index)
    running = [records[i] for i in rows]
    assert got.node.tolist() == [index.rows.get(j.node, -1) for j in running]  # type: ignore[arg-type]
    assert got.start.tolist() == [j.start_time or 0.0 for j in running]
    return got


def _running(i: int, where: str | None = "n0", start: float | None = None) -> Job:
    return job(f"j{i}", node=where, start_time=float(i) if start is None else start)


NODES = ["n0", "n1", "n2"]


@pytest.mark.parametrize(
    "step",
    [
        "same",  # the same objects again
        "reversed",  # the same objects, another order
        "some_ended",  # jobs gone, the rest the same objects
        "new_ones",  # jobs started among the old
        "moved",  # copies of some on another node, started later
        "queued_among",  # queued jobs between the running ones
        "unknown_node",  # some on a node the index does not have
        "no_start",  # some with no start time
        "new_index",  # the same jobs, the nodes indexed anew (rows renumbered)
        "none_running",  # nothing running, then the same jobs again
    ],
)
def test_columns_equal_a_fresh_read(step: str) -> None:
    index = _index(NODES)
    before = [_running(i, NODES[i % 3]) for i in range(60)]
    _read(before, index)
    after = list(before)
    if step == "reversed":
        after.reverse()
    elif step == "some_ended":
        after = after[::4]
    elif step == "new_ones":
        after = after[:30] + [_running(100 + i, "n1") for i in range(10)] + after[30:]
    elif step == "moved":
        after = [
            replace(j, node="n2", start_time=500.0 + i) if i % 5 == 0 else j
            for i, j in enumerate(after)
        ]
    elif step == "queued_among":
        after = [x for i, j in enumerate(after) for x in (j, job(f"q{i}"))]
    elif step == "unknown_node":
        after = [replace(j, node="gone") if i % 6 == 0 else j for i, j in enumerate(after)]
    elif step == "no_start":
        after = [replace(j, start_time=None) if i % 7 == 0 else j for i, j in enumerate(after)]
    elif step == "new_index":
        index = _index(["n2", "n0", "n1"])
    elif step == "none_running":
        _read([job("q")], index)
    _read(after, index)
    _read(after, index)


def test_a_new_index_is_never_read_through_the_old_rows() -> None:
    """The same jobs against an index whose rows differ: every row is looked up again."""
    jobs = [_running(i, NODES[i % 3]) for i in range(30)]
    first = _read(jobs, _index(NODES))
    second = _read(jobs, _index(list(reversed(NODES))))
    assert first.node.tolist() != second.node.tolist()


def test_a_job_older_than_the_window_is_read_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_columns, "WINDOW_PER_JOB", 1)
    monkeypatch.setattr(job_columns, "WINDOW_MARGIN", 4)
    index = _index(NODES)
    old = _running(0, "n2", start=3.0)
    _read([old], index)
    for step in range(5):
        [job(f"x{i}") for i in range(50)]  # many jobs made since
        records = [old, *(_running(10 + 10 * step + i, "n1") for i in range(10))]
        _read(records, index)
        kept = running_columns._kept
        assert kept is not None and kept.rows.base > old.serial
        _read(records, index)


def test_cycles_on_several_threads_read_their_own_jobs() -> None:
    index = _index(NODES)
    sets = [[_running(1000 * t + i, NODES[i % 3]) for i in range(200)] for t in range(4)]
    read_on_threads(sets, lambda records: _read(records, index))


def test_cycles_decide_as_the_reference_as_jobs_start_end_and_move() -> None:
    """Decisions applied between cycles (jobs start, end, are preempted; nodes come and go):
    the order of running jobs depends on their start times and nodes, and each cycle matches
    the reference."""
    rng = random.Random(7)
    queues = (Queue("A", 1.0), Queue("B", 1.0))
    names = [f"n{i}" for i in range(4)]
    # Queue A alone first, with more than fits; B arrives later and takes its share by
    # preempting A's jobs, the latest started first (start times drawn at random, so their
    # order is not that of submission).
    jobs = [job(f"j{i}", queue="A", pc=("low", "high")[i % 5 == 0]) for i in range(40)]
    made = 40
    preempted = 0
    for cycle in range(14):
        if cycle % 5 == 4:  # a node leaves or comes back: the index is built anew
            names = names[1:] if len(names) == 4 else [*names, f"n{cycle}"]
        nodes = tuple(node(n, cpu=4) for n in names)
        snap = Snapshot(queues, PRIORITY_CLASSES, nodes, jobs, SchedulingConfig(), now=cycle)
        fast = fast_schedule(snap)
        assert fast.decisions() == reference_schedule(snap).decisions(), cycle
        after = []
        for j in jobs:
            if j.id in fast.preempted or j.id in fast.failed:
                continue
            if j.id in fast.scheduled:
                j = replace(j, node=fast.scheduled[j.id], start_time=rng.uniform(0, cycle))
            elif j.node is not None and rng.random() < 0.15:
                continue  # ended
            after.append(j)
        for _ in range(rng.randrange(8) if cycle < 6 else 12):
            after.append(job(f"j{made}", queue="A" if cycle < 6 else "B"))
            made += 1
        preempted += len(fast.preempted)
        jobs = after
    assert preempted and any(j.node is not None for j in jobs)
