"""What the scheduling leader carries from one cycle to the next, kept in the database.

Each queue's decayed usage (``usage_half_life``) and the rate limits' token buckets are the
scheduler's only memory between cycles. Kept by the leader alone, a restart or another replica
taking the lead would start them afresh: every queue's past forgotten, every bucket full. The
leader writes them as they change (one row, ``storage.carryover``) and a replica that comes to
lead reads them back; both carry their time, so they decay and refill across the gap.

A row that cannot be read (an older or damaged form) is logged and ignored: the scheduler then
starts afresh, as it did before, rather than not at all.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field

from armada_core.scheduling.ratelimit import RateBuckets

log = logging.getLogger("armada_server")


@dataclass
class Carryover:
    #: Each queue's decayed usage, and when it was recorded (seconds since the epoch).
    usage: dict[str, float] = field(default_factory=dict)
    usage_at: float | None = None
    rate: RateBuckets = field(default_factory=RateBuckets)

    def dumps(self) -> str:
        """The JSON kept; "{}" when there is nothing to carry (nothing is written then)."""
        doc: dict[str, object] = {}
        if self.usage:
            doc["usage"] = self.usage
            doc["usage_at"] = self.usage_at
        if self.rate.tokens is not None or self.rate.queues:
            doc["rate"] = {
                "tokens": self.rate.tokens,
                "queues": self.rate.queues,
                "at": self.rate.at,
            }
        return json.dumps(doc, sort_keys=True)

    @classmethod
    def loads(cls, text: str | None) -> Carryover:
        """What `dumps` wrote; afresh (with a warning) when it cannot be read."""
        if not text:
            return cls()
        try:
            doc = json.loads(text)
            usage = {str(q): _number(u) for q, u in doc.get("usage", {}).items()}
            usage_at = _optional(doc.get("usage_at"))
            rate = doc.get("rate", {})
            buckets = RateBuckets(
                tokens=_optional(rate.get("tokens")),
                queues={str(q): _number(v) for q, v in rate.get("queues", {}).items()},
                at=_optional(rate.get("at")),
            )
        except (ValueError, TypeError, AttributeError) as e:
            log.warning(
                "the scheduler's carried-over state cannot be read (%s): decayed usage "
                "and rate limits start afresh",
                e,
            )
            return cls()
        return cls(usage, usage_at, buckets)


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _optional(value: object) -> float | None:
    return None if value is None else _number(value)
