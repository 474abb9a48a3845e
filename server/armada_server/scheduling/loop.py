"""The scheduling loop: every period the leader expires dead leases, snapshots, schedules and
writes the decisions, each step its own transaction."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import operator
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress, repeat
from typing import cast

from sqlalchemy import Engine

from armada_core import scheduling as s
from armada_core.gcpause import gc_paused
from armada_core.scheduling.fairness import decay_usage
from armada_core.waiting import wait_event
from armada_server.config import ServerConfig
from armada_server.metrics import Metrics, preemption_kinds
from armada_server.reporting.cycle import cycle_record, dumps
from armada_server.scheduling.carryover import Carryover
from armada_server.scheduling.isolation import schedule_isolating
from armada_server.scheduling.leader import Leadership
from armada_server.scheduling.preemption_kind import preemption_kind_of
from armada_server.scheduling.running_views import RunningViews
from armada_server.scheduling.snapshot import Made, NodeViews, Placement, build_snapshot
from armada_server.storage import Storage
from armada_server.storage.base import utcnow
from armada_server.storage.carryover import SchedulerCarryover
from armada_server.storage.cycle_reports import CycleReports
from armada_server.storage.gcpause import long_lived
from armada_server.storage.held_jobs import HeldJobs
from armada_server.storage.leases import Leases
from armada_server.storage.scheduling_reads import QueuedJob, SchedulingReads, SchedulingState
from armada_server.storage.scheduling_writes import SchedulingWrites, changed_reasons

log = logging.getLogger("armada_server")


# Leases written per transaction. A cycle's decisions are written in slices so that the first
# executors start runs while the rest are still being written: leasing 80,000 jobs in one
# transaction kept every executor waiting for all of it. Each slice is one transaction with
# its events; a gang is never split, the first slice carries the cycle's preemptions and
# failures, and the last its waiting reasons. A slice that fails leaves the rest queued for
# the next cycle.
LEASE_SLICE = 5_000


def slices(
    scheduled: Mapping[str, tuple[str, str, str]], gangs: Mapping[str, tuple[str, str]], size: int
) -> Iterator[dict[str, tuple[str, str, str]]]:
    """`scheduled` in parts of about `size` leases (at least one part), gangs kept whole."""
    members: dict[tuple[str, str], dict[str, tuple[str, str, str]]] = {}
    for job_id in scheduled.keys() & gangs.keys():
        members.setdefault(gangs[job_id], {})[job_id] = scheduled[job_id]
    part: dict[str, tuple[str, str, str]] = {}
    for job_id, placement in scheduled.items():
        gang = gangs.get(job_id)
        if gang is None:
            part[job_id] = placement
        elif gang in members:
            part.update(members.pop(gang))  # the whole gang, at its first member
        if len(part) >= size:
            yield part
            part = {}
    if part or not scheduled:
        yield part


def _gang_keys(jobs: Sequence[s.Job]) -> dict[str, tuple[str, str]]:
    """Job -> (queue, gang) of the gang members among `jobs`, found in C: a backlog's million
    jobs are seldom members."""
    members = compress(
        jobs, map(operator.is_not, map(operator.attrgetter("gang_id"), jobs), repeat(None))
    )
    return {j.id: (j.queue, j.gang_id) for j in members if j.gang_id is not None}


def _scheduled_gang_keys(
    scheduled: Collection[str], rows: Mapping[str, QueuedJob], jobs: Sequence[s.Job]
) -> dict[str, tuple[str, str]]:
    """Job -> (queue, gang) of the gang members among the `scheduled` jobs, from the views
    their rows hold (the views the snapshot was made of): a backlog's cycle schedules
    thousands of its million jobs. When a row holds none (a job with a node to avoid is
    viewed afresh each cycle), every job of the snapshot is walked (`jobs`)."""
    views = [getattr(rows.get(j), "view", None) for j in scheduled]
    if any(v is None for v in views):
        return _gang_keys(jobs)
    return _gang_keys(cast(list[s.Job], views))


def _seen(
    state: SchedulingState, queued: Collection[str], preempted: Collection[str]
) -> dict[str, int | str]:
    """What the snapshot saw of the jobs a cycle decided about: the row version of a queued
    job, the run of a running one (apply_schedule skips jobs that changed since)."""
    seen: dict[str, int | str] = {}
    if queued:
        seen.update((j.id, j.version) for j in state.queued if j.id in queued)
    if preempted:
        wanted = set(preempted)
        seen.update((j.id, j.run_id) for j in state.running if j.id in wanted)
    return seen


def made_room_for(snapshot: s.Snapshot, result: s.SchedulingResult) -> dict[str, str]:
    """For each job the cycle preempts, the job it made room for: one the cycle newly placed
    on the preempted job's node (an evicted job can only come back to its own node, so what
    took its room was placed there). Of several, the most urgent: the highest priority
    class, then the earliest submitted, then the lowest id. A preempted job whose node got
    nothing new (e.g. preempted to bring its queue under a class cap) is left out."""
    if not result.preempted or not result.scheduled:
        return {}
    wanted = result.preempted | result.scheduled.keys()
    jobs = {j.id: j for j in snapshot.jobs if j.id in wanted}
    urgency = {c.name: c.priority for c in snapshot.priority_classes}
    best: dict[str, tuple[int, float, str]] = {}  # node -> its most urgent new job's key
    for job_id, node in result.scheduled.items():
        job = jobs.get(job_id)
        if job is None:
            continue
        key = (-urgency.get(job.priority_class, 0), job.submit_time, job_id)
        if node not in best or key < best[node]:
            best[node] = key
    out: dict[str, str] = {}
    for job_id in result.preempted:
        victim = jobs.get(job_id)
        if victim is not None and victim.node is not None and victim.node in best:
            out[job_id] = best[victim.node][2]
    return out


@dataclass
class _Decisions:
    """A cycle's decisions, and what writing them needs of the snapshot."""

    snapshot: s.Snapshot
    placements: dict[str, Placement]
    result: s.SchedulingResult
    broken: dict[str, str]  # jobs the scheduler cannot read -> why
    preempting: dict[str, str] = field(default_factory=dict)  # made_room_for, once written
    kinds: dict[str, str] = field(default_factory=dict)  # preemption_kind_of, once written


