"""Text from outside (executors, clients) made safe to store and to show.

PostgreSQL refuses NUL characters in text columns, so one NUL in a failure text would make it
refuse the whole transaction it arrives in; control characters garble terminals and logs; and a
huge text would be carried in every event and error message that repeats it.
"""

from __future__ import annotations

import re

# C0 and C1 control characters, DEL, and unpaired surrogates (which no encoder accepts), except
# tab and newline. A carriage return becomes a newline (see below).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
TRUNCATED = "... [truncated]"
ELLIPSIS = "..."
# Bounds on what an executor reports about a failed run: a reason or termination message as
# long as Kubernetes keeps one (4096 bytes), names and short words as long as the columns
# that hold them.
MAX_FAILURE_TEXT = 4096
MAX_FAILURE_WORD = 253
MAX_CONDITION = 64


def clean_text(value: str, limit: int) -> str:
    """`value` without control characters other than tab and newline, at most `limit`
    characters long (a longer text is cut and ends with a marker saying so)."""
    if not isinstance(value, str):  # protobuf hands back text that is not UTF-8 as bytes
        value = bytes(value).decode("utf-8", errors="replace")
    value = _UNSAFE.sub("", value.replace("\r\n", "\n").replace("\r", "\n"))
    if len(value) > limit:
        return value[: max(limit - len(TRUNCATED), 0)] + TRUNCATED
    return value


def shorten(value: object, limit: int = 100) -> str:
    """`repr(value)` cut to about `limit` characters with an ellipsis: error messages name
    a bad value without echoing all of it."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + ELLIPSIS + f" ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit + 2 else text[:limit] + ELLIPSIS


def key_in_path(key: str, limit: int = 60) -> str:
    """A map key as a field path shows it (`annotations[KEY]`): escaped like repr, without
    quotes, and cut to `limit` characters with an ellipsis, so a path stays one short word."""
    text = repr(key[: limit + 1])[1:-1]
    return text[:limit] + ELLIPSIS if len(text) > limit else text
