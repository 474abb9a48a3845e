"""Every public RPC against a real server over loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from armada_core.api import event_pb2, job_pb2, submit_pb2
from armada_core.api import health_pb2 as armada_health
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.storage import Storage, open_storage

from ..jobs.factories import container, item
from ..together import run_together
from .conftest import Stubs


def submit(api: Stubs, *items, queue: str = "q", job_set: str = "s") -> list[str]:
    response = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(
            queue=queue, job_set_id=job_set, job_request_items=list(items) or [item()]
        )
    )
    return [i.job_id for i in response.job_response_items]


def events(api: Stubs, job_set: str = "s", **kw) -> list[event_pb2.EventStreamMessage]:
    return list(
        api.events.GetJobSetEvents(event_pb2.JobSetRequest(id=job_set, queue="q", **kw), timeout=60)
    )


def kinds(messages) -> list[str]:
    return [m.message.WhichOneof("events") for m in messages]


def code_of(call, *args) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call(*args)
    return raised.value.code(), raised.value.details()


def test_queue_crud(api: Stubs) -> None:
    q = submit_pb2.Queue(name="team-a", priority_factor=2, user_owners=["alice"])
    api.queues.CreateQueue(q)
    assert code_of(api.queues.CreateQueue, q)[0] == grpc.StatusCode.ALREADY_EXISTS
    assert api.queues.GetQueue(submit_pb2.QueueGetRequest(name="team-a")) == q
    api.queues.UpdateQueue(submit_pb2.Queue(name="team-a", priority_factor=5))
    assert api.queues.GetQueue(submit_pb2.QueueGetRequest(name="team-a")).priority_factor == 5
    # Unset priority factor means 1, as upstream.
    api.submit.CreateQueue(submit_pb2.Queue(name="team-b"))
    streamed = list(api.queues.GetQueues(submit_pb2.StreamingQueueGetRequest()))
    assert [m.WhichOneof("event") for m in streamed] == ["queue", "queue", "end"]
    assert [m.queue.name for m in streamed[:2]] == ["team-a", "team-b"]
    assert streamed[1].queue.priority_factor == 1
    api.queues.CordonQueue(submit_pb2.QueueCordonRequest(name="team-a"))
    assert api.queues.GetQueue(submit_pb2.QueueGetRequest(name="team-a")).cordoned
    api.queues.UncordonQueue(submit_pb2.QueueUncordonRequest(name="team-a"))
    assert not api.queues.GetQueue(submit_pb2.QueueGetRequest(name="team-a")).cordoned
    api.queues.DeleteQueue(submit_pb2.QueueDeleteRequest(name="team-a"))
    code, details = code_of(api.queues.GetQueue, submit_pb2.QueueGetRequest(name="team-a"))
    assert code == grpc.StatusCode.NOT_FOUND and "team-a" in details
    assert (
        code_of(api.queues.DeleteQueue, submit_pb2.QueueDeleteRequest(name="team-a"))[0]
        == grpc.StatusCode.NOT_FOUND
    )


def test_batch_queue_calls_report_failures_per_queue(api: Stubs) -> None:
    api.queues.CreateQueue(submit_pb2.Queue(name="a"))
    response = api.queues.CreateQueues(
        submit_pb2.QueueList(
            queues=[
                submit_pb2.Queue(name="a"),
                submit_pb2.Queue(name="b"),
                submit_pb2.Queue(name="bad name"),
            ]
        )
    )
    assert [f.queue.name for f in response.failed_queues] == ["a", "bad name"]
    assert "already exists" in response.failed_queues[0].error
    response = api.queues.UpdateQueues(
        submit_pb2.QueueList(
            queues=[submit_pb2.Queue(name="b", priority_factor=3), submit_pb2.Queue(name="zzz")]
        )
    )
    assert [f.queue.name for f in response.failed_queues] == ["zzz"]


@pytest.mark.parametrize(
    ("queue_msg", "message"),
    [
        (submit_pb2.Queue(name=""), "name: '' is not a valid queue name"),
        (submit_pb2.Queue(name="q", priority_factor=-1), "priority_factor: must be positive"),
        (
            submit_pb2.Queue(
                name="q",
                permissions=[
                    submit_pb2.Queue.Permissions(
                        subjects=[submit_pb2.Queue.Permissions.Subject(kind="Robot", name="r")]
                    )
                ],
            ),
            "permissions[0].subjects[0].kind: must be User or Group",
        ),
        (
            submit_pb2.Queue(name="q", permissions=[submit_pb2.Queue.Permissions(verbs=["eat"])]),
            "permissions[0].verbs: unknown verb 'eat'",
        ),
    ],
)
def test_invalid_queues_are_rejected(api: Stubs, queue_msg, message: str) -> None:
    code, details = code_of(api.queues.CreateQueue, queue_msg)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message in details


def test_submit_stores_jobs_and_streams_their_events(api: Stubs, queue: str) -> None:
    ids = submit(api, item(), item(), item())
    assert len(set(ids)) == 3
    states = api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=[*ids, "nope"])).job_states
    assert dict(states) == {**dict.fromkeys(ids, submit_pb2.QUEUED), "nope": submit_pb2.UNKNOWN}
    got = events(api)
    assert kinds(got) == ["submitted", "queued"] * 3
    assert [int(m.id) for m in got] == list(range(1, 7))
    submitted = got[0].message.submitted
    assert submitted.job_id == ids[0]
    assert submitted.job.pod_specs[0].terminationGracePeriodSeconds == 1
    # Resume strictly after a message id.
    assert [m.id for m in events(api, from_message_id=got[3].id)] == ["5", "6"]


def test_client_id_deduplicates(api: Stubs, queue: str) -> None:
    first = submit(api, item(client_id="abc"), item(client_id="def"))
    again = submit(api, item(client_id="def"), item(client_id="abc"), item(client_id="abc"))
    assert again == [first[1], first[0], first[0]]
    assert len(events(api)) == 4  # nothing new was stored


def test_client_ids_past_the_first_lookup_are_found_too(api: Stubs, queue: str) -> None:
    """The first 500 client ids are looked up with the queue, the rest apart on SQLite: a
    stored job is found in either part, and a queue's client ids are its own."""
    stored = submit(api, *[item(client_id=f"c{n:04}") for n in range(0, 1200, 2)])
    other = submit_pb2.Queue(name="other", priority_factor=1)
    api.queues.CreateQueue(other)
    [elsewhere] = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(
            queue="other", job_set_id="s", job_request_items=[item(client_id="c0001")]
        )
    ).job_response_items
    again = submit(api, *[item(client_id=f"c{n:04}") for n in range(1200)])
    assert again[0::2] == stored
    assert len(set(again[1::2])) == 600 and not set(again[1::2]) & set(stored)
    assert elsewhere.job_id not in again


