"""A cluster as an operator runs it, and the invariants its job histories must keep.

`Topology` starts real processes against one database: `armada-server` replicas without an
in-process executor (`--executor none`) and `armada-executor` processes in pools of their own,
which it can SIGKILL and restart. The checks read what the system says about itself (the job
sets' event logs through GetJobSetEvents, run details through GetJobDetails) and what the jobs
of the local executor say about themselves (a record file each process appends its start and
end to, with its own clock), and return every violation they find as readable evidence.
"""

from __future__ import annotations

import bisect
import os
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from armada_core.api import event_pb2, job_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import annotations as ann

from .processes import LEADER, Process, start_executor, start_server, wait_until

# --- the cluster ----------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    process: Process
    address: str

    @property
    def alive(self) -> bool:
        return self.process.popen.poll() is None

    @property
    def leads(self) -> bool:
        return self.alive and LEADER in self.process.output()


@dataclass
class Executor:
    name: str
    kind: str
    pool: str
    nodes: tuple[str, ...]
    sandbox: Path
    process: Process
    restarts: int = 0


class Topology:
    """Replicas on one database and executors syncing with all of them (failing over)."""

    def __init__(
        self, start: Callable[..., Process], tmp_path: Path, database_url: str, **settings: object
    ) -> None:
        self.start = start
        self.tmp_path = tmp_path
        self.database_url = database_url
        self.settings = settings
        self.replicas: dict[str, Replica] = {}
        self.executors: dict[str, Executor] = {}
        self.processes: list[Process] = []
        self.watch: PodWatch | None = None

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    # components

    def add_replica(self, name: str) -> Replica:
        process, address = start_server(
            self._start, name, self.tmp_path, self.database_url, **self.settings
        )
        self.replicas[name] = Replica(name, process, address)
        return self.replicas[name]

    def add_executor(self, name: str, kind: str, pool: str, *nodes: str) -> Executor:
        sandbox = self.tmp_path / f"{name}-pods"
        process = start_executor(
            self._start,
            name,
            self.addresses(),
            kind,
            self.tmp_path,
            *nodes,
            pool=pool,
            sandbox=sandbox,
        )
        self.executors[name] = Executor(name, kind, pool, tuple(nodes), sandbox, process)
        if kind == "local" and self.watch is None:
            self.watch = PodWatch(
                lambda: [e.sandbox for e in self.executors.values() if e.kind == "local"]
            )
        return self.executors[name]

    def restart_executor(self, name: str) -> Executor:
        """The executor again, same id, pool, nodes and sandbox (a new process and log)."""
        old = self.executors[name]
        restarts = old.restarts + 1
        process = start_executor(
            self._start,
            f"{name}.{restarts}",
            self.addresses(),
            old.kind,
            self.tmp_path,
            *old.nodes,
            pool=old.pool,
            sandbox=old.sandbox,
            executor_id=name,
        )
        self.executors[name] = Executor(
            name, old.kind, old.pool, old.nodes, old.sandbox, process, restarts
        )
        return self.executors[name]

    def _start(self, name: str, *argv: str) -> Process:
        process = self.start(name, *argv)
        self.processes.append(process)
        return process

    # state

    def addresses(self) -> list[str]:
        return [r.address for r in self.replicas.values() if r.alive]

    def alive(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.alive]

    def leader(self, timeout: float = 60) -> Replica:
        """The live replica that says it leads (waiting for one to take over)."""
        found: list[Replica] = []

        def one() -> bool:
            found[:] = [r for r in self.replicas.values() if r.leads]
            return len(found) == 1

        wait_until(one, timeout, "one live replica to lead the scheduling")
        return found[0]

    def client(self, replica: Replica | None = None, **settings: object) -> ArmadaClient:
        return ArmadaClient((replica or self.alive()[0]).address, **settings)

    # evidence

    def log_lines(self, pattern: str) -> dict[str, list[str]]:
        """Each process's log lines matching `pattern`."""
        regex = re.compile(pattern)
        found = {}
        for process in self.processes:
            lines = [line for line in process.output().splitlines() if regex.search(line)]
            if lines:
                found[process.name] = lines
        return found

    def problems(self, limit: int = 5) -> str:
        """Errors and warnings from every component's log, a few per kind and process."""
        out = []
        for name, lines in self.log_lines(r"ERROR|WARNING|Traceback|Error:").items():
            kinds: dict[str, list[str]] = defaultdict(list)
            for line in lines:
                key = re.sub(r"[0-9a-f]{8,}|\d+", "#", line.split(": ", 1)[-1])[:80]
                kinds[key].append(line)
            for same in kinds.values():
                out.append(f"  {name} ({len(same)}x): {same[0][:400]}")
                out += [f"  {name}:    {line[:400]}" for line in same[1:limit]]
        return "\n".join(out) or "  (no errors or warnings logged)"


