"""A run's container log as the server asks a backend for it (ExecutorControl.Logs).

The query names one container of one run, optionally the lines after a time and the last few;
every backend answers with lines that carry their own RFC 3339 timestamp, or raises
`LogUnavailable` when it no longer has (or never had) the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time_ns(text: str) -> int:
    """An RFC 3339 time as nanoseconds since the epoch, keeping every fractional digit
    (Kubernetes writes nanoseconds; comparing at microseconds would lose lines)."""
    value = text.strip()
    if not value:
        raise ValueError("empty time")
    fraction = 0
    if "." in value:
        head, rest = value.split(".", 1)
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        if not digits:
            raise ValueError(f"{text!r} is not an RFC 3339 time")
        fraction = int(digits[:9].ljust(9, "0"))
        value = head + rest
    when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + fraction


def time_from_ns(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


@dataclass(frozen=True)
class LogQuery:
    """What the server asks for: one container of one run, after a time, the last lines."""

    run_id: str
    job_id: str
    pod_name: str
    namespace: str
    container: str
    since_ns: int | None = None
    tail: int | None = None

    @property
    def since(self) -> datetime | None:
        return None if self.since_ns is None else time_from_ns(self.since_ns)


class LogLine(Protocol):
    """One line of a container's log, as a backend returns it."""

    @property
    def timestamp(self) -> str: ...

    @property
    def text(self) -> str: ...


class LogUnavailable(Exception):
    """The executor no longer has (or never had) the log asked for."""