def test_a_client_id_repeated_in_one_request_is_one_job(api: Stubs, queue: str) -> None:
    first = submit(api, item(client_id="a"))
    ids = submit(api, item(client_id="b"), item(), item(client_id="b"), item(client_id="a"), item())
    assert ids[0] == ids[2] and ids[3] == first[0]
    assert len({ids[0], ids[1], ids[4], first[0]}) == 4
    assert ids[0] < ids[1] < ids[4]  # new jobs' ids increase in the request's order
    submitted = [e.message.submitted.job_id for e in events(api) if e.message.HasField("submitted")]
    assert submitted == [first[0], ids[0], ids[1], ids[4]]


def test_invalid_submission_fails_whole_and_stores_nothing(api: Stubs, queue: str) -> None:
    bad = item({"containers": [container(cpu="lots")]})
    code, details = code_of(
        api.submit.SubmitJobs,
        submit_pb2.JobSubmitRequest(queue="q", job_set_id="s", job_request_items=[item(), bad]),
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "job_request_items[1].pod_specs[0].containers[0].resources.requests[cpu]" in details
    code, _ = code_of(
        api.events.GetJobSetEvents(
            event_pb2.JobSetRequest(id="s", queue="q", errorIfMissing=True)
        ).__next__
    )
    assert code == grpc.StatusCode.NOT_FOUND


def test_submit_to_a_missing_queue(api: Stubs) -> None:
    code, details = code_of(
        api.submit.SubmitJobs,
        submit_pb2.JobSubmitRequest(queue="ghost", job_set_id="s", job_request_items=[item()]),
    )
    assert code == grpc.StatusCode.NOT_FOUND and "ghost" in details


@pytest.mark.slow
def test_ten_thousand_items_in_one_request(api: Stubs, queue: str) -> None:
    items = [item(client_id=f"c{i}") for i in range(10_000)]
    bad = submit_pb2.JobSubmitRequest(
        queue="q", job_set_id="big", job_request_items=[*items, item(priority=-1)]
    )
    assert code_of(api.submit.SubmitJobs, bad)[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert events(api, "big") == []
    ids = submit(api, *items, job_set="big")
    assert len(set(ids)) == 10_000
    assert len(events(api, "big")) == 20_000


def test_watch_delivers_new_events_promptly(api: Stubs, queue: str) -> None:
    [job] = submit(api)
    stream = api.events.GetJobSetEvents(
        event_pb2.JobSetRequest(id="s", queue="q", watch=True), timeout=30
    )
    seen: list[event_pb2.EventStreamMessage] = []
    done = threading.Event()

    def read() -> None:
        for message in stream:
            seen.append(message)
            if message.message.WhichOneof("events") == "cancelled":
                done.set()
                return

    reader = threading.Thread(target=read)
    reader.start()
    while len(seen) < 2:
        time.sleep(0.01)
    api.submit.CancelJobs(
        submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[job], reason="not needed")
    )
    assert done.wait(10)
    stream.cancel()
    reader.join(5)
    assert kinds(seen) == ["submitted", "queued", "cancelling", "cancelled"]
    assert seen[-1].message.cancelled.reason == "not needed"


def test_watch_on_an_empty_job_set_waits_for_its_first_event(api: Stubs, queue: str) -> None:
    stream = api.events.GetJobSetEvents(
        event_pb2.JobSetRequest(id="later", queue="q", watch=True), timeout=30
    )
    first: list[event_pb2.EventStreamMessage] = []
    reader = threading.Thread(target=lambda: first.append(next(stream)))
    reader.start()
    time.sleep(0.2)
    submit(api, job_set="later")
    reader.join(10)
    stream.cancel()
    assert kinds(first) == ["submitted"]


def test_heartbeats_only_for_clients_that_ask(api: Stubs, queue: str) -> None:
    submit(api)
    stream = api.events.GetJobSetEvents(
        event_pb2.JobSetRequest(id="s", queue="q", watch=True),
        timeout=30,
        metadata=[("x-armada-heartbeat", "1")],
    )
    got = [next(stream) for _ in range(3)]
    stream.cancel()
    assert kinds(got) == ["submitted", "queued", None]
    assert got[2].id == "2"


def test_bad_message_id(api: Stubs, queue: str) -> None:
    code, details = code_of(lambda: events(api, from_message_id="abc"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "from_message_id" in details


def test_cancel_reprioritize_and_preempt(api: Stubs, queue: str) -> None:
    a, b, c = submit(api, item(), item(), item())
    cancelled = api.submit.CancelJobs(
        submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[a, "unknown"])
    )
    assert list(cancelled.cancelled_ids) == [a]
    result = api.submit.ReprioritizeJobs(
        submit_pb2.JobReprioritizeRequest(queue="q", job_set_id="s", job_ids=[a, b], new_priority=7)
    )
    assert result.reprioritization_results[b] == ""
    assert "cancelled" in result.reprioritization_results[a]
    details = api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[b], expand_job_spec=True))
    assert details.job_details[b].job_spec.id == b
    preempted = api.submit.PreemptJobs(
        submit_pb2.JobPreemptRequest(queue="q", job_set_id="s", job_ids=[c])
    )
    assert "not running" in preempted.preemption_results[c]
    api.submit.CancelJobSet(
        submit_pb2.JobSetCancelRequest(
            queue="q", job_set_id="s", filter=submit_pb2.JobSetFilter(states=[submit_pb2.QUEUED])
        )
    )
    states = api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=[a, b, c])).job_states
    assert set(states.values()) == {submit_pb2.CANCELLED}
    assert kinds(events(api))[-4:] == ["cancelling", "cancelled", "cancelling", "cancelled"]
    reprioritized = [
        m.message.reprioritized
        for m in events(api)
        if m.message.WhichOneof("events") == "reprioritized"
    ]
    assert [r.new_priority for r in reprioritized] == [7]