# --- jobs -----------------------------------------------------------------------------------

GRACE_SECONDS = 10


def resources(cpu: str, memory: str = "64Mi") -> dict:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def recorded_spec(
    record: Path,
    seconds: float,
    *,
    cpu: str = "100m",
    stop_delay: float = 0,
    priority_class: str | None = None,
) -> dict:
    """A pod for the local executor that appends `start` and `end` lines to `record`:
    `<start|end> <job id> <run id> <node> <requested milli-CPU> <pid> <ns since the epoch>`.

    The node and the request come from the downward API; the time is the process's own clock.
    On SIGTERM it takes `stop_delay` seconds to wind down, then records its end.
    """
    # `$$` is Kubernetes' escape of `$` in a command: `$$$$` reaches the shell as `$$`.
    write = (
        f'rec() {{ echo "$1 $ARMADA_JOB_ID $ARMADA_RUN_ID $NODE $CPU_M $$$$ '
        f'$$(date +%s%N)" >> {record}; }}'
    )
    script = "; ".join(
        [
            write,
            "rec start",
            f"trap 'sleep {stop_delay}; rec end; exit 143' TERM"
            if stop_delay
            else "trap 'rec end; exit 143' TERM",
            f"sleep {seconds} & wait $!",
            "rec end",
        ]
    )
    spec = {
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh", "-c", script],
                "env": [
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {
                        "name": "CPU_M",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}
                        },
                    },
                ],
                "resources": resources(cpu),
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def simulated_spec(seconds: float) -> tuple[dict, dict[str, str]]:
    """A pod for the simulated executor, and the annotation that says how long it runs."""
    spec = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["true"],
                "resources": resources("100m"),
            }
        ]
    }
    return spec, {ann.PREFIX + "simulatedDuration": f"{seconds:g}"}


def in_pool(pool: str, annotations: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**(annotations or {}), ann.POOL: pool}


