"""Refusing at submission the jobs no executor of their pool can run.

Executors declare in their syncs which pod-spec fields they cannot honour (stored in the
executors table). A job is refused, naming the field and the pool, when every executor of its
pool (`armadaproject.io/pool`; every executor when it names none) declares it cannot honour
some field the job sets. A pool no executor has joined yet accepts anything: the job waits for
one, as it would for capacity. The table is read at most once a second, so submissions do not
pay a query each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine

from armada_core.api import executor_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.jobs import annotations as ann
from armada_server.errors import InvalidArgument
from armada_server.executors.capabilities import unhonoured
from armada_server.storage import schema as t

REFRESH_SECONDS = 1.0


@dataclass(frozen=True)
class ExecutorCapabilities:
    """One executor's declaration; `unsupported` is None when it never declared any."""

    executor_id: str
    pool: str
    unsupported: tuple[str, ...] | None

    @property
    def restricted(self) -> bool:
        return bool(self.unsupported)

    @staticmethod
    def decode(executor_id: str, pool: str, data: bytes | None) -> ExecutorCapabilities:
        if data is None:
            return ExecutorCapabilities(executor_id, pool, None)
        declared = executor_pb2.Capabilities.FromString(data)
        return ExecutorCapabilities(executor_id, pool, tuple(declared.unsupported_pod_fields))


class CapabilityIndex:
    """The executors' declarations, cached for `refresh` seconds. `builtin` is the server's
    own executor, known before its first sync."""

    def __init__(
        self,
        engine: Engine,
        *,
        builtin: ExecutorCapabilities | None = None,
        refresh: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.builtin = builtin
        self.refresh = REFRESH_SECONDS if refresh is None else refresh
        self.clock = clock
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._executors: tuple[ExecutorCapabilities, ...] = ()

    def executors(self) -> tuple[ExecutorCapabilities, ...]:
        """Every known executor's declaration (blocking: call off the event loop)."""
        with self._lock:
            if self.clock() - self._read_at >= self.refresh:
                self._executors = self._read()
                self._read_at = self.clock()
            return self._executors

    def _read(self) -> tuple[ExecutorCapabilities, ...]:
        c = t.executors.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.id, c.pool, c.capabilities).order_by(c.id)).all()
        found = {r.id: ExecutorCapabilities.decode(r.id, r.pool, r.capabilities) for r in rows}
        if self.builtin is not None and self.builtin.executor_id not in found:
            found[self.builtin.executor_id] = self.builtin
        return tuple(found[k] for k in sorted(found))

    def check(self, items: Sequence[submit_pb2.JobSubmitRequestItem]) -> None:
        """InvalidArgument naming the item, the field and the pool for the first job that no
        executor of its pool can honour."""
        executors = self.executors()
        if not any(e.restricted for e in executors):
            return  # the common case: nothing to check
        # Per pool: the executors to ask, or None when some executor there honours anything.
        pools: dict[str, list[ExecutorCapabilities] | None] = {}
        decided: dict[tuple[bytes, str], str | None] = {}
        for i, item in enumerate(items):
            pool = item.annotations.get(ann.POOL, "")
            if pool not in pools:
                members = [e for e in executors if not pool or e.pool == pool]
                pools[pool] = members if members and all(e.restricted for e in members) else None
            candidates = pools[pool]
            if candidates is None:
                continue
            spec = item.pod_specs[0]
            key = (spec.SerializeToString(), pool)
            if key not in decided:
                decided[key] = _refusal(spec, pool, candidates)
            problem = decided[key]
            if problem is not None:
                raise InvalidArgument(f"job_request_items[{i}].pod_specs[0].{problem}")


def _refusal(
    spec: core_v1_pb2.PodSpec, pool: str, candidates: list[ExecutorCapabilities]
) -> str | None:
    """Why no candidate can run `spec` ("<field>: ..."), or None when one can."""
    first: tuple[ExecutorCapabilities, list[str]] | None = None
    for executor in candidates:
        fields = unhonoured(spec, executor.unsupported or ())
        if not fields:
            return None
        first = first or (executor, fields)
    assert first is not None
    executor, fields = first
    where = f"pool {pool!r}" if pool else "any pool"
    others = len(candidates) - 1
    also = f" (nor can the {others} other executor{'s' if others > 1 else ''})" if (others) else ""
    return (
        f"{fields[0]}: no executor of {where} can run this job: executor "
        f"{executor.executor_id!r} cannot honour {', '.join(fields)}{also}; remove "
        f"{'them' if len(fields) > 1 else 'it'} or submit to a pool whose executors can"
    )