def test_cancel_set_rejects_states_jobs_cannot_be_cancelled_in(api: Stubs, queue: str) -> None:
    code, details = code_of(
        api.submit.CancelJobSet,
        submit_pb2.JobSetCancelRequest(
            queue="q", job_set_id="s", filter=submit_pb2.JobSetFilter(states=[submit_pb2.SUCCEEDED])
        ),
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "SUCCEEDED" in details


def test_cancel_on_queue_by_priority_class(api: Stubs, queue: str) -> None:
    low = item({"containers": [container()], "priorityClassName": "armada-preemptible"})
    keep, drop = submit(api, item(), low)
    api.queues.CancelOnQueue(
        submit_pb2.QueueCancelRequest(name="q", priorityClasses=["armada-preemptible"])
    )
    states = api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=[keep, drop])).job_states
    assert states[keep] == submit_pb2.QUEUED and states[drop] == submit_pb2.CANCELLED


def test_job_queries(api: Stubs, queue: str) -> None:
    uri = "airflow://dag/task/1"
    [job] = submit(
        api, item(external_job_uri=uri, annotations={ann.GANG_ID: "g", ann.GANG_CARDINALITY: "1"})
    )
    by_uri = api.jobs.GetJobStatusUsingExternalJobUri(
        job_pb2.JobStatusUsingExternalJobUriRequest(queue="q", jobset="s", external_job_uri=uri)
    )
    assert dict(by_uri.job_states) == {job: submit_pb2.QUEUED}
    details = api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[job, "x"]))
    d = details.job_details[job]
    assert (d.queue, d.jobset, d.state, d.latest_run_id) == ("q", "s", submit_pb2.QUEUED, "")
    assert not d.HasField("job_spec") and "x" not in details.job_details
    assert dict(api.jobs.GetJobErrors(job_pb2.JobErrorsRequest(job_ids=[job])).job_errors) == {
        job: ""
    }
    assert (
        api.jobs.GetJobRunDetails(job_pb2.JobRunDetailsRequest(run_ids=["r"]))
        == job_pb2.JobRunDetailsResponse()
    )
    active = api.jobs.GetActiveQueues(job_pb2.GetActiveQueuesRequest()).active_queues_by_pool
    assert list(active[""].queues) == ["q"]


