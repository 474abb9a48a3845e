"""Durations in the Go spelling used by Armada configuration ("30s", "5m", "1h30m")."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: object) -> float:
    """Seconds from "1h30m", "500ms", "10s" or a plain non-negative number of seconds.

    Raises ValueError with a message fit to follow a field path.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as 30s or 5m, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        pos, seconds = 0, 0.0
        while pos < len(text):
            match = _PART.match(text, pos)
            if match is None:
                raise ValueError(f"must be a duration such as 30s or 5m, not {value!r}")
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if not text:
            raise ValueError("must be a duration such as 30s or 5m, not an empty string")
    else:
        raise ValueError(f"must be a duration such as 30s or 5m, not {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"must be a non-negative duration, not {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling that parses back to the same number of seconds."""
    if seconds == 0:
        return "0s"
    millis = round(seconds * 1000)
    if abs(millis / 1000 - seconds) > 1e-9:
        return f"{seconds!r}s"
    if millis % 1000:
        return f"{millis}ms" if millis < 1000 else f"{millis / 1000:g}s"
    whole = millis // 1000
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts)
