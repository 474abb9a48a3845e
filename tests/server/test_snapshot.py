"""From stored state to the scheduler's snapshot: placement by executor capabilities, and
node avoidance of retries that cannot strand a job."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from armada_core import scheduling as s
from armada_core.api import executor_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.jobs import annotations as ann
from armada_server.config import PriorityClassConfig
from armada_server.scheduling import snapshot
from armada_server.scheduling.running_views import RunningViews
from armada_server.scheduling.snapshot import Made, NodeViews, build_snapshot
from armada_server.storage import Storage
from armada_server.storage.database import open_database
from armada_server.storage.scheduling_reads import (
    ExecutorNodes,
    QueuedJob,
    RunningJob,
    SchedulingState,
)

NOW = datetime(2026, 11, 24, tzinfo=UTC)
CLASSES = (PriorityClassConfig("default", 0, preemptible=False),)


def node(name: str) -> executor_pb2.Node:
    return executor_pb2.Node(name=name, allocatable={"cpu": "4", "memory": "8Gi"})


def queued(
    job_id: str,
    *,
    volume: bool = False,
    zone: str | None = None,
    avoid: str | None = None,
    pool: str | None = None,
) -> QueuedJob:
    pod = core_v1_pb2.PodSpec(
        priorityClassName="default",
        containers=[core_v1_pb2.Container(name="main", image="busybox")],
    )
    if volume:
        pod.volumes.add(name="data").volumeSource.emptyDir.SetInParent()
    if zone:
        pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.add().matchExpressions.add(
            key="zone", operator="In", values=[zone]
        )
    spec = submit_pb2.Job(id=job_id, queue="q", job_set_id="s", pod_specs=[pod])
    if pool:
        spec.annotations["armadaproject.io/pool"] = pool
    spec.scheduling_resource_requirements.requests["cpu"].string = "1"
    return QueuedJob(
        id=job_id,
        queue="q",
        priority=0,
        submitted_at=NOW,
        raw=spec.SerializeToString(),
        avoid_node=avoid,
    )


def placements(executors: list[ExecutorNodes], jobs: list[QueuedJob]) -> dict[str, str]:
    state = SchedulingState(
        queues=[submit_pb2.Queue(name="q", priority_factor=1)],
        executors=executors,
        queued=jobs,
        running=[],
    )
    snapshot, _ = build_snapshot(state, CLASSES, NOW)
    return dict(s.schedule(snapshot).scheduled)


LOCAL = ("volumes", "containers.livenessProbe")


@pytest.mark.parametrize(
    ("job", "allowed"),
    [
        (queued("plain"), {"local", "k8s"}),
        (queued("volume", volume=True), {"k8s"}),
        (queued("volume-zone", volume=True, zone="a"), {"k8s"}),
    ],
)
def test_a_job_goes_only_where_its_spec_is_honoured(job: QueuedJob, allowed: set[str]) -> None:
    for first in ("local", "k8s"):  # whichever executor the scheduler would try first
        executors = [
            ExecutorNodes("local", "default", [node("l1")], LOCAL),
            ExecutorNodes("k8s", "default", [node("k1")], ()),
        ]
        for e in executors:
            for n in e.nodes:
                n.labels["zone"] = "a"
        executors.sort(key=lambda e: e.id != first)
        placed = placements(executors, [job]).get(job.id)
        assert placed is not None and placed.split("/")[0] in allowed


def test_one_kind_of_executor_leaves_snapshots_as_they_were() -> None:
    executors = [
        ExecutorNodes("a", "default", [node("a1")], LOCAL),
        ExecutorNodes("b", "default", [node("b1")], LOCAL),
    ]
    state = SchedulingState(
        queues=[submit_pb2.Queue(name="q", priority_factor=1)],
        executors=executors,
        queued=[queued("v", volume=True)],
        running=[],
    )
    snapshot, _ = build_snapshot(state, CLASSES, NOW)
    assert all("armadaproject.io/capabilities" not in n.labels for n in snapshot.nodes)
    assert snapshot.jobs[0].affinity == ()


def test_jobs_an_executor_cannot_honour_wait_rather_than_run_there() -> None:
    executors = [
        ExecutorNodes("local", "default", [node("l1")], LOCAL),
        ExecutorNodes("k8s", "default", [node("k1")], ()),
    ]
    jobs = [queued(f"v{i}", volume=True) for i in range(6)] + [queued("p")]
    placed = placements(executors, jobs)
    placed = {job: nid.split("/")[0] for job, nid in placed.items()}
    volume_jobs = {job: where for job, where in placed.items() if job != "p"}
    assert set(volume_jobs.values()) == {"k8s"}  # none spills over to the local executor
    assert len(volume_jobs) + (placed.get("p") == "k8s") == 4  # k1 is full; l1 takes none
    assert "p" in placed


@pytest.mark.parametrize(
    ("nodes", "avoid", "pool", "expected"),
    [
        ({"default": ["n1", "n2"]}, "e-default/n1", None, "e-default/n2"),
        ({"default": ["n1", "n2"]}, "e-default/n2", None, "e-default/n1"),
        ({"default": ["n1"]}, "e-default/n1", None, "e-default/n1"),  # the only node: not avoided
        ({"default": ["n1"], "gpu": ["g1"]}, "e-gpu/g1", "gpu", "e-gpu/g1"),  # its pool's only one
        ({"default": ["n1"], "gpu": ["g1"]}, "e-default/n1", None, "e-gpu/g1"),
    ],
)
def test_a_retry_avoids_its_node_unless_it_is_the_only_one(nodes, avoid, pool, expected) -> None:
    executors = [ExecutorNodes(f"e-{p}", p, [node(n) for n in names]) for p, names in nodes.items()]
    assert placements(executors, [queued("j", avoid=avoid, pool=pool)]) == {"j": expected}


def test_views_kept_from_the_previous_cycle_equal_views_built_afresh() -> None:
    """A job that moved (queued -> running, reprioritised, now avoiding a node) is taken from
    the previous cycle's view, not converted again: it must be the view a new leader, with
    no cache, builds from the same rows, its shape included."""
    executors = [ExecutorNodes("e", "default", [node("n1"), node("n2")])]
    queues = [submit_pb2.Queue(name="q", priority_factor=1)]
    a, b = queued("a"), queued("b")
    cache: dict[str, Made] = {}
    first = SchedulingState(queues=queues, executors=executors, queued=[a, b], running=[])
    before, _ = build_snapshot(first, CLASSES, NOW, cache=cache)
    later = datetime(2026, 11, 24, 0, 5, tzinfo=UTC)
    running = RunningJob(
        id="a", queue="q", priority=3, submitted_at=NOW, raw=a.raw, node="e/n1", started_at=later
    )
    moved = dataclasses.replace(b, priority=7, avoid_node="e/n2")
    second = SchedulingState(queues=queues, executors=executors, queued=[moved], running=[running])
    kept, _ = build_snapshot(second, CLASSES, NOW, cache=cache)
    afresh, _ = build_snapshot(second, CLASSES, NOW)
    assert kept.jobs == afresh.jobs
    assert [j.shape_id for j in kept.jobs] == [j.shape_id for j in afresh.jobs]
    assert [j.kind_id for j in kept.jobs] == [j.kind_id for j in afresh.jobs]
    # A moved view has a serial of its own: the scheduler keeps what it read of a job by its
    # serial (armada_core's fast/job_columns.py), so a copied one would give it the old job.
    assert not {j.serial for j in kept.jobs} & {j.serial for j in before.jobs}
    assert {j.id: (j.node, j.avoid_node, j.priority) for j in kept.jobs} == {
        "a": ("e/n1", None, 3),
        "b": (None, "e/n2", 7),
    }


def test_node_views_kept_from_the_previous_cycle_follow_every_change_of_a_node() -> None:
    """A node's view is reused while the node is reported the same; a node whose capacity,
    labels or cordon changed, or whose executor's capabilities now differ from another's, is
    viewed afresh, and a node no longer reported is let go."""
    queues = [submit_pb2.Queue(name="q", priority_factor=1)]
    views: NodeViews = {}

    def snapshot(executors: list[ExecutorNodes]) -> tuple[s.Snapshot, s.Snapshot]:
        state = SchedulingState(queues=queues, executors=executors, queued=[], running=[])
        kept, _ = build_snapshot(state, CLASSES, NOW, nodes_cache=views)
        return kept, build_snapshot(state, CLASSES, NOW)[0]

    first = [ExecutorNodes("e", "default", [node("n1"), node("n2"), node("n3")])]
    kept, afresh = snapshot(first)
    assert kept.nodes == afresh.nodes and len(views["e"].by_node) == 3
    n1, n2, n3 = kept.nodes
    bigger = node("n2")
    bigger.allocatable["cpu"] = "8"
    cordoned = node("n3")
    cordoned.unschedulable = True
    second = [ExecutorNodes("e", "default", [node("n1"), bigger, cordoned])]
    kept, afresh = snapshot(second)
    assert kept.nodes == afresh.nodes
    assert kept.nodes[0] is n1  # reported the same: reused
    assert kept.nodes[1].capacity != n2.capacity and kept.nodes[2].cordoned and not n3.cordoned
    third = [*second, ExecutorNodes("k", "default", [node("k1")], LOCAL)]
    kept, afresh = snapshot(third)
    assert kept.nodes == afresh.nodes
    assert kept.nodes[0] is not n1  # its executor's capability class is now a label
    kept, afresh = snapshot([ExecutorNodes("e", "default", [node("n1")])])
    assert kept.nodes == afresh.nodes and list(views) == ["e"]
    assert len(views["e"].nodes) == len(views["e"].by_node) == 1


def test_an_executors_node_views_are_kept_while_its_stored_nodes_and_cordons_are(
    database_url: str,
) -> None:
    """Read from storage, an executor's nodes are decoded, and viewed, once while it reports
    the same nodes with the same cordons: reused whole across cycles. A cordon, or a node
    reported otherwise, makes them again (the other nodes' views reused), and a cordon never
    changes the nodes kept for later reads."""
    storage = Storage(open_database(database_url), clock=lambda: NOW)
    views: NodeViews = {}

    def sync(*nodes: executor_pb2.Node) -> None:
        storage.executors.executor_sync(
            executor_pb2.SyncRequest(executor_id="e", pool="default", nodes=nodes), now=NOW
        )

    def cycle() -> tuple[list[executor_pb2.Node], list[s.Node]]:
        state = storage.scheduling_reads.scheduling_state(executor_timeout=60, now=NOW)
        kept, _ = build_snapshot(state, CLASSES, NOW, nodes_cache=views)
        afresh, _ = build_snapshot(state, CLASSES, NOW)
        assert kept.nodes == afresh.nodes
        [executor] = state.executors
        return executor.nodes, list(kept.nodes)

    sync(node("n1"), node("n2"))
    decoded, first = cycle()
    viewed = views["e"]
    again, second = cycle()
    assert again is decoded and views["e"] is viewed  # nothing made again
    assert all(a is b for a, b in zip(first, second, strict=True))
    storage.nodes.set_node_cordon("e", "n2", True)
    marked, cordoned = cycle()
    assert [n.unschedulable for n in marked] == [False, True]
    assert cordoned[0] is first[0] and cordoned[1].cordoned and not first[1].cordoned
    storage.nodes.set_node_cordon("e", "n2", False)
    unmarked, uncordoned = cycle()
    assert unmarked is decoded and not any(n.unschedulable for n in decoded)
    assert uncordoned[0] is first[0] and not uncordoned[1].cordoned
    bigger = node("n2")
    bigger.allocatable["cpu"] = "8"
    sync(node("n1"), bigger)
    changed, grown = cycle()
    assert changed is not decoded and grown[0] is first[0]
    assert grown[1].capacity != first[1].capacity
    storage.engine.dispose()


def test_a_row_holds_its_view_only_where_the_view_is_the_rows_alone() -> None:
    """A plain queued row keeps the view made of it for the next cycle; a retry's view also
    depends on the nodes (it avoids its node only while another could take it), so each
    cycle makes it again."""
    queues = [submit_pb2.Queue(name="q", priority_factor=1)]
    plain, retry = queued("p"), queued("r", avoid="e/n1")
    cache: dict[str, Made] = {}

    def views(names: list[str]) -> dict[str, s.Job]:
        executors = [ExecutorNodes("e", "default", [node(n) for n in names])]
        state = SchedulingState(
            queues=queues, executors=executors, queued=[plain, retry], running=[]
        )
        snapshot, _ = build_snapshot(state, CLASSES, NOW, cache=cache, changed=[])
        afresh, _ = build_snapshot(state, CLASSES, NOW)
        assert snapshot.jobs == afresh.jobs
        return {j.id: j for j in snapshot.jobs}

    first = views(["n1", "n2"])
    assert first["r"].avoid_node == "e/n1" and plain.view is first["p"]
    assert retry.view is None
    # n2 is gone: the retry's node is the only one, so it no longer avoids it.
    assert views(["n1"])["r"].avoid_node is None
    assert views(["n1"])["p"] is first["p"]


def test_views_of_jobs_sharing_a_spec_equal_views_made_each_on_its_own() -> None:
    """Jobs submitted together share their spec, and a view is copied from another of the
    same spec (a template) rather than made through Job's constructor: each copy must be the
    view made for that job alone, with its own id, priority, times, node and charge."""
    queues = [submit_pb2.Queue(name="q", priority_factor=1)]
    executors = [ExecutorNodes("e", "default", [node("n1"), node("n2")])]
    later = datetime(2026, 11, 24, 0, 5, tzinfo=UTC)
    waiting = [
        dataclasses.replace(queued("t0"), priority=2),
        dataclasses.replace(queued("t1"), submitted_at=later),
        queued("t2", avoid="e/n2"),
    ]
    running = [
        RunningJob(
            id=f"r{i}",
            queue="q",
            priority=i,
            submitted_at=NOW,
            raw=queued(f"r{i}").raw,
            node=f"e/n{i + 1}",
            started_at=later,
            excess_flow=5 * i,
        )
        for i in range(2)
    ]

    def made(queued: list[QueuedJob], running: list[RunningJob]) -> list[s.Job]:
        state = SchedulingState(queues=queues, executors=executors, queued=queued, running=running)
        return list(build_snapshot(state, CLASSES, NOW)[0].jobs)

    def alone(row: QueuedJob | RunningJob) -> s.Job:
        snapshot._TEMPLATES.clear()  # made through the constructor
        if isinstance(row, QueuedJob):
            [view] = made([dataclasses.replace(row)], [])  # a row holding no view
        else:
            [view] = made([], [dataclasses.replace(row)])
        return view

    together = {j.id: j for j in made(waiting, running)}
    copied = {
        j.id: j
        for j in made(
            [dataclasses.replace(r) for r in waiting], [dataclasses.replace(r) for r in running]
        )
    }
    rows: list[QueuedJob | RunningJob] = [*waiting, *running]
    for row in rows:
        view = alone(row)
        for got in (together[row.id], copied[row.id]):
            assert got == view, row.id
            assert (got.shape_id, got.kind_id) == (view.shape_id, view.kind_id), row.id
    assert copied["r1"].excess_flow == 5 and copied["t2"].avoid_node == "e/n2"
    assert copied["t1"].submit_time == later.timestamp() and copied["t0"].priority == 2
    views = [*together.values(), *copied.values()]
    assert len({j.serial for j in views}) == len(views)


def test_running_views_patched_by_what_changed_equal_views_built_afresh() -> None:
    """The leader patches last cycle's views of the running jobs with the jobs that changed
    (RunningViews): over cycles where jobs start, move, end and are renewed, where a node
    vanishes and comes back and a job cannot be read, every cycle's snapshot is the one
    built from nothing."""
    import random

    rng = random.Random(7)
    queues = [submit_pb2.Queue(name="q", priority_factor=1)]
    held: dict[str, RunningJob] = {}  # as HeldJobs holds them: in order of id
    cache: dict[str, Made] = {}
    kept = RunningViews()
    nodes_cache: NodeViews = {}
    patched = grouped = 0

    def spec(job_id: str) -> bytes:
        """A job's spec, the same each time: some cannot be read, some are members of one
        of a few pod groups (their roles, of the members in the snapshot, change)."""
        number = int(job_id[1:])
        if number % 37 == 0:
            return b"\xff"
        job = submit_pb2.Job.FromString(queued(job_id).raw)
        if number % 5 == 0:
            job.annotations.update(
                {
                    ann.GANG_ID: f"pg{number % 3}",
                    ann.GANG_CARDINALITY: "4",
                    ann.GANG_ROLE: f"role{number % 4}",
                    ann.GANG_ROLE_MINIMUM: "1",
                }
            )
        return job.SerializeToString()

    def row(job_id: str) -> RunningJob:
        return RunningJob(
            id=job_id,
            queue="q",
            priority=rng.randrange(3),
            submitted_at=NOW,
            raw=spec(job_id),
            node=f"e/n{rng.randrange(7)}",  # n6: a node no executor has
            started_at=NOW if rng.random() < 0.5 else None,
            excess_flow=rng.randrange(2),
        )

    failed: list[str] = []  # broken jobs the last cycle failed: they leave
    for cycle in range(60):
        changed, failed = failed, []
        for job_id in changed:
            del held[job_id]
        if cycle:
            ids = list(held)
            many = cycle % 20 == 10  # a cycle that changes more than a few in place
            for job_id in rng.sample(ids, min(len(ids), 50 if many else rng.randrange(4))):
                del held[job_id]  # ended
                changed.append(job_id)
            for job_id in rng.sample(list(held), min(len(held), rng.randrange(4))):
                held[job_id] = row(job_id)  # renewed: moved, started, charged again
                changed.append(job_id)
            changed += [f"queued{cycle}-{i}" for i in range(rng.randrange(3))]
        for _ in range(30 if not cycle else 150 if many else rng.randrange(6)):
            job_id = f"j{rng.randrange(10_000):05d}"
            if job_id not in held:
                held[job_id] = row(job_id)
                changed.append(job_id)
        held = dict(sorted(held.items()))
        names = [f"n{i}" for i in range(6) if not (cycle % 7 == 3 and i == 2)]
        executors = [ExecutorNodes("e", "default", [node(n) for n in names])]
        state = SchedulingState(
            queues=queues, executors=executors, queued=[], running=list(held.values())
        )
        kept_before = kept.nodes is not None
        marks = (cycle - 1 if cycle else None, cycle)  # HeldJobs' since and mark
        incremental, _ = build_snapshot(
            dataclasses.replace(state, running_by_id=held, held_marks=marks),
            CLASSES,
            NOW,
            cache=cache,
            changed=changed if cycle else None,
            nodes_cache=nodes_cache,
            running_cache=kept,
            broken=(broken := {}),
        )
        patched += kept_before
        failed = sorted(broken)
        afresh_rows = [dataclasses.replace(j) for j in held.values()]
        afresh, _ = build_snapshot(
            dataclasses.replace(state, running=afresh_rows), CLASSES, NOW, broken=(whole := {})
        )
        assert incremental.jobs == afresh.jobs, cycle
        assert incremental.serials is not None and incremental.serials.jobs is incremental.jobs
        assert incremental.serials.serials.tolist() == [j.serial for j in incremental.jobs]
        grouped += sum(1 for j in incremental.jobs if len(j.gang_roles) > 1)
        assert broken.keys() <= whole.keys(), cycle  # a broken job is reported once at least
    assert patched > 30  # most cycles patched what was kept
    assert grouped  # pod groups' members carried their groups' roles