def test_retry_policy_crud(api: Stubs) -> None:
    policy = submit_pb2.RetryPolicy(
        name="p",
        retry_limit=3,
        rules=[submit_pb2.RetryRule(action=submit_pb2.RETRY_ACTION_RETRY, on_category="oom")],
    )
    api.policies.CreateRetryPolicy(policy)
    assert code_of(api.policies.CreateRetryPolicy, policy)[0] == grpc.StatusCode.ALREADY_EXISTS
    assert api.policies.GetRetryPolicy(submit_pb2.RetryPolicyGetRequest(name="p")) == policy
    policy.retry_limit = 5
    api.policies.UpdateRetryPolicy(policy)
    listed = api.policies.GetRetryPolicies(submit_pb2.RetryPolicyListRequest())
    assert [p.retry_limit for p in listed.retry_policies] == [5]
    api.policies.DeleteRetryPolicy(submit_pb2.RetryPolicyDeleteRequest(name="p"))
    assert (
        code_of(api.policies.GetRetryPolicy, submit_pb2.RetryPolicyGetRequest(name="p"))[0]
        == grpc.StatusCode.NOT_FOUND
    )


def test_health_and_reflection(api: Stubs) -> None:
    serving = armada_health.HealthCheckResponse.SERVING
    assert api.submit.Health(empty_pb2.Empty()).status == serving
    assert api.events.Health(empty_pb2.Empty()).status == serving
    checker = health_pb2_grpc.HealthStub(api.channel)
    for service in ("", "api.Submit", "api.Event"):
        answer = checker.Check(health_pb2.HealthCheckRequest(service=service))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(api.channel)
    [answer] = list(
        stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    )
    names = {s.name for s in answer.list_services_response.service}
    assert {"api.Submit", "api.QueueService", "api.Event", "api.Jobs"} <= names


