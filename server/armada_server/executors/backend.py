"""The executor protocol's backend side: everything the server uses of an executor.

A backend is where runs actually happen (local processes, a simulated cluster, Kubernetes).
The agent (agent.py) syncs it with the server, the control server (control.py) reads its logs,
and whoever runs it (the server's own executor, the `armada-executor` command) opens and
closes it; they all go through `Backend` and nothing else. What a backend can do beyond
running pods is stated in its `capabilities`, never found out from its type.

Every operation is on the event loop; a backend reports its runs' progress through the
`Report` callback it is given, one `RunUpdate` at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Protocol

from armada_core.api import executor_pb2
from armada_server.executors.capabilities import Capabilities
from armada_server.executors.logs import LogLine, LogQuery

Report = Callable[[executor_pb2.RunUpdate], None]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def update(
    run_id: str,
    job_id: str,
    *,
    pending: executor_pb2.RunUpdate.Pending | None = None,
    running: executor_pb2.RunUpdate.Running | None = None,
    succeeded: executor_pb2.RunUpdate.Succeeded | None = None,
    failed: executor_pb2.RunUpdate.Failed | None = None,
    returned: executor_pb2.RunUpdate.Returned | None = None,
    stopped: executor_pb2.RunUpdate.Stopped | None = None,
    ingress_info: executor_pb2.RunUpdate.IngressInfo | None = None,
    at: datetime | None = None,
) -> executor_pb2.RunUpdate:
    """A run's news, stamped `at` (default now): one of the kinds (pending, running, ...)."""
    message = executor_pb2.RunUpdate(
        run_id=run_id,
        job_id=job_id,
        pending=pending,
        running=running,
        succeeded=succeeded,
        failed=failed,
        returned=returned,
        stopped=stopped,
        ingress_info=ingress_info,
    )
    when = at or datetime.now(UTC)
    # As Timestamp.FromDatetime would (a naive time is UTC), by arithmetic: every report has
    # a time of its own, so nothing is memoised.
    delta = (when if when.tzinfo else when.replace(tzinfo=UTC)) - _EPOCH
    message.time.seconds = delta.days * 86_400 + delta.seconds
    message.time.nanos = delta.microseconds * 1000
    return message


class Backend(Protocol):
    """Where runs actually happen."""

    @property
    def capabilities(self) -> Capabilities:
        """What it can do beyond running pods, the same for every executor of its kind."""
        ...

    async def open(self, report: Report) -> int:
        """Get ready before the first sync: adopt the runs an earlier start of this executor
        left (reporting what became of them through `report`); returns how many."""
        ...

    def nodes(self) -> Sequence[executor_pb2.Node]: ...

    def held(self) -> AbstractSet[str]:
        """Runs started and not yet ended (the caller neither keeps nor changes it: a
        backend may hand out the set it keeps)."""
        ...

    def start(self, lease: executor_pb2.Lease, report: Report) -> None:
        """Start a run; report its progress through `report` (on the event loop)."""
        ...

    def stop(self, run_id: str, *, preempt: bool) -> None:
        """Stop a run gracefully; it reports `stopped` once it has terminated."""
        ...

    def synced(self, lease_timeout: float, elapsed: float) -> None:
        """A sync succeeded, `elapsed` seconds after it was sent; the server expires leases
        not renewed for `lease_timeout` seconds (0: it does not say)."""
        ...

    async def container_log(self, query: LogQuery) -> Sequence[LogLine]:
        """A container's log lines; LogUnavailable when it is no longer kept."""
        ...

    async def close(self) -> None:
        """Stop following runs (what outlives the backend is adopted by the next `open`)."""
        ...
