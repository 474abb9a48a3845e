"""Submission limits: jobs waiting per queue, and one request's items and bytes. Each is
refused with RESOURCE_EXHAUSTED naming the limit and its value, and stores nothing."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from armada_core.api import submit_pb2, submit_pb2_grpc
from armada_core.api.k8s import core_v1_pb2 as core
from armada_core.api.k8s import resource_pb2
from armada_core.jobs import JobState
from armada_server.app import EmbeddedServer
from armada_server.config import ConfigError, ServerConfig
from armada_server.errors import ResourceExhausted
from armada_server.storage import open_storage, queue_limit, submission

from ..together import run_together

WAITING_STATES = (JobState.SUBMITTED, JobState.QUEUED)


def item(client_id: str = "") -> submit_pb2.JobSubmitRequestItem:
    cpu = {"cpu": resource_pb2.Quantity(string="1"), "memory": resource_pb2.Quantity(string="1Gi")}
    container = core.Container(
        name="main",
        image="busybox",
        command=["true"],
        resources=core.ResourceRequirements(requests=cpu, limits=cpu),
    )
    return submit_pb2.JobSubmitRequestItem(
        priority=1,
        namespace="default",
        client_id=client_id,
        pod_specs=[core.PodSpec(containers=[container], restartPolicy="Never")],
    )


@pytest.fixture
def submit(database_url: str) -> Iterator[submit_pb2_grpc.SubmitStub]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        max_queued_jobs_per_queue=5,
        max_request_items=4,
        max_request_bytes=4096,
    )
    with EmbeddedServer(config, cycles=False) as server:
        channel = grpc.insecure_channel(server.address)
        submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(
            submit_pb2.Queue(name="q", priority_factor=1)
        )
        submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(
            submit_pb2.Queue(name="other", priority_factor=1)
        )
        yield submit_pb2_grpc.SubmitStub(channel)
        channel.close()


def send(
    stub: submit_pb2_grpc.SubmitStub, items: list[submit_pb2.JobSubmitRequestItem], queue: str = "q"
) -> list[str]:
    request = submit_pb2.JobSubmitRequest(queue=queue, job_set_id="s", job_request_items=items)
    return [r.job_id for r in stub.SubmitJobs(request).job_response_items]


def refused(stub: submit_pb2_grpc.SubmitStub, items: list[submit_pb2.JobSubmitRequestItem]) -> str:
    with pytest.raises(grpc.RpcError) as raised:
        send(stub, items)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    return str(raised.value.details())


def test_queue_limit_refuses_the_request_that_would_pass_it_and_stores_none_of_it(
    submit: submit_pb2_grpc.SubmitStub,
) -> None:
    first = send(submit, [item(f"a{k}") for k in range(3)])
    message = refused(submit, [item(f"b{k}") for k in range(3)])
    assert "max_queued_jobs_per_queue limit of 5" in message
    assert "'q'" in message and "3 new jobs" in message
    # Nothing of the refused request was stored: two more still fit, exactly to the limit.
    send(submit, [item("c0"), item("c1")])
    # Repeated client ids are not new jobs: they return their jobs at the limit.
    assert send(submit, [item("a0"), item("a1"), item("a2")]) == first
    assert "at least 5 jobs waiting" in refused(submit, [item("d0")])
    # The limit is per queue.
    assert len(send(submit, [item("e0"), item("e1"), item("e2")], queue="other")) == 3


def test_request_item_and_byte_limits_name_the_limit(
    submit: submit_pb2_grpc.SubmitStub,
) -> None:
    message = refused(submit, [item() for _ in range(5)])
    assert message.startswith("job_request_items: 5 items")
    assert "max_request_items limit of 4" in message
    big = item()
    big.annotations["note"] = "x" * 5000
    assert "max_request_bytes limit of 4096" in refused(submit, [big])
    assert len(send(submit, [item() for _ in range(4)])) == 4


@pytest.mark.parametrize(
    ("setting", "value", "error"),
    [
        ("max_queued_jobs_per_queue", 0, "max_queued_jobs_per_queue: must be at least 1"),
        ("max_request_items", "many", "max_request_items: must be a whole number or null"),
        ("max_request_bytes", 1 << 30, "max_request_bytes: must be at most 268435456"),
    ],
)
def test_limits_are_checked_at_start(setting: str, value: object, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        ServerConfig(**{setting: value}).validate()  # type: ignore[arg-type]


def test_replicas_submitting_at_once_never_pass_the_queue_limit(database_url: str) -> None:
    """Two replicas' storage on one database, eight threads submitting requests of three jobs
    to one queue at once until refused: the queue's waiting jobs end exactly at the limit or
    within a request of it, never over, and every request is stored whole or not at all."""
    limit = 60
    replicas = [open_storage(database_url), open_storage(database_url)]
    try:
        replicas[0].queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        accepted: list[int] = []

        def one(k: int) -> None:
            with pytest.raises(ResourceExhausted, match=f"limit of {limit}"):
                while True:
                    items = [item() for _ in range(3)]
                    replicas[k % 2].submissions.submit(
                        "q", f"s{k}", items, owner="u", max_queued=limit
                    )
                    accepted.append(k)

        run_together(one, 8)
        counts = replicas[1].job_reads.count_jobs_by_queue_and_state()
        stored = sum(n for (queue, _), n in counts.items() if queue == "q")
        assert stored == 3 * len(accepted)
        assert limit - 3 < stored <= limit
    finally:
        for replica in replicas:
            replica.engine.dispose()


def test_jobs_written_between_the_count_and_the_transaction_are_counted_in_it(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission counts its queue's waiting jobs before its transaction and completes the
    count in it with the jobs written since: another replica's jobs stored in between are
    counted, so the request they leave no room for is refused."""
    limit = 6
    replicas = [open_storage(database_url), open_storage(database_url)]
    try:
        replicas[0].queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        replicas[0].submissions.submit("q", "s", [item(), item()], owner="u", max_queued=limit)
        counted_before = queue_limit.counted_before

        def counted_then_another_replica_submits(*args: Any) -> tuple[int, int] | None:
            found = counted_before(*args)
            monkeypatch.setattr(submission, "counted_before", counted_before)
            replicas[1].submissions.submit("q", "t", [item(), item()], owner="u", max_queued=limit)
            return found

        monkeypatch.setattr(submission, "counted_before", counted_then_another_replica_submits)
        with pytest.raises(ResourceExhausted, match="at least 4 jobs waiting"):
            replicas[0].submissions.submit("q", "s", [item()] * 3, owner="u", max_queued=limit)
        replicas[0].submissions.submit("q", "s", [item(), item()], owner="u", max_queued=limit)
        counts = replicas[1].job_reads.count_jobs_by_queue_and_state()
        assert sum(n for (queue, _), n in counts.items() if queue == "q") == limit
    finally:
        for replica in replicas:
            replica.engine.dispose()


