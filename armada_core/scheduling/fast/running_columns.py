"""What a cycle reads of every running job (its node's row, its start time), kept for the
next cycle by ``Job.serial``.

A busy cluster's running jobs are mostly the very objects the last cycle read, and each field
read of tens of thousands of objects spread over the heap was a part of every cycle. As in
``job_columns``: a job is immutable and its serial never reused, so what was read of a serial
holds in every later cycle, and a node's row holds while the cycle's node index is the one it
was looked up in. The kept state is replaced whole, never changed in place, so cycles on
several threads only ever miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter

import numpy as np

from ..model import Job
from .free_space import FloatArray, IntArray
from .job_columns import SerialRows
from .state import NodeIndex, gather


@dataclass(frozen=True, slots=True, eq=False)
class RunningColumns:
    """Per running row (in the order given)."""

    node: IntArray  # the node's row in the index, -1 when the index has no such node
    start: FloatArray  # Job.start_time, 0.0 when it has none


@dataclass(frozen=True, slots=True, eq=False)
class _Kept:
    index: NodeIndex  # the index the node rows are of
    rows: SerialRows  # serial -> position in the columns
    columns: RunningColumns


_kept: _Kept | None = None


def running_columns(
    records: Sequence[Job], running: IntArray, serial: IntArray, index: NodeIndex
) -> RunningColumns:
    """The node rows and start times of the jobs at rows `running` of `records` (`serial`:
    every row's Job.serial), from the last cycle's where the job is one it read."""
    global _kept
    n = len(running)
    node = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n, dtype=np.float64)
    if not n:
        return RunningColumns(node, start)
    serials = serial[running]
    kept = _kept
    miss = np.arange(n)
    if kept is not None and kept.index is index:
        at = kept.rows.rows(serials)
        hit = at >= 0
        node[hit] = kept.columns.node[at[hit]]
        start[hit] = kept.columns.start[at[hit]]
        miss = np.flatnonzero(~hit)
    if len(miss):
        jobs = gather(records, running[miss])
        node[miss] = list(map(index.rows.get, map(attrgetter("node"), jobs), repeat(-1)))
        start[miss] = [0.0 if t is None else t for t in map(attrgetter("start_time"), jobs)]
    columns = RunningColumns(node, start)
    node.flags.writeable = start.flags.writeable = False  # kept: no phase may change them
    _kept = _Kept(index, SerialRows.of(serials), columns)
    return columns
