"""The simulation's steps, on virtual time.

Step k happens at k × scheduling_period seconds: runs due to end by then end, the jobs due by
then are submitted, the executor syncs (its news in, work out), the scheduling loop runs one
cycle, and the executor syncs again to take what the cycle leased. Nothing else moves time.
With `every_cycle` off, steps at which no job is queued are skipped up to the next arrival or
the next run's end: such a cycle has nothing to place, and the server itself skips it (a cycle
with nothing queued decides nothing), so the decisions are the same, much sooner.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import JobState
from armada_server.config import ServerConfig
from armada_server.executors.agent import MAX_RESPONSE_BYTES
from armada_server.executors.capabilities import SIMULATED
from armada_server.executors.simulated import SimulatedBackend
from armada_server.simulation.clock import VirtualClock
from armada_server.simulation.jobs import Demand, demand_of, items_of
from armada_server.simulation.ports import Port
from armada_server.simulation.recording import (
    Decision,
    Holdings,
    JobRecord,
    Recording,
    capacity_of,
)
from armada_server.simulation.workload import Arrival, Workload

EXECUTOR = "simulated"
ENDED = frozenset({"succeeded", "failed", "returned", "stopped"})
# Steps without any lease or end after which the driver asks the server which of the jobs it
# thinks queued still are (the scheduler may have failed some).
RECHECK_STEPS = 100
# Steps with nothing running and nothing moving after which jobs still queued are taken to be
# jobs that can never be placed, and a simulation without a set duration ends.
STALL_STEPS = 1000
# Simulated seconds between two progress reports.
PROGRESS_EVERY = 3600.0


class Progress(NamedTuple):
    """Where a run stands: what a long simulation reports as it goes."""

    simulated: float  # seconds of virtual time done
    duration: float | None  # the workload's, if it sets one
    submitted: int
    arrivals: int
    running: int
    waiting: int


class Driver:
    """Drives `port` (the server) and a simulated executor over `workload`."""

    def __init__(
        self,
        workload: Workload,
        config: ServerConfig,
        port: Port,
        clock: VirtualClock,
        nodes: Sequence[executor_pb2.Node],
        *,
        every_cycle: bool = False,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.workload = workload
        self.progress = progress
        self.reported = 0.0  # virtual time of the last progress report
        self.config = config
        self.port = port
        self.clock = clock
        self.nodes = list(nodes)
        self.every_cycle = every_cycle
        self.period = config.scheduling_period
        self.backend = SimulatedBackend(self.nodes, clock=clock.now, later=clock.call_later)
        # One request for every sync, its runs and updates renewed: its nodes, the same
        # throughout, are then copied once, and the port knows them again.
        self.request = executor_pb2.SyncRequest(
            executor_id=EXECUTOR,
            pool=config.pool,
            nodes=self.nodes,
            max_response_bytes=MAX_RESPONSE_BYTES,  # as the server's own agent says
        )
        self.request.capabilities.CopyFrom(SIMULATED.declaration())
        self.updates: list[executor_pb2.RunUpdate] = []
        self.recording = Recording(
            {q.name: 1.0 / q.priority_factor for q in workload.queues},
            capacity_of(self.nodes),
            self.period,
        )
        self.demands: dict[str, Demand] = {}
        self.waiting = Holdings()  # jobs queued, as far as the driver knows
        self.running = Holdings()  # jobs whose run the executor was leased
        self.run_jobs: dict[str, str] = {}  # run id -> job id
        self.next_arrival = 0
        self.step = 0
        self.quiet_steps = 0

    async def run(self) -> Recording:
        for queue in self.workload.queues:
            self.port.create_queue(
                submit_pb2.Queue(name=queue.name, priority_factor=queue.priority_factor)
            )
        while True:
            now = self.step * self.period
            if self.workload.duration is not None and now > self.workload.duration:
                break
            self.clock.advance(now)
            await self._settle()
            self._submit_due(now)
            busy = await self._sync()
            if self.port.cycle():
                self.recording.cycles += 1
            busy = await self._sync() or busy
            self.recording.sample(
                now, self.running.totals, self.waiting.totals, self.waiting.counts
            )
            self.recording.end = now
            if self.progress is not None and now - self.reported >= PROGRESS_EVERY:
                self.reported = now
                self.progress(self._progress(now))
            self.quiet_steps = 0 if busy else self.quiet_steps + 1
            if self.quiet_steps % RECHECK_STEPS == RECHECK_STEPS - 1 and len(self.waiting):
                self._recheck_waiting()
            following = self._following_step()
            if following is None:
                break
            self.step = following
        return self.recording

    def _progress(self, now: float) -> Progress:
        return Progress(
            now,
            self.workload.duration,
            self.next_arrival,
            len(self.workload.arrivals),
            len(self.running),
            len(self.waiting),
        )

    def _following_step(self) -> int | None:
        """The next step to run; None when the workload is done: everything arrived and
        ended, or what still waits has not moved for STALL_STEPS steps with nothing running
        (jobs that can never be placed)."""
        arrivals_left = self.next_arrival < len(self.workload.arrivals)
        deadline = self.clock.next_deadline()
        running = len(self.running) or self.updates or deadline is not None
        stalled = not len(self.waiting) or self.quiet_steps >= STALL_STEPS
        if not (arrivals_left or running) and stalled:
            return None
        if self.every_cycle or len(self.waiting) or self.updates:
            return self.step + 1
        due = [e for e in (deadline,) if e is not None]
        if arrivals_left:
            due.append(self.workload.arrivals[self.next_arrival].at)
        if not due:
            return self.step + 1
        return max(self.step + 1, math.ceil(min(due) / self.period - 1e-9))

    async def _settle(self) -> None:
        """Let the executor's runs take every step they can at this instant."""
        seen = -1
        while seen != len(self.updates):
            seen = len(self.updates)
            for _ in range(3):
                await asyncio.sleep(0)

    def _submit_due(self, now: float) -> None:
        """Submit what arrived by `now`: one request per job set, in order of arrival."""
        arrivals = self.workload.arrivals
        batches: dict[tuple[str, str], list[Arrival]] = {}
        while self.next_arrival < len(arrivals) and arrivals[self.next_arrival].at <= now:
            arrival = arrivals[self.next_arrival]
            batches.setdefault((arrival.queue, arrival.job_set), []).append(arrival)
            self.next_arrival += 1
        for batch in batches.values():
            self._submit(batch, now)

    def _submit(self, batch: Sequence[Arrival], now: float) -> None:
        """One request for arrivals of one job set (as a client submitting them together)."""
        items: list[submit_pb2.JobSubmitRequestItem] = []
        demands: list[Demand] = []
        for arrival in batch:
            members = items_of(arrival)
            items += members
            demands += [demand_of(arrival)] * len(members)
        ids = self.port.submit(
            submit_pb2.JobSubmitRequest(
                queue=batch[0].queue, job_set_id=batch[0].job_set, job_request_items=items
            )
        )
        for job_id, item, demand in zip(ids, items, demands, strict=True):
            self.demands[job_id] = demand
            self.recording.jobs[job_id] = JobRecord(demand.queue, item.client_id, now)
            self.waiting.add(job_id, demand)

    async def _sync(self) -> bool:
        """One executor sync; whether anything was leased, stopped or ended."""
        updates, self.updates = self.updates, []
        request = self.request
        del request.updates[:]
        request.updates.extend(updates)
        response = self.port.sync(request, self.backend.held())
        self._ended(updates)
        now = self.clock.elapsed
        for lease in response.leases:
            self._leased(lease, now)
            self.backend.start(lease, self._report)
        for stop in response.stop:
            job = self.run_jobs.get(stop.run_id)
            if stop.preempt and job is not None:
                record = self.recording.jobs[job]
                record.preemptions += 1
                self.recording.decisions.append(
                    Decision(self.step, now, "preempted", record.name, "")
                )
            self.backend.stop(stop.run_id, preempt=stop.preempt)
        await self._settle()
        return bool(response.leases or response.stop or updates)

    def _report(self, update: executor_pb2.RunUpdate) -> None:
        self.updates.append(update)

    def _leased(self, lease: executor_pb2.Lease, now: float) -> None:
        job = lease.job.id
        self.run_jobs[lease.run_id] = job
        record = self.recording.jobs[job]
        record.runs += 1
        if record.leased is None:
            record.leased = now
        self.waiting.remove(job)
        self.running.add(job, self.demands[job])
        self.recording.decisions.append(Decision(self.step, now, "leased", record.name, lease.node))

    def _ended(self, updates: Sequence[executor_pb2.RunUpdate]) -> None:
        """Runs that ended free their room; jobs whose run did not succeed may be queued
        again (the server's retries decide): ask it."""
        again: list[str] = []
        for u in updates:
            kind = u.WhichOneof("update")
            if kind not in ENDED:
                continue
            job = self.run_jobs.pop(u.run_id, u.job_id)
            self.running.remove(job)
            if kind == "succeeded":
                self.recording.jobs[job].succeeded = True
            else:
                again.append(job)
        if again:
            for job, state in self.port.job_states(again).items():
                if state == JobState.QUEUED:
                    self.waiting.add(job, self.demands[job])

    def _recheck_waiting(self) -> None:
        states = self.port.job_states(list(self.waiting.jobs))
        for job, state in states.items():
            if state != JobState.QUEUED:
                self.waiting.remove(job)