@pytest.mark.parametrize("fresh", [0.0, 1e9], ids=["read-before", "in-transaction-alone"])
@pytest.mark.parametrize("recount", [0.0, 1e9], ids=["counted-every-time", "counted-once"])
def test_the_limit_decides_as_a_count_of_the_waiting_jobs_would(
    database_url: str, monkeypatch: pytest.MonkeyPatch, recount: float, fresh: float
) -> None:
    """Random requests from two replicas and cancels, one at a time, with each queue's
    backlog counted again at every submission or only once (then completed with the waiting
    jobs written since), before the transaction or in it alone: each request is accepted
    exactly when the queue's waiting jobs and its own fit the limit, whatever was written
    since the count."""
    monkeypatch.setattr(queue_limit, "RECOUNT_SECONDS", recount)
    monkeypatch.setattr(queue_limit, "FRESH_SECONDS", fresh)
    limit = 20
    rng = random.Random(7)
    replicas = [open_storage(database_url), open_storage(database_url)]
    try:
        replicas[0].queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        live: list[str] = []
        decided = Counter[bool]()
        for step in range(80):
            replica = replicas[rng.randrange(2)]
            counts = replica.job_reads.count_jobs_by_queue_and_state()
            waiting = sum(counts.get(("q", state), 0) for state in WAITING_STATES)
            if live and rng.random() < 0.3:
                gone = rng.sample(live, rng.randint(1, len(live)))
                replica.submissions.cancel("q", "s", gone)
                live = [job for job in live if job not in gone]
                continue
            new = rng.randint(1, 6)
            try:
                live += replica.submissions.submit(
                    "q", "s", [item() for _ in range(new)], owner="u", max_queued=limit
                )
                accepted = True
            except ResourceExhausted:
                accepted = False
            assert accepted == (waiting + new <= limit), (step, waiting, new)
            decided[accepted] += 1
        assert decided[True] > 10 and decided[False] > 10  # both sides of the limit were met
    finally:
        for replica in replicas:
            replica.engine.dispose()


