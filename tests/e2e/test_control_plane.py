"""The control plane under concurrent writers, crashes and remote executors.

The cluster is what an operator runs at scale: server replicas with `--executor none` on one
database (PostgreSQL; the storm also on SQLite with its single server), an `armada-executor
--kind local` in pool `local` (real processes, for what only processes can tell) and an
`armada-executor --kind simulated` in pool `sim` (scheduling volume), queues created through
the API. Clients hammer every replica at once; components are SIGKILLed under that load.

Nothing is judged by timings. The invariants come from the job sets' event logs
(GetJobSetEvents), the run details (GetJobDetails), the replicas' logs and, for the local
executor, from the jobs' own records of when their processes started and ended.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, gang_items, job_item
from armada_core.client.errors import ArmadaError, DeadlineExceeded, Unavailable

from .processes import Process, kill_leftovers, wait_until
from .topology import (
    GRACE_SECONDS,
    Topology,
    canary,
    close_open,
    event_violations,
    in_pool,
    job_details,
    live_pods,
    overlapping_runs,
    peak_cpu,
    read_histories,
    read_records,
    recorded_spec,
    run_violations,
    settle,
    simulated_spec,
    stuck,
    timeline,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LOCAL, SIM = "local", "sim"  # the pools
QUEUES = ("alpha", "beta")
LEASE_TIMEOUT = 4
SETTINGS = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": LEASE_TIMEOUT}
CYCLE_FAILED = "scheduling cycle failed"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Callable[..., Topology]]:
    """Builds the cluster: two replicas on PostgreSQL (one on SQLite), the executors, the
    queues. Stops every process at the end, and kills whatever pods they left behind."""
    started: list[Process] = []
    topologies: list[Topology] = []

    def start(name: str, *argv: str) -> Process:
        process = Process(name, list(argv), tmp_path)
        started.append(process)
        return process

    def build(
        database_url: str,
        *,
        simulated: bool = True,
        local_nodes: str = "2x4x8Gi",
        **settings: object,
    ) -> Topology:
        topology = Topology(start, tmp_path, database_url, **{**SETTINGS, **settings})
        topologies.append(topology)
        topology.add_replica("a")
        if not database_url.startswith("sqlite"):
            topology.leader()  # the first replica leads: a known starting point
            topology.add_replica("b")
        topology.add_executor("e-local", "local", LOCAL, local_nodes)
        if simulated:
            topology.add_executor("e-sim", "simulated", SIM, "4x4x16Gi")
        with topology.client() as client:
            for queue in QUEUES:
                client.create_queue(submit_pb2.Queue(name=queue, priority_factor=1))
        return topology

    yield build
    for topology in topologies:
        topology.close()
    for process in reversed(started):
        process.stop()
    for sandbox in tmp_path.glob("*-pods"):
        kill_leftovers(str(sandbox))


# --- the storm ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    pairs: int  # submit-then-cancel pairs, spread over the replicas
    sets: int  # job sets per replica, cancelled whole
    batches: int  # batches of work per replica, reprioritized, preempted, cancelled


FULL = Size(pairs=200, sets=6, batches=8)
UNDER_FAULT = Size(pairs=100, sets=4, batches=6)


@dataclass
class Storm:
    """Concurrent clients against every replica: what they were told is the evidence."""

    topology: Topology
    record: Path
    size: Size
    seed: int = 14
    job_sets: set[tuple[str, str]] = field(default_factory=set)
    submitted: dict[str, str] = field(default_factory=dict)  # job id -> pool
    acked_cancels: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    halfway: threading.Event = field(default_factory=threading.Event)
    pairs_done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    # plumbing

    def clients(self) -> list[ArmadaClient]:
        return [ArmadaClient(r.address, timeout=30) for r in self.topology.replicas.values()]

    def call(
        self,
        clients: list[ArmadaClient],
        prefer: int,
        what: str,
        fn: Callable[[ArmadaClient], object],
    ) -> object:
        """`fn` on the preferred replica; on another when that one is gone (a call that may
        have been applied is only retried when it is idempotent: submissions carry client
        ids, and a repeated cancel or preempt changes nothing)."""
        order = [clients[(prefer + i) % len(clients)] for i in range(len(clients))]
        failures = []
        for client in order:
            try:
                return fn(client)
            except (Unavailable, DeadlineExceeded) as e:
                failures.append(f"{client.config.address}: {e.code.name}")
        with self.lock:
            self.errors.append(f"{what}: no replica answered ({'; '.join(failures)})")
        return None

    def item(
        self, rng: random.Random, key: str, pool: str | None = None, seconds: float | None = None
    ) -> tuple[submit_pb2.JobSubmitRequestItem, str]:
        pool = pool or rng.choice((LOCAL, SIM))
        seconds = seconds if seconds is not None else rng.choice((0.3, 0.6, 1.0))
        pc = rng.choice(("armada-default", "armada-preemptible"))
        if pool == LOCAL:
            spec, annotations = recorded_spec(self.record, seconds), {}
        else:
            spec, annotations = simulated_spec(seconds)
        return job_item(
            spec, client_id=key, priority_class=pc, annotations=in_pool(pool, annotations)
        ), pool

    def submit(
        self,
        clients: list[ArmadaClient],
        prefer: int,
        queue: str,
        job_set: str,
        items: list[submit_pb2.JobSubmitRequestItem],
        pools: list[str],
    ) -> list[str]:
        with self.lock:
            self.job_sets.add((queue, job_set))
        ids = self.call(
            clients,
            prefer,
            f"submit to {queue}/{job_set}",
            lambda c: c.submit_jobs(queue, job_set, items),
        )
        if not isinstance(ids, list):
            return []
        with self.lock:
            self.submitted.update(zip(ids, pools, strict=True))
        return ids

    def cancel(
        self, clients: list[ArmadaClient], prefer: int, queue: str, job_set: str, ids: list[str]
    ) -> None:
        done = self.call(
            clients,
            prefer,
            f"cancel {ids}",
            lambda c: c.cancel_jobs(queue, job_set, ids, reason="storm"),
        )
        if isinstance(done, list):
            with self.lock:
                self.acked_cancels.update(done)

    # the load

    def pairs(self, worker: int, count: int, replicas: int) -> None:
        """Submit one job through one replica, cancel it through the other right away."""
        rng = random.Random(self.seed * 1000 + worker)
        clients = self.clients()
        queue = QUEUES[worker % 2]
        job_set = f"pairs-{worker}"
        try:
            for i in range(count):
                via = (worker + i) % replicas
                item, pool = self.item(rng, f"pair-{worker}-{i}")
                ids = self.submit(clients, via, queue, job_set, [item], [pool])
                time.sleep(rng.choice((0, 0, 0, 0.01, 0.03, 0.1, 0.2, 0.4)))
                if ids:
                    self.cancel(clients, via + 1, queue, job_set, ids)
                with self.lock:
                    self.pairs_done += 1
                    if self.pairs_done * 2 >= self.size.pairs:
                        self.halfway.set()
        finally:
            for client in clients:
                client.close()

    def sets(self, worker: int, replicas: int) -> None:
        """Job sets with single jobs and a gang, cancelled whole (or only what runs)."""
        rng = random.Random(self.seed * 2000 + worker)
        clients = self.clients()
        try:
            for k in range(self.size.sets):
                queue, job_set = QUEUES[k % 2], f"set-{worker}-{k}"
                pool = rng.choice((LOCAL, SIM))
                items, pools = [], []
                for j in range(4):
                    item, p = self.item(rng, f"{job_set}-{j}", pool)
                    items.append(item)
                    pools.append(p)
                gang_pool = rng.choice((LOCAL, SIM))
                spec, annotations = (
                    (recorded_spec(self.record, 0.6), {})
                    if gang_pool == LOCAL
                    else simulated_spec(0.6)
                )
                gang = gang_items(
                    spec,
                    replicas=3,
                    client_id=f"{job_set}-gang",
                    annotations=in_pool(gang_pool, annotations),
                )
                self.submit(
                    clients, worker + k, queue, job_set, items + gang, pools + [gang_pool] * 3
                )
                time.sleep(rng.uniform(0, 1.2))
                states = ("pending", "running") if k % 3 == 2 else ()
                self.call(
                    clients,
                    worker + k + 1,
                    f"cancel job set {job_set}",
                    lambda c, q=queue, s=job_set, st=states: c.cancel_job_set(
                        q, s, states=st, reason="storm"
                    ),
                )
        finally:
            for client in clients:
                client.close()

    def work(self, worker: int, replicas: int) -> None:
        """Jobs that run, reprioritized, preempted and cancelled while they do."""
        rng = random.Random(self.seed * 3000 + worker)
        clients = self.clients()
        queue, job_set = QUEUES[worker % 2], f"work-{worker}"
        mine: list[str] = []
        try:
            for b in range(self.size.batches):
                items, pools = [], []
                for j in range(4):
                    item, pool = self.item(
                        rng, f"{job_set}-{b}-{j}", seconds=rng.choice((0.5, 1.0, 2.0))
                    )
                    items.append(item)
                    pools.append(pool)
                gang_pool = rng.choice((LOCAL, SIM))
                spec, annotations = (
                    (recorded_spec(self.record, 1.0), {})
                    if gang_pool == LOCAL
                    else simulated_spec(1.0)
                )
                items += gang_items(
                    spec,
                    replicas=2,
                    client_id=f"{job_set}-{b}-gang",
                    annotations=in_pool(gang_pool, annotations),
                )
                mine += self.submit(
                    clients, worker + b, queue, job_set, items, pools + [gang_pool] * 2
                )
                time.sleep(rng.uniform(0.1, 0.5))
                if not mine:
                    continue
                other = worker + b + 1
                chosen = rng.sample(mine, min(3, len(mine)))
                self.call(
                    clients,
                    other,
                    f"reprioritize {chosen[0]}",
                    lambda c, j=chosen[0]: c.reprioritize_jobs(
                        queue, job_set, rng.choice((0, 1, 5)), [j]
                    ),
                )
                self.call(
                    clients,
                    other + 1,
                    f"preempt {chosen[-1]}",
                    lambda c, j=chosen[-1]: c.preempt_jobs(queue, job_set, [j], reason="storm"),
                )
                self.cancel(clients, other, queue, job_set, [chosen[len(chosen) // 2]])
        finally:
            for client in clients:
                client.close()

    def run(self, fault: Callable[[], None] | None = None) -> None:
        replicas = len(self.topology.replicas)
        per_worker = self.size.pairs // 4
        threads = [
            threading.Thread(target=self.pairs, args=(w, per_worker, replicas)) for w in range(4)
        ]
        threads += [threading.Thread(target=self.sets, args=(w, replicas)) for w in range(replicas)]
        threads += [threading.Thread(target=self.work, args=(w, replicas)) for w in range(replicas)]
        failures: list[BaseException] = []

        def guarded(target: Callable[[], None]) -> Callable[[], None]:
            def go() -> None:
                try:
                    target()
                except BaseException as e:  # reported by the test, not lost in a thread
                    failures.append(e)

            return go

        for t in threads:
            t.run = guarded(t.run)  # type: ignore[method-assign]
            t.start()
        if fault is not None:
            self.halfway.wait(300)
            fault()
        for t in threads:
            t.join(600)
        if failures:
            raise failures[0]


def _phase_at_cancel(events: list) -> str:
    """What the job was doing when it was cancelled, from its events."""
    phase = "queued"
    for e in events:
        if e.kind == "cancelled":
            return phase
        if e.kind in ("leased", "pending", "running"):
            phase = e.kind
        elif e.kind in ("queued", "failed"):
            phase = "queued"
    return phase


def check(topology: Topology, storm: Storm, record: Path, *, expect_all: str | None = None) -> None:
    """Every invariant over everything the storm submitted; one assertion with all the
    evidence."""
    with topology.client(timeout=60) as client:
        histories = read_histories(client, storm.job_sets)
    jobs = sorted(set(histories) | set(storm.submitted))
    unsettled = settle(topology, jobs)
    with topology.client(timeout=60) as client:
        histories = read_histories(client, storm.job_sets)
        details = job_details(client, jobs)
    violations = [
        f"{job}: acknowledged at submission, but no events"
        for job in storm.submitted
        if job not in histories
    ]
    violations += stuck(topology, unsettled, histories)
    violations += event_violations(histories, storm.acked_cancels)
    violations += run_violations(details, histories)
    violations += [
        f"{name}: {line}"
        for name, lines in topology.log_lines(CYCLE_FAILED).items()
        for line in lines[:3]
    ]
    if expect_all:
        violations += [
            f"{job} ended {h.final}, expected {expect_all}: {h.story()}"
            for job, h in sorted(histories.items())
            if h.final != expect_all
        ]

    # The local executor's processes: none left once everything has ended, none run twice.
    local = topology.executors.get("e-local")
    if local is not None:
        deadline = time.monotonic() + GRACE_SECONDS + 20
        while live_pods(local.sandbox) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid, (job, run) in sorted(live_pods(local.sandbox).items()):
            story = histories[job].story() if job in histories else "(no events)"
            violations.append(
                f"pid {pid} of job {job} run {run[-12:]} still alive after every job ended: {story}"
            )
    lifetimes, anomalies = read_records(record)
    violations += anomalies
    notes = close_open(lifetimes, topology.watch)
    violations += [
        f"{line}: {histories[job].story() if job in histories else '(no events)'}"
        for job, line in overlapping_runs(lifetimes)
    ]

    # Scheduling goes on: a job submitted now runs, in each pool.
    with topology.client(timeout=60) as client:
        for pool in sorted({e.pool for e in topology.executors.values()}):
            spec, annotations = (
                (recorded_spec(record, 0.1), {}) if pool == LOCAL else simulated_spec(0.1)
            )
            try:
                outcome = canary(client, QUEUES[0], pool, spec, annotations, timeout=120)
            except ArmadaError as e:
                outcome = f"canary in pool {pool}: {e}"
            if outcome:
                violations.append(outcome)

    finals = Counter(h.final for h in histories.values())
    summary = (
        f"{len(histories)} jobs ({dict(sorted(finals.items()))}), "
        f"{len(storm.acked_cancels)} acknowledged cancels, "
        f"{len(storm.errors)} unanswered calls {storm.errors[:3]}"
    )
    phases = Counter(
        _phase_at_cancel(h.events)
        for h in histories.values()
        if any(e.kind == "cancelled" for e in h.events)
    )
    summary += (
        f"; cancelled while {dict(sorted(phases.items()))}; {len(lifetimes)} "
        f"processes, {len(notes)} without an end record"
    )
    print(summary)  # shown with -s or -rP: what the load amounted to
    assert not violations, (
        f"{len(violations)} violations; {summary}\n"
        + "\n".join(violations[:40])
        + "\ncomponents' logs:\n"
        + topology.problems()
    )


# --- 1. the storm ---------------------------------------------------------------------------


def test_a_storm_of_writers_on_every_replica_keeps_every_invariant(
    cluster: Callable[..., Topology], tmp_path: Path, database_url: str
) -> None:
    """Submit, cancel right after submitting, cancel job sets, reprioritize and preempt, on
    both replicas at once (on SQLite, its one server), while jobs are scheduled and run."""
    topology = cluster(database_url)
    record = tmp_path / "records.log"
    storm = Storm(topology, record, FULL)
    storm.run()
    check(topology, storm, record)


# --- 2. SIGKILL under load ------------------------------------------------------------------


def kill_follower(topology: Topology) -> None:
    leader = topology.leader()
    [follower] = [r for r in topology.alive() if r is not leader]
    follower.process.kill()


def kill_leader(topology: Topology) -> None:
    leader = topology.leader()
    leader.process.kill()
    topology.leader()  # the other replica takes over (or the assertion says it did not)


def kill_local_executor(topology: Topology) -> None:
    topology.executors["e-local"].process.kill()  # its pods are orphaned, still running
    time.sleep(1)  # back well within the lease timeout: the server still leases it its runs
    topology.restart_executor("e-local")


@pytest.mark.postgres
@pytest.mark.parametrize(
    "fault",
    [kill_follower, kill_leader, kill_local_executor],
    ids=["follower", "leader", "executor"],
)
def test_a_component_killed_under_the_storm_breaks_no_invariant(
    cluster: Callable[..., Topology],
    tmp_path: Path,
    postgres_server,
    fault: Callable[[Topology], None],
) -> None:
    topology = cluster(postgres_server.new_database())
    record = tmp_path / "records.log"
    storm = Storm(topology, record, UNDER_FAULT)
    storm.run(fault=lambda: fault(topology))
    check(topology, storm, record)


# --- 3. an executor restarted under running jobs -------------------------------------------

RUNNING_JOBS = 50
JOB_SECONDS = 15


@pytest.mark.postgres
@pytest.mark.parametrize("late", [False, True], ids=["at-once", "after-lease-expiry"])
def test_an_executor_restarted_under_running_jobs_never_runs_a_job_twice(
    cluster: Callable[..., Topology], tmp_path: Path, postgres_server, late: bool
) -> None:
    """SIGKILL the local executor while 50 jobs run, start it again (at once, while the server
    still leases it the runs; or once those leases have expired and the jobs wait for another
    run): from the processes' own records, no job is ever running twice at any moment."""
    # Two nodes: a run whose lease expired is retried away from its node.
    topology = cluster(postgres_server.new_database(), simulated=False, local_nodes="2x8x8Gi")
    record = tmp_path / "records.log"
    storm = Storm(topology, record, FULL)  # only its bookkeeping and checks are used
    queue, job_set = QUEUES[0], "restart"
    storm.job_sets.add((queue, job_set))
    with topology.client() as client:
        items = [
            job_item(
                recorded_spec(record, JOB_SECONDS),
                client_id=f"long-{i}",
                annotations=in_pool(LOCAL),
            )
            for i in range(RUNNING_JOBS)
        ]
        jobs = client.submit_jobs(queue, job_set, items)
        storm.submitted.update(dict.fromkeys(jobs, LOCAL))
        wait_until(
            lambda: (
                Counter(client.get_job_status(jobs).values())[submit_pb2.RUNNING] == RUNNING_JOBS
            ),
            120,
            f"{RUNNING_JOBS} jobs to run",
        )
        wait_until(
            lambda: len(read_records(record)[0]) >= RUNNING_JOBS,
            30,
            "every job's process to record its start",
        )
        topology.executors["e-local"].process.kill()
        if late:
            # The server gives up on the runs; the jobs wait, queued, for the executor.
            wait_until(
                lambda: Counter(client.get_job_status(jobs).values())[submit_pb2.RUNNING] == 0,
                60,
                "the runs' leases to expire",
            )
        topology.restart_executor("e-local")
    check(topology, storm, record, expect_all="SUCCEEDED")


