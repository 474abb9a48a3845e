"""Executors' nodes as operators see them, node cordons, and where executors serve logs.

Cordons live in their own table (not in the nodes executors report), so they
apply to nodes of every executor, in-process or remote, survive restarts of the server and of
the executor, and hold on every replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, or_, select, text, update

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import job_requests
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import fetch
from armada_server.storage.rows import spec_key, when


def encode_nodes(nodes: Iterable[executor_pb2.Node]) -> bytes:
    """Nodes as the executors table keeps them: a SyncRequest holding only nodes (a plain
    protobuf list). Deterministic, so that the same nodes are the same bytes in every
    process (maps are otherwise written in hash order): the scheduler's wake-up, the
    metrics and the snapshot compare and key by these bytes."""
    return executor_pb2.SyncRequest(nodes=nodes).SerializeToString(deterministic=True)


def encode_request_nodes(request: executor_pb2.SyncRequest) -> bytes:
    """`encode_nodes(request.nodes)` at under half the cost: the request is copied whole
    (in C) and all but its nodes cleared, where a new message would take 10,000 nodes one
    by one through Python. Every sync carries its executor's nodes."""
    only = executor_pb2.SyncRequest()
    only.CopyFrom(request)
    for descriptor, _ in only.ListFields():
        if descriptor.name != "nodes":
            only.ClearField(descriptor.name)
    return only.SerializeToString(deterministic=True)


def decode_nodes(data: bytes) -> list[executor_pb2.Node]:
    return list(executor_pb2.SyncRequest.FromString(data).nodes)


def _requests(raw: bytes) -> Mapping[str, int]:
    """What a stored spec's pod requests."""
    spec = submit_pb2.Job.FromString(raw)
    return job_requests(spec.pod_specs[0] if spec.pod_specs else spec.pod_spec)


@dataclass(frozen=True)
class NodeInfo:
    """One node an executor reported, with its cordon."""

    executor: str
    pool: str
    node: executor_pb2.Node
    last_seen: datetime
    cordoned_at: datetime | None
    cordoned_by: str

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def cordoned(self) -> bool:
        return self.cordoned_at is not None


@dataclass(frozen=True)
class NodesReport:
    """An executor's latest report of its nodes, as stored (`encode_nodes`)."""

    executor: str
    pool: str
    nodes: bytes
    last_seen: datetime


# When a node was cordoned, and by whom.
Cordon = tuple[datetime, str]


@dataclass
class NodeLoad:
    """The runs holding one node's capacity and what they request (cpu in millicores, the
    rest in base units)."""

    jobs: int = 0
    requests: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutorControl:
    address: str
    token: str


def runs_holding_nodes(now: datetime) -> list[Select[Any]]:
    """The runs holding their nodes at `now` (run id, executor, node, job id, spec): the
    active ones, through ix_runs_active, and those the server ended that may still be
    stopping, through ix_runs_releases_at. As one read joined by OR, SQLite scanned every
    run kept; a run both reads find is the same row."""
    r, j = t.runs.c, t.jobs.c
    holding = select(r.id, r.cluster_id, r.node, j.id, j.spec).join(t.jobs, j.id == r.job_id)
    return [
        holding.where(text(t.active_run("runs"))),
        holding.where(r.releases_at.is_not(None), r.releases_at > now),
    ]


