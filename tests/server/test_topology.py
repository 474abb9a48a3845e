"""Topology-aware gangs through the gRPC API: the `scheduling.topology_levels` option, node
labels as the executor reports them, and the gangMaxHops annotation."""

from __future__ import annotations

from pathlib import Path

from armada_core.jobs import annotations as ann
from armada_core.scheduling import reasons

from ..jobs.factories import container, item
from .test_scheduling_config import leased_jobs, serving, submit, wait_reasons
from .test_scheduling_loop import Executor

LEVELS = "  topology_levels: [topology/block, topology/rack]\n"

#: Node -> (block, rack). By id, n0 and n1 come first and are in different blocks; by
#: topology, rack r1 of block b1 holds n0 and n3.
RACKS = {0: ("b1", "r1"), 1: ("b2", "r3"), 2: ("b1", "r2"), 3: ("b1", "r1")}


def member(gang_id: str, size: int, max_hops: int | None = None):
    annotations = {ann.GANG_ID: gang_id, ann.GANG_CARDINALITY: str(size)}
    if max_hops is not None:
        annotations[ann.GANG_MAX_HOPS] = str(max_hops)
    return item({"containers": [container(cpu="4", memory="4Gi")]}, annotations=annotations)


def fat_tree(ex: Executor) -> None:
    for i, node in enumerate(ex.nodes):
        block, rack = RACKS[i]
        node.labels.clear()
        node.labels.update({"topology/block": block, "topology/rack": rack})
    ex.sync()


def test_a_gang_is_placed_within_one_rack(tmp_path: Path) -> None:
    with serving(tmp_path, LEVELS) as (_, api, _path):
        ex = Executor(api.channel, nodes=4, cpu="4", memory="8Gi")
        fat_tree(ex)
        ids = submit(api, "a", *[member("g", 2) for _ in range(2)])
        leases = ex.wait_leases(2)
        assert {lease.job.id for lease in leases} == set(ids)
        assert {lease.node for lease in leases} == {"e1-n0", "e1-n3"}


def test_gang_max_hops_holds_a_gang_back_that_no_rack_holds(tmp_path: Path) -> None:
    with serving(tmp_path, LEVELS) as (_, api, _path):
        ex = Executor(api.channel, nodes=4, cpu="4", memory="8Gi")
        fat_tree(ex)
        # Three members within 2 hops need one rack of three free nodes: none has, though
        # four nodes are free. Within 4 hops, block b1 holds them.
        held_back = submit(api, "a", *[member("near", 3, max_hops=2) for _ in range(3)])
        wait_reasons(api, held_back, reasons.gang_hops(3, 2, "topology/rack"))
        assert reasons.gang_hops(3, 2, "topology/rack") == (
            "gang of 3 needs members within 2 hops (one topology/rack); no rack has room"
        )
        ex.sync()
        assert not ex.held
        placed = submit(api, "b", *[member("block", 3, max_hops=4) for _ in range(3)])
        leases = ex.wait_leases(3)
        assert leased_jobs(ex) == set(placed)
        assert {lease.node for lease in leases} == {"e1-n0", "e1-n2", "e1-n3"}


def role_member(gang_id: str, role: str, minimum: int, size: int, role_max_hops: int | None = None):
    """A member of a pod group of ``size`` members, needing a whole node."""
    annotations = {
        ann.GANG_ID: gang_id,
        ann.GANG_CARDINALITY: str(size),
        ann.GANG_ROLE: role,
        ann.GANG_ROLE_MINIMUM: str(minimum),
    }
    if role_max_hops is not None:
        annotations[ann.GANG_ROLE_MAX_HOPS] = str(role_max_hops)
    return item({"containers": [container(cpu="4", memory="4Gi")]}, annotations=annotations)


def test_a_role_keeps_within_its_own_maximum_hops(tmp_path: Path, database_url: str) -> None:
    """gangRoleMaxHops reaches the scheduler: the two workers share rack r1 (n0, n3) and the
    coordinator goes beside them in block b1 (n2); no rack holds three workers."""
    with serving(tmp_path, LEVELS, database_url=database_url) as (_, api, _path):
        ex = Executor(api.channel, nodes=4, cpu="4", memory="8Gi")
        fat_tree(ex)
        short = [role_member("short", "worker", 3, 3, role_max_hops=2) for _ in range(3)]
        waiting = submit(api, "b", *short)
        wait_reasons(api, waiting, reasons.role_hops("short", "worker", 3, 2, "topology/rack"))
        ids = submit(
            api,
            "a",
            role_member("pg", "coordinator", 1, 3),
            *[role_member("pg", "worker", 2, 3, role_max_hops=2) for _ in range(2)],
        )
        leases = {lease.job.id: lease.node for lease in ex.wait_leases(3)}
        assert leases == {ids[0]: "e1-n2", ids[1]: "e1-n0", ids[2]: "e1-n3"}
