"""Queues and retry policies: what operators create, and what submissions and retries read."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, insert, select, update

from armada_core.api import submit_pb2
from armada_server.errors import AlreadyExists, NotFound
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import fetch

# A queue's spec by name, built once: every request naming a queue reads it.
_QUEUE_SPEC = select(t.queues.c.spec).where(t.queues.c.name == bindparam("name"))


class Queues:
    """The queues, each stored as the api.Queue a client sent."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def create_queue(self, queue: submit_pb2.Queue) -> None:
        with self._tx.write() as (conn, _):
            if conn.execute(select(t.queues.c.name).where(t.queues.c.name == queue.name)).first():
                raise AlreadyExists(f"queue {queue.name!r} already exists")
            conn.execute(
                insert(t.queues).values(
                    name=queue.name, cordoned=queue.cordoned, spec=queue.SerializeToString()
                )
            )

    def update_queue(self, queue: submit_pb2.Queue) -> None:
        with self._tx.write() as (conn, _):
            done = conn.execute(
                update(t.queues)
                .where(t.queues.c.name == queue.name)
                .values(cordoned=queue.cordoned, spec=queue.SerializeToString())
            )
            if done.rowcount == 0:
                raise NotFound(f"queue {queue.name!r} not found")

    def delete_queue(self, name: str) -> None:
        with self._tx.write() as (conn, _):
            done = conn.execute(delete(t.queues).where(t.queues.c.name == name))
            if done.rowcount == 0:
                raise NotFound(f"queue {name!r} not found")

    def get_queue(self, name: str) -> submit_pb2.Queue:
        """The queue as stored (every request that names a queue reads it to authorise)."""
        with self._tx.read() as conn:
            rows = fetch(conn, _QUEUE_SPEC, {"name": name})
        if not rows:
            raise NotFound(f"queue {name!r} not found")
        return submit_pb2.Queue.FromString(rows[0][0])

    def list_queues(self) -> list[submit_pb2.Queue]:
        with self._tx.read() as conn:
            rows = conn.execute(select(t.queues.c.spec).order_by(t.queues.c.name)).all()
        return [submit_pb2.Queue.FromString(r.spec) for r in rows]

    def set_cordoned(self, name: str, cordoned: bool) -> None:
        with self._tx.write() as (conn, _):
            row = conn.execute(select(t.queues.c.spec).where(t.queues.c.name == name)).first()
            if row is None:
                raise NotFound(f"queue {name!r} not found")
            queue = submit_pb2.Queue.FromString(row.spec)
            queue.cordoned = cordoned
            conn.execute(
                update(t.queues)
                .where(t.queues.c.name == name)
                .values(cordoned=cordoned, spec=queue.SerializeToString())
            )


class RetryPolicies:
    """The named retry policies queues and jobs refer to (read by retries.Catalogue)."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def create_retry_policy(self, policy: submit_pb2.RetryPolicy) -> None:
        with self._tx.write() as (conn, _):
            exists = conn.execute(
                select(t.retry_policies.c.name).where(t.retry_policies.c.name == policy.name)
            ).first()
            if exists:
                raise AlreadyExists(f"retry policy {policy.name!r} already exists")
            conn.execute(
                insert(t.retry_policies).values(name=policy.name, spec=policy.SerializeToString())
            )

    def update_retry_policy(self, policy: submit_pb2.RetryPolicy) -> None:
        with self._tx.write() as (conn, _):
            done = conn.execute(
                update(t.retry_policies)
                .where(t.retry_policies.c.name == policy.name)
                .values(spec=policy.SerializeToString())
            )
            if done.rowcount == 0:
                raise NotFound(f"retry policy {policy.name!r} not found")

    def delete_retry_policy(self, name: str) -> None:
        with self._tx.write() as (conn, _):
            done = conn.execute(delete(t.retry_policies).where(t.retry_policies.c.name == name))
            if done.rowcount == 0:
                raise NotFound(f"retry policy {name!r} not found")

    def get_retry_policy(self, name: str) -> submit_pb2.RetryPolicy:
        with self._tx.read() as conn:
            row = conn.execute(
                select(t.retry_policies.c.spec).where(t.retry_policies.c.name == name)
            ).first()
        if row is None:
            raise NotFound(f"retry policy {name!r} not found")
        return submit_pb2.RetryPolicy.FromString(row.spec)

    def list_retry_policies(self) -> list[submit_pb2.RetryPolicy]:
        with self._tx.read() as conn:
            rows = conn.execute(
                select(t.retry_policies.c.spec).order_by(t.retry_policies.c.name)
            ).all()
        return [submit_pb2.RetryPolicy.FromString(r.spec) for r in rows]
