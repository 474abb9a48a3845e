"""How long ended jobs are kept, as configured: parsed here, apart from the storage that
prunes them, so that reading a configuration (as an executor does) loads no storage."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def retention_seconds(value: object, key: str = "retention") -> float | None:
    """A retention as seconds: a number of seconds, or a number with a unit (s, m, h, d,
    w: "7d", "12h"); 0 or "forever" keeps everything (None)."""
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected a duration such as 7d, 12h or forever, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value.strip().lower() == "forever":
        return None
    elif isinstance(value, str) and (match := _DURATION.match(value.lower())):
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        raise ValueError(f"{key}: expected a duration such as 7d, 12h or forever, got {value!r}")
    if seconds < 0:
        raise ValueError(f"{key}: must not be negative, got {value!r}")
    return seconds or None