class SchedulingLoop:
    """The leader's scheduling cycles. It reads and writes storage through the parts it is
    given: lease expiry (`leases`), the cycle's read (`reads`) and writes (`writes`), and
    what cycles carry to the next (`carryover`); `isolated_failures` counts jobs failed
    alone (a metric). `engine` is the database whose leadership it takes. `clock` says what
    time it is (real time; the what-if simulator hands it a virtual clock)."""

    def __init__(
        self,
        config: ServerConfig,
        metrics: Metrics,
        *,
        engine: Engine,
        leases: Leases,
        reads: SchedulingReads,
        writes: SchedulingWrites,
        carryover: SchedulerCarryover,
        isolated_failures: Counter[str],
        clock: Callable[[], datetime] = utcnow,
        reports: CycleReports | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        # Where each cycle's figures and jobs' reason changes are kept (None: not kept).
        self.reports = reports
        self.metrics = metrics
        self.leases = leases
        self.reads = reads
        self.writes = writes
        self.carryover = carryover
        self.isolated_failures = isolated_failures
        self.leadership = Leadership(engine)
        self._wake = asyncio.Event()
        self.cycles = 0
        # Called (from the cycle's thread) after a cycle leased work: an in-process executor
        # then syncs at once instead of at its next interval.
        self.on_leased: Callable[[], None] | None = None
        # The snapshot's converted jobs, reused by the next cycle.
        self._jobs: dict[str, Made] = {}
        self._nodes: NodeViews = {}
        self._running = RunningViews()
        # The queued and running jobs the last cycle read, brought up to date each cycle
        # with those that changed (storage/held_jobs.py).
        self.held = HeldJobs()
        # What cycles carry to the next (each queue's decayed usage, the rate limits' token
        # buckets), kept in the database for whoever leads next (carryover.py): read when
        # this replica comes to lead, None while it does not.
        self.carried: Carryover | None = None
        self._kept = "{}"  # what the database holds of it

    def _lead(self) -> Carryover | None:
        """What this replica carries as leader (read from the database when it comes to
        lead); None when another replica leads."""
        leads = self.leadership.is_leader()
        self.metrics.leader.set(1 if leads else 0)
        if not leads:
            self.carried = None  # whoever leads meanwhile carries on: read it back later
            self._jobs.clear()  # and what this replica made of the jobs is let go
            self._running.clear()
            self.held.forget()
            return None
        if self.carried is None:
            self._kept = self.carryover.read() or "{}"
            self.carried = Carryover.loads(self._kept)
        return self.carried

    def _keep(self, carried: Carryover) -> None:
        """Write what changed of what the next cycle carries."""
        text = carried.dumps()
        if text != self._kept:
            self.carryover.write(text)
            self._kept = text

    @staticmethod
    def _record_usage(
        carried: Carryover,
        half_life: float | None,
        costs: Mapping[str, float],
        now: float,
        elapsed: float,
    ) -> None:
        """Carry each queue's usage to the next cycle (decayed towards its cost now)."""
        if half_life is None:
            carried.usage, carried.usage_at = {}, None
            return
        usage = {
            q: decay_usage(carried.usage.get(q, 0.0), costs.get(q, 0.0), elapsed, half_life)
            for q in carried.usage.keys() | costs.keys()
        }
        carried.usage = {q: u for q, u in usage.items() if u > 1e-9}
        carried.usage_at = now

    @classmethod
    def over(
        cls,
        storage: Storage,
        config: ServerConfig,
        metrics: Metrics | None = None,
        *,
        clock: Callable[[], datetime] = utcnow,
        reports: bool = False,
    ) -> SchedulingLoop:
        """The loop over `storage`'s parts (with metrics of its own unless given), keeping
        cycle reports in it if `reports`."""
        return cls(
            config,
            metrics or Metrics(storage.job_reads, storage.isolated_failures),
            engine=storage.engine,
            leases=storage.leases,
            reads=storage.scheduling_reads,
            writes=storage.scheduling_writes,
            carryover=storage.carryover,
            isolated_failures=storage.isolated_failures,
            clock=clock,
            reports=storage.cycle_reports if reports else None,
        )

    def poke(self) -> None:
        """Run a cycle soon (e.g. after a submission) instead of waiting the full period."""
        self._wake.set()

    def cycle(self) -> int:
        """One cycle; returns the number of jobs leased. Blocking: run it off the loop."""
        carried = self._lead()
        if carried is None:
            return 0
        started = time.perf_counter()
        now = self.clock()
        config = self.config  # replaced whole when the file is reloaded
        self.leases.expire_leases(timeout=config.lease_timeout, now=now)
        if not self.reads.live_executors(executor_timeout=config.lease_timeout, now=now):
            return 0  # nowhere to place anything: do not load every queued job
        held = self.held
        # The collector stays paused until the leases are written: resumed between deciding
        # and writing, its deferred collection ran first, ahead of every lease.
        with gc_paused():
            with long_lived(held.reads_everything(), held.count):
                state = self.reads.scheduling_state(
                    executor_timeout=config.lease_timeout, now=now, held=self.held
                )
                if not (state.queued or state.running) or not any(e.nodes for e in state.executors):
                    # Nothing to place, or nowhere to place it. The views kept no longer
                    # follow what is held (this read's changes are not applied to them).
                    self._jobs.clear()
                    self._running.clear()
                    return 0
                decisions = self._decide(config, state, carried, now)
            number = self.reports.next_cycle() if self.reports is not None else None
            leased = self._write(state, decisions, now, number)
        self.metrics.count_preemptions(preemption_kinds(decisions.snapshot, decisions.kinds))
        self._keep(carried)
        self.cycles += 1
        took = time.perf_counter() - started
        self.metrics.cycle_seconds.observe(took)
        if number is not None:
            self._report(number, now, took, decisions)
        return leased

    def _report(self, number: int, now: datetime, took: float, decisions: _Decisions) -> None:
        """Keep the cycle's figures for the reports; a failure to keep them is logged, and
        scheduling goes on."""
        assert self.reports is not None
        try:
            record = cycle_record(
                cycle=number,
                started_at=now,
                seconds=took,
                snapshot=decisions.snapshot,
                placements=decisions.placements,
                result=decisions.result,
                preempting=decisions.preempting,
            )
            self.reports.write_cycle(
                number, now, took, dumps(record), keep=self.config.report_cycles
            )
        except Exception:
            log.exception("scheduling cycle %d: its report was not kept", number)

    def _decide(
        self, config: ServerConfig, state: SchedulingState, carried: Carryover, now: datetime
    ) -> _Decisions:
        """The scheduler's decisions on the snapshot of `state`; updates what is carried to
        the next cycle (rate limits' tokens, queues' usage)."""
        settings = config.scheduling
        broken: dict[str, str] = {}
        elapsed = (
            max(0.0, now.timestamp() - carried.usage_at) if carried.usage_at is not None else 0.0
        )
        model = settings.model()
        snapshot, placements = build_snapshot(
            state,
            config.priority_classes,
            now,
            config=model,
            cache=self._jobs,
            changed=self.held.changed,
            nodes_cache=self._nodes,
            running_cache=self._running,
            broken=broken,
            class_caps=settings.max_fraction_per_queue,
            usage=carried.usage if settings.usage_half_life is not None else None,
            usage_elapsed=elapsed,
        )
        tokens, queue_tokens = carried.rate.refill(model, now.timestamp())
        snapshot = dataclasses.replace(snapshot, rate_tokens=tokens, queue_rate_tokens=queue_tokens)
        result, unschedulable = schedule_isolating(snapshot)
        carried.rate.consume(model, result.rate_consumed)
        broken.update(unschedulable)
        self._record_usage(
            carried, settings.usage_half_life, result.queue_costs, now.timestamp(), elapsed
        )
        return _Decisions(snapshot, placements, result, broken)

    def _write(
        self, state: SchedulingState, decisions: _Decisions, now: datetime, number: int | None
    ) -> int:
        """Write the cycle's decisions, in slices; returns the leases made. `number` is the
        cycle's number in the reports (None: no reports)."""
        snapshot, placements, result = decisions.snapshot, decisions.placements, decisions.result
        if decisions.broken:
            # Jobs the scheduler cannot read fail alone; everyone else is scheduled.
            log.error(
                "failing %d jobs the scheduler cannot read, e.g. %s: %s",
                len(decisions.broken),
                *next(iter(decisions.broken.items())),
            )
            self.isolated_failures["scheduling"] += self.writes.fail_jobs(decisions.broken, now=now)
        scheduled = {
            job: (p.executor, p.node, p.pool)
            for job, nid in result.scheduled.items()
            if (p := placements.get(nid)) is not None
        }
        gangs = _scheduled_gang_keys(scheduled, self.held.queued, snapshot.jobs)
        seen = _seen(state, scheduled.keys() | result.failed.keys(), result.preempted)
        preempting = decisions.preempting = made_room_for(snapshot, result)
        kinds = decisions.kinds = preemption_kind_of(snapshot, result, preempting)
        read = self.held.queued  # their reasons, by id: only changes are written
        reasons, settled = changed_reasons(result.unscheduled, read, self.held.settled)
        leased = 0
        parts = list(slices(scheduled, gangs, LEASE_SLICE))
        for i, part in enumerate(parts):
            # The first transaction also holds the preemptions the leases may rely on; the
            # last the waiting reasons, so that leases go first (a cold start at a million
            # queued writes a reason for every job).
            first, last = i == 0, i == len(parts) - 1
            done = self.writes.apply_schedule(
                scheduled=part,
                preempted=result.preempted if first else (),
                failed=result.failed if first else {},
                reasons=reasons if last else {},
                seen=seen,
                gangs=gangs,
                preempting=preempting if first else None,
                kinds=kinds if first else None,
                preempt_reasons=result.preempt_reasons if first else None,
                charges=result.excess_flow,
                now=now,
                cycle=number,
                reasons_read=read,
            )
            if last:
                self.held.note_reasons(reasons, number, settled)  # written: hold them too
            leased += done
            if done and self.on_leased is not None:
                self.on_leased()
        return leased

    async def run(self, pool: Executor) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()  # pokes from here on ask for the next cycle
            started = time.monotonic()
            try:
                await loop.run_in_executor(pool, self.cycle)
            except Exception:
                log.exception("scheduling cycle failed; trying again next period")
            # A poke starts the next cycle early, but never sooner than the last one took:
            # a long cycle (a huge backlog) then uses at most about half of the server's
            # time, and executors' syncs, which start the work it leased, get the rest.
            took = time.monotonic() - started
            await asyncio.sleep(took)
            await wait_event(self._wake, max(0.0, self.config.scheduling_period - took))

    def close(self) -> None:
        self.leadership.close()
