"""The transition guard: a job's row is written only where it still has the version the
transition was decided on (compare-and-set), the same on SQLite and PostgreSQL.

Two replicas may decide about one job at once (a cancel on one, the leader's lease on the
other); under READ COMMITTED both would commit and the later write would silently undo the
earlier one (a cancelled job leased and run anyway). With the guard the later transaction
finds fewer rows than it decided on, raises Conflict, rolls back whole, and is decided again
from what is now stored, where the transition that no longer applies is skipped.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError

log = logging.getLogger("armada_server")

P = ParamSpec("P")
R = TypeVar("R")

# Attempts of a transaction that keeps meeting concurrent writers; each sees the others'
# commits, so it ends once nothing else touches its jobs between its read and its write.
ATTEMPTS = 8

# PostgreSQL's serialization failure and deadlock: the transaction rolled back, try again.
_RETRIED_SQLSTATES = frozenset({"40001", "40P01"})


class Conflict(Exception):
    """Jobs changed between a transaction's read and its write."""


def transient(error: DBAPIError) -> bool:
    """The transaction was rolled back by the database for another's sake: run it again."""
    code = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return code in _RETRIED_SQLSTATES


def retried(method: Callable[P, R]) -> Callable[P, R]:
    """Run a store transaction again (from its read) when a concurrent writer won."""

    @functools.wraps(method)
    def again(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return method(*args, **kwargs)
            except Conflict as e:
                if attempt == ATTEMPTS:
                    raise
                log.info("%s: %s; deciding again (attempt %d)", method.__name__, e, attempt + 1)
            except DBAPIError as e:
                if attempt == ATTEMPTS or not transient(e):
                    raise
                log.info(
                    "%s: %s; trying again (attempt %d)",
                    method.__name__,
                    str(e.orig).strip().splitlines()[0],
                    attempt + 1,
                )
        raise AssertionError("unreachable")

    return again