@pytest.mark.postgres
def test_watchers_are_woken_by_another_replica(postgres_server) -> None:
    url = postgres_server.new_database()
    with (
        EmbeddedServer(database_url=url, heartbeat_seconds=120) as a,
        EmbeddedServer(database_url=url, heartbeat_seconds=120) as b,
        grpc.insecure_channel(a.address) as ca,
        grpc.insecure_channel(b.address) as cb,
    ):
        from armada_core.api import event_pb2_grpc, submit_pb2_grpc

        submit_pb2_grpc.QueueServiceStub(cb).CreateQueue(submit_pb2.Queue(name="q"))
        stream = event_pb2_grpc.EventStub(ca).GetJobSetEvents(
            event_pb2.JobSetRequest(id="s", queue="q", watch=True), timeout=30
        )
        got: list[float] = []
        reader = threading.Thread(target=lambda: got.append((next(stream), time.monotonic())[1]))
        reader.start()
        time.sleep(0.3)
        sent = time.monotonic()
        submit_pb2_grpc.SubmitStub(cb).SubmitJobs(
            submit_pb2.JobSubmitRequest(queue="q", job_set_id="s", job_request_items=[item()])
        )
        reader.join(20)
        stream.cancel()
    # Delivered on the other replica's notification, not on the 120 s re-read.
    assert got and got[0] - sent < 10


def _submit_together(replicas: list[Storage], job_set: str, client_ids: list[str]) -> None:
    """Four threads, two per replica, submit the client ids at once, two in reverse order;
    each gets the same job per client id, stored once with its two events."""
    answers: dict[int, dict[str, str]] = {}

    def one(k: int) -> None:
        order = client_ids[::-1] if k % 2 else client_ids
        ids = replicas[k % 2].submissions.submit(
            "q", job_set, [item(client_id=c) for c in order], owner="a"
        )
        answers[k] = dict(zip(order, ids, strict=True))

    run_together(one, 4)
    assert answers[0] == answers[1] == answers[2] == answers[3]
    stored = replicas[1].events.events_after("q", job_set, 0, 10_000)
    kinds = [event_pb2.EventMessage.FromString(e.payload).WhichOneof("events") for e in stored]
    assert kinds.count("submitted") == kinds.count("queued") == len(client_ids)
    assert len(kinds) == 2 * len(client_ids)


def test_replicas_submitting_the_same_client_ids_at_once_store_each_once(
    database_url: str,
) -> None:
    """Two replicas' storage on one database, five rounds of four threads submitting the same
    200 client ids at once. On PostgreSQL a loser's insert meets the winner's row and looks
    again, and no two inserts deadlock (each inserts in client-id order); on SQLite the
    second transaction waits and finds it."""
    replicas = [open_storage(database_url), open_storage(database_url)]
    try:
        replicas[0].queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        for round_ in range(5):
            _submit_together(replicas, f"s{round_}", [f"r{round_}-c{i}" for i in range(200)])
        counts = replicas[1].job_reads.count_jobs_by_queue_and_state()
        assert sum(n for (queue, _), n in counts.items() if queue == "q") == 1_000
    finally:
        for replica in replicas:
            replica.engine.dispose()
