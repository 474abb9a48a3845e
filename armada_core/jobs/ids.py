"""Job and run identifiers.

Job ids are ULIDs (48-bit millisecond time + 80 random bits, Crockford base32, lower case as
upstream Armada writes them): sortable by submission time, so storage indexes stay append-only.
Run ids are UUIDs, as upstream's are, of version 7 (RFC 9562: 48-bit millisecond time, then
74 random bits): a cycle's thousands of new runs, and the reports that follow them, go to
neighbouring places of the runs' indexes, where random (version 4) ids went all over them.
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


class _Clock:
    """Where one kind of id stands: the millisecond of the last id made and its random part.
    Ids made within a millisecond count on from the last one, and a clock set back never
    makes a smaller id."""

    def __init__(self, random_bits: int) -> None:
        self.random_bits = random_bits
        self.lock = threading.Lock()
        self.last_ms = -1
        self.last_random = 0

    def take(self, count: int, now_ms: int | None) -> tuple[int, int]:
        """The millisecond and the first random part of `count` (> 0) new ids."""
        mask = (1 << self.random_bits) - 1
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self.lock:
            if ms <= self.last_ms:
                ms = self.last_ms
                first = (self.last_random + 1) & mask
            else:
                self.last_ms = ms
                # A random start below half the range: room to count on.
                first = int.from_bytes(os.urandom(10), "big") >> (81 - self.random_bits)
            self.last_random = (first + count - 1) & mask
        return ms, first


_JOB_IDS = _Clock(80)
_RUN_IDS = _Clock(74)


# Two characters per 10 bits: encoding an id is a handful of lookups.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def _encode(value: int, length: int) -> str:
    """`length` (even) base32 characters of `value`, most significant first."""
    return "".join(
        _PAIRS[(value >> shift) & 0x3FF] for shift in range((length // 2 - 1) * 10, -1, -10)
    )


_RANDOM = (1 << 80) - 1
_LOW = (1 << 40) - 1


def new_job_ids(count: int, now_ms: int | None = None) -> list[str]:
    """`count` new ULIDs, as that many calls of new_job_id would make them, with one lock
    and one clock read: a request of thousands of jobs takes its ids at once."""
    if count <= 0:
        return []
    ms, first = _JOB_IDS.take(count, now_ms)
    last = first + count - 1
    prefix = _encode(ms, 10)
    if first >> 40 != last >> 40:  # rare: the upper half changes within the batch
        return [prefix + _encode(r & _RANDOM, 16) for r in range(first, last + 1)]
    # The upper half of the random part is the same for every id: encoded once.
    prefix += _encode(first >> 40, 8)
    pairs = _PAIRS  # the lower half's four pairs spelled out: no generator per id
    return [
        prefix
        + pairs[r >> 30 & 0x3FF]
        + pairs[r >> 20 & 0x3FF]
        + pairs[r >> 10 & 0x3FF]
        + pairs[r & 0x3FF]
        for r in range(first, last + 1)
    ]


def new_job_id(now_ms: int | None = None) -> str:
    """A new ULID; ids made in the same millisecond by this process still increase."""
    return new_job_ids(1, now_ms)[0]


def job_id_time_ms(job_id: str) -> int:
    """The millisecond timestamp a job id was made at."""
    value = 0
    for ch in job_id[:10].lower():
        value = value * 32 + _ALPHABET.index(ch)
    return value


def is_job_id(text: str) -> bool:
    return len(text) == 26 and all(c in _ALPHABET for c in text.lower())


_RUN_RANDOM = (1 << 74) - 1


def new_run_ids(count: int, now_ms: int | None = None) -> list[str]:
    """`count` new run ids (UUIDs of version 7) with one lock and one clock read. Within a
    millisecond the random part counts on from the last id, as job ids' does, so ids made
    by this process increase."""
    if count <= 0:
        return []
    ms, first = _RUN_IDS.take(count, now_ms)
    last = first + count - 1
    made = []
    high = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | 0x2 << 62  # time, version, variant
    for r in range(first, last + 1):
        r &= _RUN_RANDOM
        h = f"{high | (r >> 62) << 64 | (r & 0x3FFF_FFFF_FFFF_FFFF):032x}"
        made.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return made


def new_run_id(now_ms: int | None = None) -> str:
    """A new run id; ids made in the same millisecond by this process still increase."""
    return new_run_ids(1, now_ms)[0]
