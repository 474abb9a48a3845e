"""Every client method against a real server over loopback, with both client flavours."""

from __future__ import annotations

from typing import Any

import pytest

from armada_core.api import health_pb2, submit_pb2
from armada_core.client import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    SpecError,
    gang_items,
    job_item,
    queue,
)
from armada_core.jobs import annotations as ann
from armada_core.retry import load_policy

from .conftest import pod

SERVING = health_pb2.HealthCheckResponse.SERVING


def kinds(messages) -> list[str]:
    return [m.message.WhichOneof("events") for m in messages]


def test_health(any_client: Any) -> None:
    assert any_client.health() == SERVING
    assert any_client.health("Event") == SERVING


def test_queue_crud(any_client: Any) -> None:
    c = any_client
    a = queue(
        "team-a",
        priority_factor=2,
        user_owners=["alice"],
        group_owners=["ml"],
        labels={"cost-centre": "42"},
        retry_policies=["p"],
        permissions=[([("User", "bob"), ("Group", "ops")], ["submit", "cancel"])],
    )
    c.create_queue(a)
    assert c.get_queue("team-a") == a
    with pytest.raises(AlreadyExists) as raised:
        c.create_queue(a)
    assert "team-a" in raised.value.details
    c.update_queue(queue("team-a", priority_factor=5))
    assert c.get_queue("team-a").priority_factor == 5
    failed = c.create_queues([queue("team-a"), queue("team-b"), queue("bad name")])
    assert [(f.queue.name, bool(f.error)) for f in failed] == [("team-a", True), ("bad name", True)]
    failed = c.update_queues([queue("team-b", priority_factor=3), queue("nobody")])
    assert [f.queue.name for f in failed] == ["nobody"]
    assert [q.name for q in c.get_queues()] == ["team-a", "team-b"]
    assert [q.name for q in c.get_queues(num=1)] == ["team-a"]
    c.cordon_queue("team-a")
    assert c.get_queue("team-a").cordoned
    c.uncordon_queue("team-a")
    assert not c.get_queue("team-a").cordoned
    c.delete_queue("team-a")
    with pytest.raises(NotFound):
        c.get_queue("team-a")
    with pytest.raises(NotFound):
        c.delete_queue("team-a")


def test_submit_and_job_queries(any_client: Any) -> None:
    c = any_client
    c.create_queue(queue("q"))
    uri = "airflow://dag/task/1"
    items = [
        job_item(pod(), client_id="one", external_job_uri=uri),
        *gang_items(pod(), replicas=2, client_id="gang"),
    ]
    ids = c.submit_jobs("q", "s", items)
    assert len(set(ids)) == 3
    assert c.submit_jobs("q", "s", items[:1]) == ids[:1]  # client_id deduplicates
    states = c.get_job_status([*ids, "never-seen"])
    assert states == {**dict.fromkeys(ids, submit_pb2.QUEUED), "never-seen": submit_pb2.UNKNOWN}
    assert c.get_job_status_by_external_uri("q", "s", uri) == {ids[0]: submit_pb2.QUEUED}
    details = c.get_job_details(ids[1:], expand_job_spec=True, expand_job_run=True)
    assert set(details) == set(ids[1:])
    spec = details[ids[1]].job_spec
    assert spec.annotations[ann.GANG_ID] == "gang"
    assert spec.pod_specs[0].containers[0].resources.requests["cpu"].string == "100m"
    assert c.get_job_errors(ids) == dict.fromkeys(ids, "")
    assert c.get_job_run_details(["no-such-run"]) == {}
    assert c.get_active_queues() == {"": ["q"]}