def canary(
    client: ArmadaClient,
    queue: str,
    pool: str,
    spec: dict,
    annotations: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> str:
    """Submit one job now and wait for it: '' when it succeeded, or what happened instead."""
    job_set = f"canary-{pool}"
    [job] = client.submit_jobs(
        queue, job_set, [job_item(spec, annotations=in_pool(pool, annotations))]
    )
    result = client.wait_for_jobs(queue, job_set, [job], timeout=timeout)[job]
    if result.state_name == "SUCCEEDED":
        return ""
    return f"canary job {job} in pool {pool} ended {result.state_name}: {result.failure_reason}"


# --- what the event logs say ----------------------------------------------------------------

RUN_ENDS = {"succeeded", "lease_expired", "lease_returned", "preempted"}
TERMINAL_KINDS = {"succeeded": "SUCCEEDED", "cancelled": "CANCELLED", "preempted": "PREEMPTED"}
NOT_AFTER_CANCEL = {
    "queued",
    "leased",
    "pending",
    "running",
    "succeeded",
    "failed",
    "lease_expired",
    "lease_returned",
    "preempted",
    "cancelled",
}
LIVE_RUN_STATES = {job_pb2.RUN_STATE_LEASED, job_pb2.RUN_STATE_PENDING, job_pb2.RUN_STATE_RUNNING}
TERMINAL_STATES = {
    submit_pb2.SUCCEEDED,
    submit_pb2.FAILED,
    submit_pb2.CANCELLED,
    submit_pb2.PREEMPTED,
    submit_pb2.REJECTED,
}


@dataclass(frozen=True)
class Event:
    seq: int
    kind: str
    run_id: str = ""
    retryable: bool = False
    detail: str = ""
    at: float = 0.0  # the event's creation time (seconds since the epoch)

    def __str__(self) -> str:
        text = self.kind
        if self.run_id:
            text += f"[{self.run_id[-12:]}]"
        if self.detail:
            text += f"({self.detail})"
        return text


@dataclass
class History:
    job_id: str
    queue: str
    job_set: str
    events: list[Event] = field(default_factory=list)

    def story(self) -> str:
        return " ".join(str(e) for e in self.events)

    @property
    def final(self) -> str:
        """The job's state according to its events."""
        state = "UNKNOWN"
        for e in self.events:
            if e.kind in ("queued", "lease_returned"):  # a returned lease queues it again
                state = "QUEUED"
            elif e.kind in ("leased", "pending", "running"):
                state = e.kind.upper()
            elif e.kind in TERMINAL_KINDS:
                state = TERMINAL_KINDS[e.kind]
            elif e.kind == "failed":
                state = (
                    "QUEUED"
                    if e.retryable
                    else ("REJECTED" if e.detail == "rejected" else "FAILED")
                )
        return state


def read_histories(client: ArmadaClient, job_sets: Iterable[tuple[str, str]]) -> dict[str, History]:
    """Every job's events, from its job set's log (GetJobSetEvents, watch=false)."""
    histories: dict[str, History] = {}
    for queue, job_set in sorted(set(job_sets)):
        for message in client.get_job_set_events(queue, job_set, watch=False, timeout=120):
            kind = message.message.WhichOneof("events")
            if kind is None:
                continue
            body = getattr(message.message, kind)
            history = histories.setdefault(body.job_id, History(body.job_id, queue, job_set))
            detail = ""
            retryable = False
            if kind == "failed":
                retryable = body.retryable
                detail = (
                    "rejected"
                    if body.cause == event_pb2.Rejected
                    else (
                        f"{'retryable ' if retryable else ''}"
                        f"{body.condition or body.failure_subcategory or body.reason}"[:60]
                    )
                )
            elif kind in ("cancelled", "preempted", "lease_returned"):
                detail = body.reason[:60]
            at = body.created.ToNanoseconds() / 1e9 if body.HasField("created") else 0.0
            history.events.append(
                Event(int(message.id), kind, getattr(body, "run_id", ""), retryable, detail, at)
            )
    return histories


def timeline(histories: Mapping[str, History], lifetimes: Iterable[Lifetime] = ()) -> str:
    """Every event of `histories` and every process start and end, in time order, relative
    to the first."""
    rows = [
        (e.at, f"{h.queue}/{h.job_set} {job[-6:]} {e}")
        for job, h in histories.items()
        for e in h.events
    ]
    for life in lifetimes:
        rows.append(
            (
                life.start / 1e9,
                f"process {life.job_id[-6:]} run {life.run_id[-12:]} "
                f"starts on {life.node} ({life.cpu_m}m)",
            )
        )
        if life.end is not None:
            rows.append(
                (
                    life.end / 1e9,
                    f"process {life.job_id[-6:]} run {life.run_id[-12:]} "
                    f"ends on {life.node} ({life.cpu_m}m)",
                )
            )
    rows.sort(key=lambda row: row[0])  # stable: a job set's events stay in order
    first = rows[0][0] if rows else 0.0
    return "\n".join(f"  {at - first:8.3f} {what}" for at, what in rows)


def event_violations(histories: Mapping[str, History], acked_cancels: Iterable[str]) -> list[str]:
    """What the event logs show going wrong:

    - an acknowledged cancel that did not end the job CANCELLED;
    - after a job's `cancelled` event, anything that starts, runs, ends or requeues it;
    - a `leased` event for a new run while the job's previous run was still live (two live
      runs at once);
    - a job whose events do not end in a terminal state.
    """
    out = []
    for job in sorted(set(acked_cancels)):
        history = histories.get(job)
        if history is None:
            out.append(f"acknowledged cancel of {job}: the job has no events at all")
        elif history.final != "CANCELLED":
            out.append(
                f"acknowledged cancel of {job} lost: it ended {history.final}: {history.story()}"
            )
    for job, history in sorted(histories.items()):
        live: list[str] = []
        cancelled = False
        for e in history.events:
            if cancelled and e.kind in NOT_AFTER_CANCEL:
                out.append(f"{job}: {e} after its cancelled event: {history.story()}")
                break
            if e.kind == "leased":
                if live:
                    out.append(
                        f"{job}: run {e.run_id[-12:]} leased while run {live[0][-12:]} "
                        f"was live: {history.story()}"
                    )
                    break
                live = [e.run_id]
            elif e.kind in RUN_ENDS or (e.kind == "failed" and e.run_id):
                live = [r for r in live if r != e.run_id]
            elif e.kind == "cancelled":
                cancelled, live = True, []
        if history.final not in {*TERMINAL_KINDS.values(), "FAILED", "REJECTED"}:
            out.append(f"{job} not terminal ({history.final}): {history.story()}")
    return out


SETTLE = 120  # seconds for every job to end once the load stops (a bound, not a measurement)


def settle(topology: Topology, job_ids: list[str], timeout: float = SETTLE) -> list[str]:
    """Wait (within `timeout`) for every job to be terminal; returns those that are not."""
    left = list(job_ids)
    deadline = time.monotonic() + timeout
    with topology.client(timeout=60) as client:
        while left and time.monotonic() < deadline:
            states = {}
            for i in range(0, len(left), 500):
                states.update(client.get_job_status(left[i : i + 500]))
            left = [j for j in left if states.get(j) not in TERMINAL_STATES]
            if left:
                time.sleep(0.5)
    return left


def stuck(
    topology: Topology, jobs: list[str], histories: dict[str, History], waited: float = SETTLE
) -> list[str]:
    """Jobs that did not end: where they are, why the scheduler says they wait, and how the
    other members of their gang ended."""
    if not jobs:
        return []
    with topology.client(timeout=60) as client:
        details = client.get_job_details(jobs, expand_job_spec=True)
    out = []
    for job in jobs:
        d = details.get(job)
        h = histories.get(job)
        where = f"{h.queue}/{h.job_set}" if h else "?"
        gang = d.job_spec.annotations.get(ann.GANG_ID, "") if d else ""
        siblings = ""
        if gang:
            members = [
                other
                for other, oh in histories.items()
                if oh.job_set == (h.job_set if h else "") and other != job
            ]
            with topology.client(timeout=60) as client:
                specs = client.get_job_details(members, expand_job_spec=True)
            siblings = "; gang members: " + ", ".join(
                f"{m} {histories[m].final} ({histories[m].story()})"
                for m, md in specs.items()
                if md.job_spec.annotations.get(ann.GANG_ID) == gang
            )
        out.append(
            f"{job} ({where}{', gang ' + gang if gang else ''}) not terminal "
            f"{waited:g}s after the load stopped; scheduler: "
            f"{d.scheduling_reason if d else '?'!r}; "
            f"{h.story() if h else '(no events)'}{siblings}"
        )
    return out


def job_details(client: ArmadaClient, job_ids: Iterable[str]) -> dict[str, job_pb2.JobDetails]:
    ids = sorted(set(job_ids))
    details: dict[str, job_pb2.JobDetails] = {}
    for i in range(0, len(ids), 200):
        details.update(client.get_job_details(ids[i : i + 200], expand_job_run=True))
    return details


def run_violations(
    details: Mapping[str, job_pb2.JobDetails], histories: Mapping[str, History]
) -> list[str]:
    """Runs still live (leased, pending, running) of jobs that have ended, and more than one
    live run of any job, according to GetJobDetails."""
    out = []
    for job, d in sorted(details.items()):
        live = [r for r in d.job_runs if r.state in LIVE_RUN_STATES]
        story = histories[job].story() if job in histories else "(no events)"
        if d.state in TERMINAL_STATES and live:
            out.append(
                f"{job} is {submit_pb2.JobState.Name(d.state)} but its run(s) "
                + ", ".join(
                    f"{r.run_id[-12:]} on {r.cluster or '?'} {job_pb2.JobRunState.Name(r.state)}"
                    for r in live
                )
                + f" are live: {story}"
            )
        elif len(live) > 1:
            out.append(f"{job} has {len(live)} live runs: {story}")
    return out


# --- what the processes say -----------------------------------------------------------------


@dataclass
class Lifetime:
    """One process of a run, from its own start and end records."""

    job_id: str
    run_id: str
    node: str
    cpu_m: int
    pid: int
    start: int  # ns since the epoch
    end: int | None = None  # None: no end record (yet)


def read_records(record: Path) -> tuple[list[Lifetime], list[str]]:
    """Processes' lifetimes from the record file, and anomalies (a run started twice, an end
    without a start)."""
    lifetimes: dict[tuple[str, int], Lifetime] = {}
    anomalies = []
    starts: dict[str, int] = defaultdict(int)
    if not record.exists():
        return [], []
    for line in record.read_text().splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] == "end":
            # Killed while recording its end (the `date` of the record went first): as if
            # it had no end record; the process watch gives it one.
            continue
        if len(parts) != 7:
            anomalies.append(f"malformed record {line!r}")
            continue
        what, job, run, node, cpu, pid, when = parts
        key = (run, int(pid))
        if what == "start":
            starts[run] += 1
            if starts[run] == 2:
                anomalies.append(f"job {job}: run {run[:8]} started more than once")
            lifetimes[key] = Lifetime(job, run, node, int(cpu), int(pid), int(when))
        elif key in lifetimes:
            lifetimes[key].end = int(when)
        else:
            anomalies.append(f"job {job}: run {run[:8]} pid {pid} ended without starting")
    return list(lifetimes.values()), anomalies