class Nodes:
    """Node cordons and executors' control addresses."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def record_executor_control(self, executor_id: str, address: str, token: str) -> None:
        """Where the executor serves ExecutorControl now; written only when it changed."""
        with self._tx.write() as (conn, _):
            conn.execute(
                update(t.executors)
                .where(
                    t.executors.c.id == executor_id,
                    or_(
                        t.executors.c.address.is_(None),
                        t.executors.c.address != address,
                        t.executors.c.address_token.is_(None),
                        t.executors.c.address_token != token,
                    ),
                )
                .values(address=address, address_token=token)
            )

    def executor_control(self, executor_id: str) -> ExecutorControl | None:
        """Where to ask the executor for logs; None for an executor never seen (or one that
        reports no address)."""
        with self._tx.read() as conn:
            row = conn.execute(
                select(t.executors.c.address, t.executors.c.address_token).where(
                    t.executors.c.id == executor_id
                )
            ).first()
        if row is None or not row.address:
            return None
        return ExecutorControl(row.address, row.address_token or "")

    def nodes_with_cordons(self) -> list[NodeInfo]:
        """Every node of every executor (as last reported), with its cordon, by executor and
        name. Cordons of nodes no executor reports any more are listed too."""
        reports, found = self.reported_nodes()
        cordons = dict(found)
        out = []
        for r in reports:
            for node in sorted(decode_nodes(r.nodes), key=lambda n: n.name):
                at, by = cordons.pop((r.executor, node.name), (None, ""))
                out.append(NodeInfo(r.executor, r.pool, node, r.last_seen, at, by))
        for (executor, name), (at, by) in sorted(cordons.items()):
            out.append(NodeInfo(executor, "", executor_pb2.Node(name=name), at, at, by))
        return out

    def reported_nodes(self) -> tuple[list[NodesReport], dict[tuple[str, str], Cordon]]:
        """Each executor's latest report of its nodes, still encoded (by executor), and every
        cordon by (executor, node), read in one snapshot: for readers that keep what they
        decoded of a report until it changes."""
        with self._tx.read() as conn:
            cordons = {
                (r.executor_id, r.node): (when(r.cordoned_at), r.requestor)
                for r in conn.execute(select(t.node_cordons))
            }
            e = t.executors.c
            reports = [
                NodesReport(r.id, r.pool, r.nodes, when(r.last_seen))
                for r in conn.execute(select(e.id, e.pool, e.nodes, e.last_seen).order_by(e.id))
            ]
        return reports, cordons

    def node_loads(self) -> dict[tuple[str, str], NodeLoad]:
        """(executor, node) -> the runs holding the node: active runs, and runs the server
        ended whose processes may still be stopping there (as a scheduling cycle counts them)."""
        now = self._tx.clock()
        loads: dict[tuple[str, str], NodeLoad] = {}
        # Requests by spec without its id: a backlog's 100,000 runs have a few distinct specs.
        requests: dict[bytes, Mapping[str, int]] = {}
        with self._tx.read() as conn:
            holders = {row[0]: row[1:] for q in runs_holding_nodes(now) for row in fetch(conn, q)}
        for executor, node, job_id, raw in holders.values():
            load = loads.setdefault((executor, node), NodeLoad())
            load.jobs += 1
            key = spec_key(job_id, raw)
            asked = requests.get(key) if key is not None else None
            if asked is None:
                asked = _requests(raw)
                if key is not None:
                    requests[key] = asked
            for name, quantity in asked.items():
                load.requests[name] = load.requests.get(name, 0) + quantity
        return loads

    def set_node_cordon(
        self, executor_id: str, node: str, cordoned: bool, requestor: str = ""
    ) -> bool:
        """Cordon or uncordon; False when it already was."""
        with self._tx.write() as (conn, _):
            if not cordoned:
                return (
                    conn.execute(
                        delete(t.node_cordons).where(
                            t.node_cordons.c.executor_id == executor_id,
                            t.node_cordons.c.node == node,
                        )
                    ).rowcount
                    > 0
                )
            stmt = self._tx.insert(t.node_cordons).values(
                executor_id=executor_id,
                node=node,
                cordoned_at=self._tx.clock(),
                requestor=requestor,
            )
            # RETURNING, not rowcount: an INSERT's rowcount is -1 on PostgreSQL here.
            added = stmt.on_conflict_do_nothing().returning(t.node_cordons.c.node)
            return conn.execute(added).first() is not None
