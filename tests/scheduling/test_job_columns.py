"""A cycle keeps what it read of each job for the next by ``Job.serial``: the columns of
every cycle equal a fresh read whatever came and went, and every cycle decides as the
reference does."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import numpy as np
import pytest

from armada_core.scheduling import KnownSerials, Queue, SchedulingConfig, Snapshot
from armada_core.scheduling.fast import fast_schedule, job_columns
from armada_core.scheduling.model import Job
from armada_core.scheduling.reference import reference_schedule

from .helpers import PRIORITY_CLASSES, job, node, read_on_threads


def _fresh(records: list[Job]) -> tuple[list[int], list[int], list[float], list[str]]:
    return (
        [j.kind_id for j in records],
        [j.priority for j in records],
        [j.submit_time for j in records],
        [j.id for j in records],
    )


def _assert_read(records: list[Job]) -> None:
    got = job_columns.read_columns(records)
    kind, priority, submit, ids = _fresh(records)
    assert got.kind.tolist() == kind
    assert got.priority.tolist() == priority
    assert got.submit.tolist() == submit
    assert got.ids.tolist() == ids
    breaks = np.cumsum([0] + [not b > a for a, b in itertools.pairwise(ids)])[: len(ids)]
    assert got.id_breaks.tolist() == breaks.tolist()


def _job(i: int, **changes: object) -> Job:
    fields: dict = {"priority": i % 3, "submit": float(i)}
    fields.update(changes)
    return job(f"j{i}", queue="AB"[i % 2], cpu=1 + i % 2, **fields)


def test_serials_are_distinct_and_renewed_by_every_copy() -> None:
    a = _job(1)
    b = replace(a, priority=7)
    c = replace(a)
    assert len({a.serial, b.serial, c.serial}) == 3
    assert min(a.serial, b.serial, c.serial) >= 0


@pytest.mark.parametrize(
    "step",
    [
        "same",  # the same objects again
        "reversed",  # the same objects, another order
        "reprioritised",  # some jobs replaced by copies with another priority
        "some_gone",  # jobs left, the rest the same objects
        "new_ones",  # new jobs among the old
        "duplicates",  # one object twice
        "empty",  # no jobs at all, then jobs again
        "all_new",  # equal jobs, every one a new object
    ],
)
def test_columns_equal_a_fresh_read(step: str) -> None:
    before = [_job(i) for i in range(50)]
    _assert_read(before)
    after = list(before)
    if step == "reversed":
        after.reverse()
    elif step == "reprioritised":
        after = [
            replace(j, priority=j.priority + 5) if i % 7 == 0 else j for i, j in enumerate(after)
        ]
    elif step == "some_gone":
        after = after[::3]
    elif step == "new_ones":
        after = after[:20] + [_job(100 + i) for i in range(10)] + after[20:]
    elif step == "duplicates":
        after = [after[3], *after, after[3]]
    elif step == "empty":
        _assert_read([])
    elif step == "all_new":
        after = [replace(j) for j in after]
    _assert_read(after)
    _assert_read(after)


def test_breaks_in_the_order_of_id_follow_the_rows_from_cycle_to_cycle() -> None:
    """Rows kept in order of id are known to be without comparing them again; a change
    anywhere (a job gone, a new one among the old, two swapped) is seen."""
    rng = random.Random(5)
    records = sorted((_job(i) for i in range(300)), key=lambda j: j.id)
    _assert_read(records)
    for step in range(30):
        records = list(records)
        change = step % 4
        if change == 0:  # some jobs gone
            for _ in range(5):
                records.pop(rng.randrange(len(records)))
        elif change == 1:  # new jobs in their places by id, and one out of place
            records.extend(_job(1000 + 10 * step + i) for i in range(5))
            records.sort(key=lambda j: j.id)
            records.insert(rng.randrange(len(records)), _job(5000 + step))
        elif change == 2:  # two rows swapped
            a, b = rng.sample(range(len(records)), 2)
            records[a], records[b] = records[b], records[a]
        else:  # back in order of id
            records.sort(key=lambda j: j.id)
        _assert_read(records)


def test_a_job_older_than_the_window_is_read_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_columns, "WINDOW_PER_JOB", 1)
    monkeypatch.setattr(job_columns, "WINDOW_MARGIN", 4)
    old = _job(0, priority=9)
    _assert_read([old])
    for step in range(5):
        # Many jobs made since: the old one's serial falls out of the window.
        [_job(i) for i in range(50)]
        younger = [_job(10 + 10 * step + i) for i in range(10)]
        records = [old, *younger]
        _assert_read(records)
        kept = job_columns._kept
        assert kept is not None and kept.rows.base > old.serial
        _assert_read(records)


def test_cycles_on_several_threads_read_their_own_jobs() -> None:
    read_on_threads([[_job(1000 * t + i) for i in range(200)] for t in range(4)], _assert_read)


def test_cycles_decide_as_the_reference_as_jobs_change() -> None:
    """Random changes between cycles (reprioritisations, new and finished jobs): the order
    depends on the priorities and submit times read, and each cycle matches the reference."""
    rng = random.Random(5)
    nodes = tuple(node(f"n{i}", cpu=4) for i in range(3))
    queues = (Queue("A", 1.0), Queue("B", 1.0))
    jobs = [_job(i, priority=rng.randrange(4)) for i in range(40)]
    made = 40
    for _ in range(12):
        snap = Snapshot(queues, PRIORITY_CLASSES, nodes, jobs, SchedulingConfig())
        fast = fast_schedule(snap)
        assert fast.decisions() == reference_schedule(snap).decisions()
        changed = []
        for j in jobs:
            r = rng.random()
            if r < 0.1:
                continue  # finished or cancelled
            if r < 0.3:
                j = replace(j, priority=rng.randrange(4))
            changed.append(j)
        for _ in range(rng.randrange(6)):
            changed.append(_job(made, priority=rng.randrange(4)))
            made += 1
        rng.shuffle(changed)
        jobs = changed
    assert np.unique([j.serial for j in jobs]).size == len(jobs)


def test_serials_known_by_the_caller_are_read_only_for_their_very_jobs() -> None:
    """A caller that keeps its jobs' serials hands them over (``KnownSerials``); they are
    taken for that tuple of jobs only: the same jobs in another tuple are read afresh."""
    records = tuple(_job(i) for i in range(6))
    serials = np.array([j.serial for j in records], dtype=np.int64)
    taken = job_columns.read_columns(records, KnownSerials(records, serials))
    assert taken.serial.tolist() == serials.tolist()
    # Serials that are not these jobs' (a caller's mistake, or a snapshot remade with other
    # jobs): another tuple, or another length, is read from the jobs themselves.
    wrong = KnownSerials(records, serials[::-1].copy())
    for other in (tuple(list(records)), records[:-1]):
        got = job_columns.read_columns(other, wrong).serial.tolist()
        assert got == [j.serial for j in other]
    short = KnownSerials(records, serials[:-1])
    assert job_columns.read_columns(records, short).serial.tolist() == serials.tolist()
    _assert_read(list(records))