# --- 4. capacity across preemption ----------------------------------------------------------

NODE_CPU_M = 2000
CLASSES = (
    "[{name: low, priority: 0, preemptible: true}, "
    "{name: urgent, priority: 100, preemptible: false}]"
)


def stories(client: ArmadaClient, queue: str, job_set: str, topology: Topology) -> str:
    """A job set's jobs, each with its events (and the preempting job where there is one)."""
    lines = []
    for message in client.get_job_set_events(queue, job_set, watch=False):
        kind = message.message.WhichOneof("events")
        if kind == "preempted":
            body = message.message.preempted
            lines.append(
                f"  {body.job_id} preempted by {body.preempting_job_id or '?'}: {body.reason}"
            )
    lines += [
        f"  {job} {h.final}: {h.story()}"
        for job, h in sorted(read_histories(client, [(queue, job_set)]).items())
    ]
    return (
        f"{queue}/{job_set}:\n" + "\n".join(lines) + "\ncomponents' logs:\n" + topology.problems()
    )


def wait_states(
    client: ArmadaClient,
    topology: Topology,
    queue: str,
    job_set: str,
    jobs: list[str],
    state: int,
    what: str,
) -> None:
    try:
        wait_until(
            lambda: Counter(client.get_job_status(jobs).values())[state] == len(jobs), 120, what
        )
    except AssertionError as e:
        with topology.client() as other:
            reasons = other.get_job_details(jobs)
        raise AssertionError(
            f"{e}\n"
            + "\n".join(f"  {j}: scheduler: {d.scheduling_reason!r}" for j, d in reasons.items())
            + "\n"
            + stories(client, queue, job_set, topology)
        ) from None