def test_a_count_reads_only_what_was_written_since_the_last_submission(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between counts of a queue's backlog, each submission keeps the count its transaction
    completed: the next submission's count before its transaction reads only the waiting
    jobs written since that commit, not every job since the backlog was counted. (SQLite's
    clock moves past the request's own jobs; PostgreSQL's mark is the oldest transaction
    running, its own among them, so its count reads the last request's jobs again.)"""
    monkeypatch.setattr(queue_limit, "RECOUNT_SECONDS", 1e9)
    monkeypatch.setattr(queue_limit, "FRESH_SECONDS", 0.0)  # read before each transaction
    read: list[int] = []
    waiting_since = queue_limit._waiting_since

    def recorded(*args: Any) -> tuple[int, int]:
        found = waiting_since(*args)
        read.append(found[0])
        return found

    storage = open_storage(database_url)
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        storage.submissions.submit("q", "s", [item(), item()], owner="u", max_queued=100)
        monkeypatch.setattr(queue_limit, "_waiting_since", recorded)
        for _ in range(5):
            storage.submissions.submit("q", "s", [item(), item()], owner="u", max_queued=100)
        before, within = read[0::2], read[1::2]  # each submission: before, then in its own
        again = 0 if storage.transactions.dialect == "sqlite" else 2
        assert before == [again] * 5
        assert within == [2] * 5  # its own new jobs
        kept = storage.submissions._counts["q"][1]
        assert kept == 12 if storage.transactions.dialect == "sqlite" else kept >= 12
    finally:
        storage.engine.dispose()


def test_a_count_kept_just_now_is_completed_in_the_transaction_alone(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue's submissions in quick succession read nothing before their transactions:
    each completes the count the one before it kept with what was written since, in its
    own transaction, and still refuses the request that the waiting jobs leave no room for."""
    monkeypatch.setattr(queue_limit, "FRESH_SECONDS", 1e9)
    storage = open_storage(database_url)
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        storage.submissions.submit("q", "s", [item(), item()], owner="u", max_queued=7)
        reads = 0
        read = storage.transactions.read

        def counted(**kwargs: Any) -> Any:
            nonlocal reads
            reads += 1
            return read(**kwargs)

        monkeypatch.setattr(storage.transactions, "read", counted)
        for _ in range(2):
            storage.submissions.submit("q", "s", [item(), item()], owner="u", max_queued=7)
        with pytest.raises(ResourceExhausted, match="limit of 7"):
            storage.submissions.submit("q", "s", [item(), item()], owner="u", max_queued=7)
        assert reads == 0
        storage.submissions.submit("q", "s", [item()], owner="u", max_queued=7)
        counts = storage.job_reads.count_jobs_by_queue_and_state()
        assert sum(n for (queue, _), n in counts.items() if queue == "q") == 7
    finally:
        storage.engine.dispose()


def test_a_request_of_more_new_jobs_than_the_limit_is_refused_before_it_is_written(
    database_url: str,
) -> None:
    storage = open_storage(database_url)
    try:
        storage.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        with pytest.raises(ResourceExhausted) as refused:
            storage.submissions.submit(
                "q", "s", [item() for _ in range(4)], owner="u", max_queued=3
            )
        assert str(refused.value) == (
            "this request's 4 new jobs for queue 'q' are more than the server's "
            "max_queued_jobs_per_queue limit of 3: submit them in smaller requests"
        )
        assert storage.job_reads.count_jobs_by_queue_and_state() == {}
    finally:
        storage.engine.dispose()
