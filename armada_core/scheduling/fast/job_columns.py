"""What a cycle reads of every job, kept for the next cycle by ``Job.serial``.

Reading one field of a million job objects costs 40-50 ms, and a cycle needs four of each
(kind, priority, submit time, id) while most jobs are the very objects the last cycle read.
A job is immutable and its serial never reused, so the columns read of a serial hold for
every later cycle: a cycle reads one field of every job (the serial), takes the columns of
the serials the last cycle read, and reads the others' fields.

What is kept is the last cycle's columns and a table from serial to their row, over a
window of serials at most a few times the jobs: a job older than the window is read every
cycle, never wrongly found. The kept state is replaced whole, never changed in place, so
cycles on several threads only ever miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..model import Job, KnownSerials
from .free_space import FloatArray, IntArray
from .state import gather

#: The serial window spans at most this many times the jobs (plus a margin): serials of a
#: long-lived job and of jobs made much later leave a gap the table would otherwise fill.
WINDOW_PER_JOB = 8
WINDOW_MARGIN = 65_536


@dataclass(frozen=True, slots=True, eq=False)
class JobColumns:
    """Per-row fields of the snapshot's jobs."""

    kind: IntArray  # Job.kind_id
    priority: IntArray
    submit: FloatArray
    ids: NDArray[Any]  # Job.id, as objects
    id_list: list[str]  # the same as a list, as the cycle reads them
    #: For each row, how many rows up to it have an id not above the row's before: rows
    #: a < b with the same count are in order of id, known without comparing their ids
    #: (the order's ties are broken by id, and a server holds its jobs in order of id).
    id_breaks: IntArray
    serial: IntArray  # Job.serial


@dataclass(frozen=True, slots=True, eq=False)
class SerialRows:
    """Rows by serial, over a window of serials at most WINDOW_PER_JOB times the rows (plus
    WINDOW_MARGIN) below the newest: an older serial is not found, never wrongly found."""

    base: int  # the serial of row_of's first entry
    row_of: NDArray[np.int32]  # serial - base -> row, -1 when not kept

    @classmethod
    def of(cls, serial: IntArray) -> SerialRows:
        """The rows of `serial` (one per row; not empty)."""
        top = int(serial.max())
        base = max(int(serial.min()), top - (WINDOW_PER_JOB * len(serial) + WINDOW_MARGIN) + 1, 0)
        row_of = np.full(max(top - base + 1, 0), -1, dtype=np.int32)
        rows = np.flatnonzero(serial >= base)
        row_of[serial[rows] - base] = rows
        return cls(base, row_of)

    def rows(self, serial: IntArray) -> IntArray:
        """Each serial's row, -1 when it is not kept."""
        local = serial - self.base
        inside = (local >= 0) & (local < len(self.row_of))
        rows = np.full(len(serial), -1, dtype=np.int64)
        rows[inside] = self.row_of[local[inside]]
        return rows


@dataclass(frozen=True, slots=True, eq=False)
class _Kept:
    """The last cycle's columns, read-only (the id list is the cycle's alone: a kept list of
    a million would be walked by every collection of the garbage collector, arrays are not)."""

    rows: SerialRows  # serial -> row of the columns
    kind: IntArray
    priority: IntArray
    submit: FloatArray
    ids: NDArray[Any]
    id_breaks: IntArray


_kept: _Kept | None = None


def read_columns(records: Sequence[Job], known: KnownSerials | None = None) -> JobColumns:
    """The columns of `records`, from the last cycle's where the job is one it read; their
    serials from `known` when it is theirs."""
    global _kept
    n = len(records)
    if known is not None and known.jobs is records and len(known.serials) == n:
        serial = np.asarray(known.serials, dtype=np.int64)
    else:
        serial = np.fromiter(map(attrgetter("serial"), records), dtype=np.int64, count=n)
    kept = _kept
    rows = kept.rows.rows(serial) if kept is not None and n else None
    if rows is None or not (hit := rows >= 0).any():
        columns = _read(records, serial)
    else:
        assert kept is not None
        columns = _gathered(kept, rows, np.flatnonzero(~hit), records, serial)
    if n:
        _kept = _keep(serial, columns)
    return columns


def _read(records: Sequence[Job], serial: IntArray) -> JobColumns:
    n = len(records)
    id_list = list(map(attrgetter("id"), records))
    ids = np.empty(n, dtype=object)
    ids[:] = id_list
    return JobColumns(
        np.fromiter(map(attrgetter("kind_id"), records), dtype=np.int64, count=n),
        np.fromiter(map(attrgetter("priority"), records), dtype=np.int64, count=n),
        np.fromiter(map(attrgetter("submit_time"), records), dtype=np.float64, count=n),
        ids,
        id_list,
        _breaks(ids, np.arange(1, n)),
        serial,
    )


def _breaks(ids: NDArray[Any], compared: IntArray) -> IntArray:
    """`JobColumns.id_breaks` of `ids`, comparing the rows `compared` with the row before
    each; every other row after the first is in order with the row before."""
    broken = np.zeros(len(ids), dtype=np.int64)
    if len(compared):
        broken[compared] = ~(ids[compared] > ids[compared - 1])
    return np.cumsum(broken)


def _gathered(
    kept: _Kept, rows: IntArray, miss: IntArray, records: Sequence[Job], serial: IntArray
) -> JobColumns:
    """The kept columns at `rows`, the rows `miss` (-1 there) read from `records`."""
    kind, priority, submit, ids = (
        kept.kind[rows],
        kept.priority[rows],
        kept.submit[rows],
        kept.ids[rows],
    )
    if len(miss):
        fresh = _read(gather(records, miss), serial[miss])
        kind[miss], priority[miss], submit[miss], ids[miss] = (
            fresh.kind,
            fresh.priority,
            fresh.submit,
            fresh.ids,
        )
    # Two rows read in the same order last cycle, with no break between them then, are in
    # order of id still: only the others' ids are compared (a backlog's new and changed jobs).
    before, after = rows[:-1], rows[1:]
    kept_in_order = (
        (before >= 0) & (after > before) & (kept.id_breaks[after] == kept.id_breaks[before])
    )
    breaks = _breaks(ids, np.flatnonzero(~kept_in_order) + 1)
    return JobColumns(kind, priority, submit, ids, ids.tolist(), breaks, serial)


def _keep(serial: IntArray, columns: JobColumns) -> _Kept:
    arrays = (columns.kind, columns.priority, columns.submit, columns.ids, columns.id_breaks)
    for array in arrays:
        array.flags.writeable = False  # the cycle reads them too: no phase may change them
    return _Kept(SerialRows.of(serial), *arrays)