@pytest.mark.postgres
def test_preemption_never_overcommits_a_node(
    cluster: Callable[..., Topology], tmp_path: Path, postgres_server
) -> None:
    """One node of 2 CPUs. Urgency: four low-priority half-CPU jobs fill it and two urgent
    one-CPU jobs take it over. Fair share: one queue fills it, a second queue's jobs take
    their share. Victims take 2 s to wind down after SIGTERM. From the processes' own records,
    what the processes alive on the node request never exceeds its 2 CPUs."""
    topology = cluster(
        postgres_server.new_database(),
        simulated=False,
        local_nodes="1x2x4Gi",
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    record = tmp_path / "records.log"
    sets = [("alpha", "urgency"), ("alpha", "share"), ("beta", "share")]

    def victims(n: int, key: str) -> list[submit_pb2.JobSubmitRequestItem]:
        return [
            job_item(
                recorded_spec(record, 120, cpu="500m", stop_delay=2, priority_class="low"),
                client_id=f"{key}-{i}",
                annotations=in_pool(LOCAL),
            )
            for i in range(n)
        ]

    def evidence(client: ArmadaClient) -> str:
        lifetimes, _ = read_records(record)
        close_open(lifetimes, topology.watch)
        return (
            "\ntimeline:\n"
            + timeline(read_histories(client, sets), lifetimes)
            + "\ncomponents' logs:\n"
            + topology.problems()
        )

    with topology.client() as client:
        # Urgency preemption: the urgent jobs are not preemptible, so they run to the end.
        low = client.submit_jobs("alpha", "urgency", victims(4, "low"))
        wait_states(
            client,
            topology,
            "alpha",
            "urgency",
            low,
            submit_pb2.RUNNING,
            "four low jobs to fill the node",
        )
        urgent = client.submit_jobs(
            "alpha",
            "urgency",
            [
                job_item(
                    recorded_spec(record, 2, cpu="1", priority_class="urgent"),
                    client_id=f"urgent-{i}",
                    annotations=in_pool(LOCAL),
                )
                for i in range(2)
            ],
        )
        results = client.wait_for_jobs("alpha", "urgency", urgent, timeout=120)
        assert {r.state_name for r in results.values()} == {"SUCCEEDED"}, (
            "urgent jobs did not all succeed" + evidence(client)
        )
        # Every low job preempted on the one node made room for an urgent one, and says so.
        rooms = {
            m.message.preempted.job_id: m.message.preempted.preempting_job_id
            for m in client.get_job_set_events("alpha", "urgency")
            if m.message.WhichOneof("events") == "preempted"
        }
        assert set(rooms.values()) <= set(urgent), (
            f"preempted for jobs other than the urgent ones: {rooms}" + evidence(client)
        )
        client.cancel_job_set("alpha", "urgency")
        assert not settle(topology, low + urgent), evidence(client)

        # Fair-share preemption: beta's jobs end (they may be preempted in turn).
        first = client.submit_jobs("alpha", "share", victims(4, "share"))
        wait_states(
            client,
            topology,
            "alpha",
            "share",
            first,
            submit_pb2.RUNNING,
            "queue alpha to fill the node",
        )
        second = client.submit_jobs(
            "beta",
            "share",
            [
                job_item(
                    recorded_spec(record, 3, cpu="500m", priority_class="low"),
                    client_id=f"second-{i}",
                    annotations=in_pool(LOCAL),
                )
                for i in range(4)
            ],
        )
        results = client.wait_for_jobs("beta", "share", second, timeout=120)
        assert "SUCCEEDED" in {r.state_name for r in results.values()}, (
            "none of queue beta's jobs ran to the end" + evidence(client)
        )
        client.cancel_job_set("alpha", "share")
        assert not settle(topology, first), evidence(client)
        histories = read_histories(client, sets)
        report = evidence(client)

    # The preemptions really happened (otherwise this proves nothing).
    for jobs, what in ((low, "urgency"), (first, "fair share")):
        preempted = [
            j
            for j in jobs
            if any(
                e.kind == "preempted" or (e.kind == "failed" and "reempt" in e.detail)
                for e in histories[j].events
            )
        ]
        assert preempted, f"no {what} preemption" + report

    lifetimes, anomalies = read_records(record)
    close_open(lifetimes, topology.watch)
    over = []
    peaks = peak_cpu(lifetimes)
    print(
        f"{len(lifetimes)} processes; peak requests per node (milli-CPU): "
        f"{ {node: cpu for node, (cpu, _) in peaks.items()} }"
    )
    for node, (cpu_m, alive) in sorted(peaks.items()):
        if cpu_m > NODE_CPU_M:
            over.append(
                f"node {node}: {cpu_m}m requested at once by "
                + ", ".join(
                    f"{life.job_id} run {life.run_id[-12:]} ({life.cpu_m}m)" for life in alive
                )
            )
    assert not over and not anomalies, "\n".join(over + anomalies) + report


# --- a gang cut short while it waits -------------------------------------------------------


def test_cancelling_one_member_of_a_waiting_gang_still_ends_the_others(
    cluster: Callable[..., Topology], tmp_path: Path, database_url: str
) -> None:
    """A gang waits (its pool has no executor yet); one member is cancelled. The others can
    never be placed whole: they must still end, in a terminal state, once the pool exists."""
    topology = cluster(database_url, simulated=False)
    spec, annotations = simulated_spec(0.5)
    with topology.client() as client:
        gang = client.submit_jobs(
            "alpha",
            "gang",
            gang_items(
                spec, replicas=3, client_id="cut", annotations=in_pool("later", annotations)
            ),
        )
        assert client.cancel_jobs("alpha", "gang", gang[:1]) == gang[:1]
        topology.add_executor("e-later", "simulated", "later", "1x4x16Gi")
        unsettled = settle(topology, gang, timeout=30)
        histories = read_histories(client, [("alpha", "gang")])
    assert not unsettled, "\n".join(stuck(topology, unsettled, histories, 30))
