"""Crash safety: SIGKILL the real `armada-server` process in the middle of a stream of
submissions, restart it on the same database, and check what survived.

Several client threads submit requests of many items each (every item with its own client_id)
into a few shared job sets. When enough requests were acknowledged the server is killed with
SIGKILL, while requests are still in flight. After each crash the database must hold:

- every job whose request the client saw acknowledged, exactly once, under the job id the
  client was given;
- no part of any request: each request's items are all present or all absent (a request in
  flight at the kill may have committed or not, never half);
- a consistent event log per job set: message numbers 1..last without gaps, and each stored
  job with exactly its `submitted` then `queued` event, and no event for a job not stored.

The restarted server must then serve the same answers: the same ids for resubmitted client ids,
the same log over GetJobSetEvents. Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import select

from armada_core.api import (
    event_pb2,
    event_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_server.storage import schema as t
from armada_server.storage.database import make_engine

from ..jobs.factories import item

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

QUEUE = "crash"
JOB_SETS = ("set-a", "set-b", "set-c")
ITEMS_PER_REQUEST = 100
WORKERS = 3
# Kill once this many requests of the current round were acknowledged.
KILL_AFTER = (12, 20)
LISTENING = re.compile(r"listening on (\S+):(\d+)")
LOST = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.CANCELLED,
}


def server_command() -> list[str]:
    script = Path(sys.executable).parent / "armada-server"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "armada_server.cli"]


class ServerProcess:
    """`armada-server` as a child process; `address` once it printed its listening line."""

    def __init__(self, database_url: str, log: Path) -> None:
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [
                *server_command(),
                "--port",
                "0",
                "--database-url",
                database_url,
                "--executor",
                "none",
                "--scheduling-period",
                "3600",
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self.proc.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(60)
        match = LISTENING.search(line[0]) if line else None
        if match is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"armada-server did not start: {line!r}, see {log}")
        self.address = f"{match.group(1)}:{match.group(2)}"

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(30) == -signal.SIGKILL
        self.close()

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass  # close() kills it; a slow shutdown is not what this test is about
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


@dataclass
class Record:
    """What the clients sent and which answers they saw, by request name."""

    job_set: dict[str, str] = field(default_factory=dict)  # every request sent
    acked: dict[str, list[str]] = field(default_factory=dict)  # request -> job ids
    lock: threading.Lock = field(default_factory=threading.Lock)

    def client_ids(self, name: str) -> list[str]:
        return [f"{name}-{k}" for k in range(ITEMS_PER_REQUEST)]


TEMPLATE = item()


def make_request(name: str, job_set: str) -> submit_pb2.JobSubmitRequest:
    items = []
    for k in range(ITEMS_PER_REQUEST):
        one = submit_pb2.JobSubmitRequestItem()
        one.CopyFrom(TEMPLATE)
        one.client_id = f"{name}-{k}"
        items.append(one)
    return submit_pb2.JobSubmitRequest(queue=QUEUE, job_set_id=job_set, job_request_items=items)


def submitter(address: str, prefix: str, record: Record, stop: threading.Event) -> None:
    """Submit requests one after another until the server stops answering."""
    with grpc.insecure_channel(address) as channel:
        stub = submit_pb2_grpc.SubmitStub(channel)
        r = 0
        while not stop.is_set():
            name = f"{prefix}r{r}"
            job_set = JOB_SETS[r % len(JOB_SETS)]
            request = make_request(name, job_set)
            with record.lock:
                record.job_set[name] = job_set
            try:
                response = stub.SubmitJobs(request, timeout=60)
            except grpc.RpcError as e:
                # The server died: refused, or the stream torn down under the call.
                assert e.code() in LOST, (e.code(), e.details())
                return
            ids = [i.job_id for i in response.job_response_items]
            assert len(ids) == ITEMS_PER_REQUEST
            with record.lock:
                record.acked[name] = ids
            r += 1


def submit_until_killed(server: ServerProcess, record: Record, round_: int) -> None:
    stop = threading.Event()
    before = len(record.acked)
    threads = [
        threading.Thread(target=submitter, args=(server.address, f"c{round_}w{w}", record, stop))
        for w in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120
    while len(record.acked) - before < KILL_AFTER[round_] and time.monotonic() < deadline:
        time.sleep(0.002)
    assert all(thread.is_alive() for thread in threads), "a submitter stopped early"
    server.kill()  # in the middle: every submitter has a request in flight or about to be
    stop.set()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()


@dataclass
class Stored:
    jobs: dict[str, tuple[str, str]]  # client_id -> (job id, job set)
    events: dict[str, list[tuple[int, str, str]]]  # job set -> [(seq, job id, kind)]
    last_seq: dict[str, int]


def read_database(url: str) -> Stored:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            jobs: dict[str, tuple[str, str]] = {}
            rows = conn.execute(
                select(t.jobs.c.client_id, t.jobs.c.id, t.jobs.c.job_set, t.jobs.c.queue)
            ).all()
            for client_id, job_id, job_set, queue in rows:
                assert queue == QUEUE
                assert client_id not in jobs, f"client_id {client_id} stored twice"
                jobs[client_id] = (job_id, job_set)
            events: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
            for job_set, seq, job_id, payload in conn.execute(
                select(
                    t.events.c.job_set, t.events.c.seq, t.events.c.job_id, t.events.c.payload
                ).order_by(t.events.c.job_set, t.events.c.seq)
            ):
                message = event_pb2.EventMessage.FromString(payload)
                kind = message.WhichOneof("events")
                assert getattr(message, kind).job_id == job_id
                events[job_set].append((seq, job_id, kind))
            last_seq = dict(conn.execute(select(t.job_sets.c.name, t.job_sets.c.last_seq)).all())
    finally:
        engine.dispose()
    return Stored(jobs, dict(events), last_seq)


def check_consistent(stored: Stored, record: Record) -> None:
    """The database after a crash: acknowledged jobs once, no partial request, sound logs."""
    assert len({job_id for job_id, _ in stored.jobs.values()}) == len(stored.jobs)
    # Acknowledged requests: every item present, under the id the client was given.
    for name, ids in record.acked.items():
        got = [stored.jobs.get(c, (None, None)) for c in record.client_ids(name)]
        assert [job_id for job_id, _ in got] == ids, f"acknowledged request {name} lost jobs"
        assert {job_set for _, job_set in got} == {record.job_set[name]}
    # Every request sent: all or nothing.
    present = defaultdict(int)
    for client_id in stored.jobs:
        present[client_id.rsplit("-", 1)[0]] += 1
    assert set(present) <= set(record.job_set), "jobs from requests nobody sent"
    partial = {name: n for name, n in present.items() if n != ITEMS_PER_REQUEST}
    assert not partial, f"partially stored requests: {partial}"
    # Event logs: contiguous numbers, submitted then queued for exactly the stored jobs.
    jobs_by_set: dict[str, set[str]] = defaultdict(set)
    for job_id, job_set in stored.jobs.values():
        jobs_by_set[job_set].add(job_id)
    assert set(stored.events) == set(jobs_by_set) == set(stored.last_seq)
    for job_set, log in stored.events.items():
        seqs = [seq for seq, _, _ in log]
        assert seqs == list(range(1, len(log) + 1)), f"{job_set}: gaps in message numbers"
        assert stored.last_seq[job_set] == len(log)
        kinds: dict[str, list[str]] = defaultdict(list)
        for _, job_id, kind in log:
            kinds[job_id].append(kind)
        assert set(kinds) == jobs_by_set[job_set]
        wrong = {j: k for j, k in kinds.items() if k != ["submitted", "queued"]}
        assert not wrong, f"{job_set}: jobs with other events than submitted+queued: {wrong}"


def check_served(address: str, stored: Stored, record: Record) -> None:
    """The restarted server answers from what survived."""
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        acked_ids = [j for ids in record.acked.values() for j in ids]
        states = (
            job_pb2_grpc.JobsStub(channel)
            .GetJobStatus(job_pb2.JobStatusRequest(job_ids=acked_ids), timeout=60)
            .job_states
        )
        assert set(states.values()) == {submit_pb2.QUEUED}
        events = event_pb2_grpc.EventStub(channel)
        for job_set, log in stored.events.items():
            streamed = [
                (int(m.id), m.message.WhichOneof("events"))
                for m in events.GetJobSetEvents(
                    event_pb2.JobSetRequest(queue=QUEUE, id=job_set, watch=False), timeout=60
                )
            ]
            assert streamed == [(seq, kind) for seq, _, kind in log]


def resubmit_all(address: str, record: Record) -> None:
    """Resubmitting every request: acknowledged ones answer their ids, the rest complete."""
    with grpc.insecure_channel(address) as channel:
        stub = submit_pb2_grpc.SubmitStub(channel)
        for name, job_set in sorted(record.job_set.items()):
            response = stub.SubmitJobs(make_request(name, job_set), timeout=60)
            ids = [i.job_id for i in response.job_response_items]
            if name in record.acked:
                assert ids == record.acked[name], f"{name} answered new ids after the crash"
            record.acked[name] = ids


def test_sigkill_during_submissions(database_url: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    record = Record()
    server = ServerProcess(database_url, log)
    try:
        with grpc.insecure_channel(server.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(
                submit_pb2.Queue(name=QUEUE, priority_factor=1), timeout=30
            )
        for round_ in range(len(KILL_AFTER)):
            if round_:
                server = ServerProcess(database_url, log)
            submit_until_killed(server, record, round_)
            stored = read_database(database_url)
            check_consistent(stored, record)
        unacknowledged = set(record.job_set) - set(record.acked)
        assert unacknowledged, "no request was in flight at the kills"
        server = ServerProcess(database_url, log)
        check_served(server.address, stored, record)
        resubmit_all(server.address, record)
        final = read_database(database_url)
        check_consistent(final, record)
        assert len(final.jobs) == ITEMS_PER_REQUEST * len(record.job_set)
        server.terminate()
    finally:
        server.close()