def test_cancel_reprioritize_and_preempt(any_client: Any) -> None:
    c = any_client
    c.create_queue(queue("q"))
    a, b, x, y = c.submit_jobs("q", "s", [job_item(pod()) for _ in range(4)])
    assert c.cancel_jobs("q", "s", [a, "unknown"], reason="no longer needed") == [a]
    results = c.reprioritize_jobs("q", "s", 7, [a, b])
    assert results[b] == "" and "cancelled" in results[a]
    assert set(c.reprioritize_jobs("q", "s", 2)) == {a, b, x, y}  # the whole job set
    assert "not running" in c.preempt_jobs("q", "s", [b], reason="make room")[b]
    c.cancel_job_set("q", "s", states=["queued"], reason="tidy up")
    assert set(c.get_job_status([a, b, x, y]).values()) == {submit_pb2.CANCELLED}
    details = c.get_job_details([b])[b]
    assert details.cancel_reason == "tidy up"
    # Queue-wide calls.
    keep, drop = c.submit_jobs(
        "q", "t", [job_item(pod()), job_item(pod(), priority_class="armada-preemptible")]
    )
    c.preempt_on_queue("q", priority_classes=["armada-preemptible"])
    c.cancel_on_queue("q", priority_classes=["armada-preemptible"], states=[submit_pb2.QUEUED])
    assert c.get_job_status([keep, drop]) == {keep: submit_pb2.QUEUED, drop: submit_pb2.CANCELLED}
    with pytest.raises(InvalidArgument) as raised:
        c.cancel_job_set("q", "s", states=["succeeded"])
    assert "SUCCEEDED" in raised.value.details
    with pytest.raises(ValueError, match="unknown job state 'done'"):
        c.cancel_job_set("q", "s", states=["done"])


def test_raw_event_streams(any_client: Any) -> None:
    c = any_client
    c.create_queue(queue("q"))
    [job] = c.submit_jobs("q", "s", [job_item(pod())])
    c.cancel_jobs("q", "s", [job])
    events = list(c.get_job_set_events("q", "s"))
    assert kinds(events) == ["submitted", "queued", "cancelling", "cancelled"]
    assert [m.id for m in c.get_job_set_events("q", "s", from_message_id="2")] == ["3", "4"]
    with pytest.raises(NotFound):
        list(c.get_job_set_events("q", "empty", error_if_missing=True))
    assert kinds(c.follow_events("q", "s", watch=False)) == kinds(events)


def test_retry_policy_crud(any_client: Any) -> None:
    c = any_client
    policy = load_policy("""
kind: RetryPolicy
metadata: {name: gpu}
spec:
  retryLimit: 3
  rules:
    - action: Retry
      onConditions: [OOMKilled]
""")
    c.create_retry_policy(policy)
    with pytest.raises(AlreadyExists):
        c.create_retry_policy(policy)
    stored = c.get_retry_policy("gpu")
    assert stored.retry_limit == 3
    stored.retry_limit = 5
    c.update_retry_policy(stored)
    assert [p.retry_limit for p in c.get_retry_policies()] == [5]
    c.delete_retry_policy("gpu")
    with pytest.raises(NotFound):
        c.get_retry_policy("gpu")
    with pytest.raises(InvalidArgument):
        c.create_retry_policy(submit_pb2.RetryPolicy())


def test_logs_call_reaches_binoculars(any_client: Any) -> None:
    # Without an executor nothing has run: the call, and its error mapping, are still real.
    with pytest.raises(NotFound) as raised:
        any_client.logs("some-job", tail_lines=10, container="main")
    assert raised.value.method == "Binoculars/Logs"
    any_client.create_queue(queue("q"))
    [job] = any_client.submit_jobs("q", "s", [job_item(pod())])
    assert list(any_client.logs(job)) == []  # queued: no run, no log lines yet
    with pytest.raises(NotFound, match="run 'no-such-run' not found"):
        any_client.logs(job, run_id="no-such-run")  # an earlier run (our extension)


def test_nodes(any_client: Any) -> None:
    assert any_client.get_nodes() == []  # no executor: no nodes


def test_submission_is_checked_before_sending(any_client: Any) -> None:
    c = any_client
    c.create_queue(queue("q"))
    bad = job_item({"containers": [{"name": "main", "image": "x"}]}, check=False)
    with pytest.raises(SpecError) as raised:
        c.submit_jobs("q", "s", [job_item(pod()), bad])
    assert raised.value.path == "job_request_items[1].pod_specs[0].containers[0].resources.requests"
    assert list(c.get_job_set_events("q", "s")) == []
    # Without the client-side check the server rejects it the same way.
    with pytest.raises(InvalidArgument) as server_side:
        c.submit_jobs("q", "s", [bad], check=False)
    assert (
        "job_request_items[0].pod_specs[0].containers[0].resources.requests"
        in server_side.value.details
    )
