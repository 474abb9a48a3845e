"""Container logs: written with a timestamp per line, read back by time or by tail.

The file format is the CRI one kubelet uses (`<RFC 3339 time> <stream> <F|P> <text>`), so a line
longer than 16 KiB is stored as partial records and joined again on reading. Timestamps are
strictly increasing within a file, so "every line after the last one I saw" is exact: a
follower passes the last line's time as `since` and never sees a line twice or misses one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

MAX_RECORD_BYTES = 16 * 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TAIL_BLOCK = 64 * 1024


def format_timestamp(when: datetime) -> str:
    """RFC 3339 in UTC with microseconds, as the log files and the Logs RPC carry it."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


@dataclass(frozen=True)
class LogLine:
    """One line a container wrote, without its newline."""

    time: datetime
    stream: str  # "stdout" or "stderr"
    text: str

    @property
    def timestamp(self) -> str:
        return format_timestamp(self.time)


class LogWriter:
    """Appends one container's stdout and stderr to its log file as they arrive."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "ab")  # noqa: SIM115  # closed by close()
        self._pending: dict[str, bytearray] = {}
        self._last_micros = 0

    def write(self, stream: str, data: bytes) -> None:
        """Record `data`; complete lines are written at once, an unfinished one waits."""
        buffer = self._pending.setdefault(stream, bytearray())
        buffer += data
        records = []
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            while len(line) > MAX_RECORD_BYTES:
                records.append(self._record(stream, b"P", line[:MAX_RECORD_BYTES]))
                line = line[MAX_RECORD_BYTES:]
            records.append(self._record(stream, b"F", line))
        while len(buffer) >= MAX_RECORD_BYTES:
            records.append(self._record(stream, b"P", bytes(buffer[:MAX_RECORD_BYTES])))
            del buffer[:MAX_RECORD_BYTES]
        self._put(records)

    def end_stream(self, stream: str) -> None:
        """The stream is closed: its last line counts even without a newline."""
        buffer = self._pending.pop(stream, None)
        if buffer:
            self._put([self._record(stream, b"F", bytes(buffer))])

    def close(self) -> None:
        for stream in list(self._pending):
            self.end_stream(stream)
        self._file.close()

    def _record(self, stream: str, tag: bytes, content: bytes) -> bytes:
        micros = max(time.time_ns() // 1000, self._last_micros + 1)
        self._last_micros = micros
        stamp = format_timestamp(_from_micros(micros)).encode()
        return b"%s %s %s %s\n" % (stamp, stream.encode(), tag, content.replace(b"\r", b""))

    def _put(self, records: list[bytes]) -> None:
        if records and not self._file.closed:
            self._file.write(b"".join(records))
            self._file.flush()


def read_logs(
    path: Path | str, *, since: datetime | None = None, tail: int | None = None
) -> list[LogLine]:
    """The lines of a log file written strictly after `since`, the last `tail` of them if set.

    A missing file reads as no lines (the container has not started yet). A naive `since` is
    taken as UTC.
    """
    if tail is not None and tail <= 0:
        return []
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            if tail is None:
                f.seek(0)
                return _after(_parse(f.read(), whole=True), since)
            # Read backwards from the end until enough lines, a line from before `since` (all
            # earlier ones are older still) or the start of the file.
            block = _TAIL_BLOCK
            while True:
                offset = max(0, size - block)
                f.seek(offset)
                parsed = _parse(f.read(size - offset), whole=offset == 0)
                lines = _after(parsed, since)
                older = since is not None and bool(parsed) and parsed[0].time <= since
                if len(lines) >= tail or older or offset == 0:
                    return lines[-tail:]
                block *= 4
    except FileNotFoundError:
        return []


def _after(lines: list[LogLine], since: datetime | None) -> list[LogLine]:
    return lines if since is None else [line for line in lines if line.time > since]


def _parse(data: bytes, *, whole: bool) -> list[LogLine]:
    """Logical lines from CRI records; `whole` says `data` starts at the start of the file.

    When it does not, the first (possibly cut) record is dropped, and so are each stream's
    records before its first complete line, which may be the tail of a line begun earlier.
    What follows the last newline is a record still being written, so it waits for the next
    read: read now, a follower would take it as whole and start after it, losing its rest.
    """
    records = data.split(b"\n")[:-1]
    if not whole:
        records = records[1:]
    lines: list[LogLine] = []
    parts: dict[str, list[bytes]] = {}
    synced: set[str] = set()
    for record in records:
        fields = record.split(b" ", 3)
        if len(fields) != 4 or fields[2] not in (b"F", b"P"):
            continue
        stamp, stream_bytes, tag, content = fields
        stream = stream_bytes.decode(errors="replace")
        if not whole and stream not in synced:
            if tag == b"F":
                synced.add(stream)
            continue
        pending = parts.setdefault(stream, [])
        pending.append(content)
        if tag == b"F":
            try:
                when = datetime.strptime(stamp.decode(), "%Y-%m-%dT%H:%M:%S.%fZ")
            except ValueError:
                pending.clear()
                continue
            text = b"".join(pending).decode(errors="replace")
            lines.append(LogLine(when.replace(tzinfo=UTC), stream, text))
            pending.clear()
    return lines