class PodWatch:
    """Samples which pod processes of the local executors are alive, every `interval` seconds,
    on a thread: for a process killed without a chance to record its end (SIGKILL), the first
    sample that no longer sees it bounds its end from above."""

    def __init__(self, sandboxes: Callable[[], Iterable[Path]], interval: float = 0.05) -> None:
        self._sandboxes = sandboxes
        self._interval = interval
        self._samples: list[tuple[int, frozenset[int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            alive: set[int] = set()
            for sandbox in self._sandboxes():
                alive.update(live_pods(sandbox))
            self._samples.append((time.time_ns(), frozenset(alive)))
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def gone(self, pid: int, since: int) -> int | None:
        """The first sample after `since` (ns) without `pid`; None if every one has it."""
        samples = list(self._samples)
        i = bisect.bisect_right(samples, since, key=lambda sample: sample[0])
        return next((when for when, alive in samples[i:] if pid not in alive), None)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def close_open(lifetimes: Iterable[Lifetime], watch: PodWatch | None) -> list[str]:
    """Give processes without an end record one: when the watch first missed them (an upper
    bound), or now if they are still alive. Returns what it did, for the record."""
    notes = []
    now = time.time_ns()
    for life in lifetimes:
        if life.end is not None:
            continue
        gone = watch.gone(life.pid, life.start) if watch is not None else None
        if gone is None and _pid_alive(life.pid):
            life.end = now
            notes.append(
                f"job {life.job_id}: run {life.run_id[-12:]} (pid {life.pid}) is still alive"
            )
        else:
            life.end = gone or now
            notes.append(
                f"job {life.job_id}: run {life.run_id[-12:]} (pid {life.pid}) was "
                "killed without SIGTERM (no end record)"
            )
    return notes


def overlapping_runs(lifetimes: Iterable[Lifetime]) -> list[tuple[str, str]]:
    """Jobs two of whose processes were alive at the same moment: (job, what happened)."""
    by_job: dict[str, list[Lifetime]] = defaultdict(list)
    for life in lifetimes:
        by_job[life.job_id].append(life)
    out = []
    for job, lives in sorted(by_job.items()):
        lives.sort(key=lambda life: life.start)
        latest = lives[0]  # of the processes started so far, the one that ends last
        for b in lives[1:]:
            assert latest.end is not None and b.end is not None
            if b.start < latest.end:
                out.append(
                    (
                        job,
                        f"job {job} ran twice at once: run {latest.run_id[-12:]} (pid "
                        f"{latest.pid}) until {(latest.end - b.start) / 1e9:.2f}s after "
                        f"run {b.run_id[-12:]} (pid {b.pid}) started",
                    )
                )
            if b.end > latest.end:
                latest = b
    return out


def peak_cpu(lifetimes: Iterable[Lifetime]) -> dict[str, tuple[int, list[Lifetime]]]:
    """Per node, the most milli-CPU its live processes requested at any instant, and who."""
    changes: dict[str, list[tuple[int, int, Lifetime]]] = defaultdict(list)
    for life in lifetimes:
        assert life.end is not None
        changes[life.node].append((life.start, 1, life))
        changes[life.node].append((life.end, 0, life))  # ends sort before starts at a tie
    peaks = {}
    for node, points in changes.items():
        live: dict[int, Lifetime] = {}
        best = (0, [])
        for _, starting, life in sorted(points, key=lambda p: (p[0], p[1])):
            if starting:
                live[id(life)] = life
                total = sum(x.cpu_m for x in live.values())
                if total > best[0]:
                    best = (total, list(live.values()))
            else:
                live.pop(id(life), None)
        peaks[node] = best
    return peaks


def live_pods(sandbox: Path) -> dict[int, tuple[str, str]]:
    """Processes of the local executor's pods under `sandbox`: pid -> (job id, run id)."""
    found = {}
    needle = str(sandbox).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            data = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle not in data:
            continue
        env = dict(v.split(b"=", 1) for v in data.split(b"\0") if b"=" in v)
        found[int(entry.name)] = (
            env.get(b"ARMADA_JOB_ID", b"?").decode(),
            env.get(b"ARMADA_RUN_ID", b"?").decode(),
        )
    return found
