"""The official `armada-client` from PyPI, unchanged, against a real server.

official_scenarios.py runs in the throwaway environment that holds the official client (it pins
grpcio exactly) and drives our server over loopback gRPC through `ArmadaClient` and
`ArmadaAsyncIOClient`: queue CRUD, submissions built with the client's helpers (a full pod spec
with resources and gang annotations), the job set's event stream read with the client's own
resilient iterator and `unmarshal_event_response` until every job is cancelled, cancel by id and
by job set, reprioritize, preempt, status (unknown ids read UNKNOWN), details, errors and status
by external job URI. It reports what it saw as JSON; this module asserts on it, on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from armada_server.app import EmbeddedServer

pytestmark = pytest.mark.compat

SCENARIOS = Path(__file__).with_name("official_scenarios.py")
PREFIX = "compat"
QUEUE = f"{PREFIX}-main"
JOB_SET = f"{PREFIX}-set"
UNKNOWN_ID = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"
URI = f"airflow://compat/{JOB_SET}/task/1"
GANG = {
    "armadaproject.io/gangId": f"{JOB_SET}-gang",
    "armadaproject.io/gangCardinality": "3",
    "armadaproject.io/gangMinimumCardinality": "2",
    "armadaproject.io/gangNodeUniformityLabel": "zone",
}


def run_official(python: Path, address: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [str(python), str(SCENARIOS)],
        input=json.dumps({"address": address, "prefix": PREFIX}),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the official client's scenario failed:\n{done.stderr}")
    return json.loads(done.stdout)


def error(answer: Any, code: str, *fragments: str) -> None:
    assert isinstance(answer, dict) and answer.get("error") == code, answer
    for fragment in fragments:
        assert fragment in answer["details"], (fragment, answer["details"])


def test_official_client_scenario(database_url: str, official_python: Path) -> None:
    with EmbeddedServer(
        database_url=database_url,
        port=0,
        executor="none",
        scheduling_period=3600,
        max_request_items=5,
    ) as server:
        observed = run_official(official_python, server.address)
        store = server.server.storage
        assert store is not None
        stored_events = store.events.last_seq(QUEUE, JOB_SET)
        stored_async = store.events.last_seq(QUEUE, f"{PREFIX}-async")
    assert observed["health"] == ["SERVING", "SERVING"]
    check_queues(observed["queues"])
    check_jobs(observed["jobs"], stored_events)
    check_async(observed["async"], stored_async)


def check_queues(q: dict[str, Any]) -> None:
    assert q["create"] == {}
    error(q["create_again"], "ALREADY_EXISTS", QUEUE)
    assert q["get"] == {
        "name": QUEUE,
        "priority_factor": 2.0,
        "user_owners": ["alice"],
        "group_owners": ["research"],
        "resource_limits": {"cpu": 0.5},
        "permissions": [
            {
                "subjects": [
                    {"kind": "Group", "name": "research"},
                    {"kind": "User", "name": "bob"},
                ],
                "verbs": ["submit", "cancel", "watch"],
            }
        ],
    }
    assert q["update"] == {}
    # An update replaces the queue: what the new message leaves out is gone.
    assert q["get_updated"] == {
        "name": QUEUE,
        "priority_factor": 3.0,
        "user_owners": ["alice", "carol"],
    }
    error(q["update_missing"], "NOT_FOUND", f"{PREFIX}-ghost")
    assert q["create_default_factor"] == {}
    error(q["create_invalid"], "INVALID_ARGUMENT", "name", "not a name")
    [failed] = q["create_queues"]["failed_queues"]
    assert failed["queue"]["name"] == QUEUE and "already exists" in failed["error"]
    [failed] = q["update_queues"]["failed_queues"]
    assert failed["queue"]["name"] == f"{PREFIX}-ghost" and "not found" in failed["error"]
    listed = {x["name"]: x for x in q["listed"]}
    assert list(listed) == [f"{PREFIX}-extra", QUEUE, f"{PREFIX}-tmp"]
    assert listed[f"{PREFIX}-extra"]["priority_factor"] == 4.0
    assert listed[f"{PREFIX}-tmp"]["priority_factor"] == 1.0
    assert listed[QUEUE] == q["get_updated"]
    assert q["delete"] is None and q["delete_extra"] is None
    error(q["get_deleted"], "NOT_FOUND", f"{PREFIX}-tmp")
    error(q["delete_missing"], "NOT_FOUND", f"{PREFIX}-tmp")
    assert q["listed_after_delete"] == [QUEUE]


def check_jobs(j: dict[str, Any], stored_events: int | None) -> None:
    ids = j["ids"]
    single1, single2, gang1, gang2, gang3, by_field = ids
    error(j["submit_too_many"], "RESOURCE_EXHAUSTED", "6 items", "max_request_items limit of 5")
    assert len(set(ids)) == 6
    assert len(j["submit"]["job_response_items"]) == 4
    # A known client_id answers with the original job, in the request's order.
    assert [i["job_id"] for i in j["resubmit"]["job_response_items"]] == [single2, single1]

    # Invalid requests fail whole, naming the item and the field.
    error(
        j["submit_bad_quantity"],
        "INVALID_ARGUMENT",
        "job_request_items[1].pod_specs[0].containers[0].resources.requests[cpu]",
        "lots",
    )
    error(
        j["submit_bad_gang"],
        "INVALID_ARGUMENT",
        "job_request_items[0].annotations",
        "gangCardinality",
        "two",
    )
    error(
        j["submit_mismatched_gang"],
        "INVALID_ARGUMENT",
        "job_request_items[1]",
        "gangCardinality",
        "'g2'",
    )
    error(
        j["submit_unknown_class"],
        "INVALID_ARGUMENT",
        "job_request_items[0].pod_specs[0].priorityClassName",
        "gold",
    )
    error(j["submit_missing_queue"], "NOT_FOUND", f"{QUEUE}-ghost")
    [live] = j["task_generations"]["first"]["job_response_items"]
    error(j["task_generations"]["second"], "ALREADY_EXISTS", live["job_id"], "compat/task")
    check_kubernetes_refusals(j["kubernetes_refusals"])

    # Queries while the jobs are queued.
    assert j["status"] == {**dict.fromkeys(ids, "QUEUED"), UNKNOWN_ID: "UNKNOWN"}
    details = j["details"]["job_details"]
    assert set(details) == set(ids)
    for job_id, d in details.items():
        assert (d["job_id"], d["queue"], d["jobset"], d["namespace"]) == (
            job_id,
            QUEUE,
            JOB_SET,
            "default",
        )
        assert d.get("state", "QUEUED") == "QUEUED"  # QUEUED is the enum's zero value
        assert d["submitted_ts"] and d["last_transition_ts"]
        assert "cancel_ts" not in d and "latest_run_id" not in d
    assert j["errors"]["job_errors"] == dict.fromkeys([*ids, UNKNOWN_ID], "")
    assert j["by_uri"] == {single1: "QUEUED"}
    assert j["by_uri_field"] == {by_field: "QUEUED"}
    assert j["by_uri_unknown"] == {}
    assert j["run_details"] == {}

    assert j["reprioritize_one"]["reprioritization_results"][single1] == ""
    assert j["reprioritize_one"]["reprioritization_results"][UNKNOWN_ID]
    assert j["reprioritize_set"]["reprioritization_results"] == dict.fromkeys(ids, "")
    assert "not running" in j["preempt_queued"]["preemption_results"][single2]

    # Cancellation by id, then by job set with the official client's state filter.
    assert j["seen_before_cancel"] == 2 * 6 + 2 + 2 * 6
    assert j["cancel_one"]["cancelled_ids"] == [single1]
    assert j["cancel_again"] == {}  # nothing left to cancel: no ids
    assert j["cancel_set"] == {}

    check_watch(j["watch"], ids, stored_events)
    events = j["watch"]["events"]
    resumed = j["resumed"]
    assert resumed["finished"] and resumed["error"] is None, resumed
    assert [e["id"] for e in resumed["events"]] == [e["id"] for e in events[4:]]

    assert j["status_after"] == dict.fromkeys(ids, "CANCELLED")
    for d in j["details_after"]["job_details"].values():
        assert d["state"] == "CANCELLED" and d["cancel_ts"]
    assert j["errors_after"]["job_errors"] == dict.fromkeys(ids, "")
    assert "cancelled" in j["reprioritize_cancelled"]["reprioritization_results"][single1]
    error(j["watch_missing_set"], "NOT_FOUND", f"{JOB_SET}-never")

    # What the official client decodes from the `submitted` events: the whole job.
    submitted = {e["job_id"]: e["job"] for e in events if e["type"] == "submitted"}
    first = submitted[single1]
    assert first["client_id"] == "single-1" and first["labels"] == {"team": "compat"}
    assert first["annotations"] == {"armadaproject.io/externalJobUri": URI}
    assert (first["queue"], first["job_set_id"], first["namespace"]) == (QUEUE, JOB_SET, "default")
    assert first["requests"] == first["limits"] == {"cpu": "500m", "memory": "256Mi"}
    assert first["priority_class"] == "armada-default"  # the default class, filled in
    assert (first["grace"], first["restart_policy"]) == (30, "Never")
    assert first["deadline"] > 0  # the server's default deadline
    assert first["init_containers"] == ["setup"]
    assert first["env"][1] == {
        "name": "POD",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    }
    assert first["volumes"] == [{"name": "scratch", "volumeSource": {"emptyDir": {}}}]
    assert first["node_selector"] == {"pool": "cpu"}
    assert first["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
    ]
    assert first["security_context"] == {"runAsUser": "1000", "runAsNonRoot": True}
    assert first["scheduling_requests"]["cpu"] == "500m"
    assert submitted[single2]["priority_class"] == "armada-preemptible"
    assert submitted[single2]["priority"] == 2.0
    for member in (gang1, gang2, gang3):
        assert submitted[member]["annotations"] == GANG
        assert submitted[member]["requests"] == {"cpu": "2", "memory": "2Gi"}
    assert submitted[by_field]["annotations"] == {"armadaproject.io/externalJobUri": f"{URI}-field"}


def check_kubernetes_refusals(refusals: dict[str, Any]) -> None:
    """What a Kubernetes API server refuses is refused, naming the field first."""
    item = "job_request_items[0]"
    container = f"{item}.pod_specs[0].containers[0]"
    expected = {
        "spaced_cpu": (f"{container}.resources.requests[cpu]: ", "spaces"),
        "gpu_request_below_limit": (
            f"{container}.resources.requests[nvidia.com/gpu]: ",
            "cannot be overcommitted",
        ),
        "billion_gpus": (f"{container}.resources.limits[nvidia.com/gpu]: ", "maximum"),
        "bad_volume_name": (f"{item}.pod_specs[0].volumes[0].name: ", "Bad_Name"),
        "bad_gang_label": (
            f"{item}.annotations[armadaproject.io/gangNodeUniformityLabel]: ",
            "bad label!",
        ),
        "huge_annotation_key": (f"{item}.annotations[kkkk", "10485760 characters"),
    }
    assert set(refusals) == set(expected)
    for name, (field, fragment) in expected.items():
        error(refusals[name], "INVALID_ARGUMENT", fragment)
        assert refusals[name]["details"].startswith(field), (name, refusals[name]["details"])


def check_watch(watch: dict[str, Any], ids: list[str], stored_events: int | None) -> None:
    assert watch["finished"], "the stream did not show every job cancelled in time"
    assert watch["error"] is None, watch["error"]
    events = watch["events"]
    # Message ids are contiguous from the start, and the stream saw the whole log.
    assert [e["id"] for e in events] == [str(n) for n in range(1, len(events) + 1)]
    assert stored_events == len(events)
    assert {(e["queue"], e["job_set_id"]) for e in events} == {(QUEUE, JOB_SET)}
    assert all(e["created"] for e in events)
    per_job: dict[str, list[str]] = defaultdict(list)
    for e in events:
        per_job[e["job_id"]].append(e["type"])
    reprioritized = ["reprioritizing", "reprioritized"]
    assert per_job[ids[0]] == [
        "submitted",
        "queued",
        *reprioritized,
        *reprioritized,
        "cancelling",
        "cancelled",
    ]
    for job_id in ids[1:]:
        assert per_job[job_id] == [
            "submitted",
            "queued",
            *reprioritized,
            "cancelling",
            "cancelled",
        ], job_id
    assert set(per_job) == set(ids)


def check_async(a: dict[str, Any], stored_events: int | None) -> None:
    assert a["health"] == ["SERVING", "SERVING"]
    assert a["queue"]["name"] == QUEUE
    assert a["queues"] == [QUEUE]
    assert a["events"] == ["submitted", "queued", "cancelling", "cancelled"]
    assert stored_events == 4
    assert a["status"] == {a["job_id"]: "CANCELLED", UNKNOWN_ID: "UNKNOWN"}
    assert a["details"]["job_details"][a["job_id"]]["state"] == "CANCELLED"
