"""Pod states to run updates, as a table. Each pod is produced by the fake kubelet and read
back through the real `kubernetes` client's deserialisation, as the executor would see it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from armada_core.retry import load_classification
from armada_server.executors.kubernetes.status import State, observe, vanished

from .fake_apiserver import KINDS, FakeApiServer, Target
from .fake_kubelet import FakeKubelet

NS, POD = "default", "armada-job-0"
Script = Callable[[FakeKubelet], None]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer()  # storage only: the table needs no HTTP
    yield server
    server._http.server_close()


def make_pod(fake: FakeApiServer, script: Script, *, containers: int = 1) -> Any:
    kubelet = FakeKubelet(fake)
    if fake.cluster.get("nodes", "", "node-a") is None:
        kubelet.add_node("node-a")
    fake.cluster.remove("pods", (NS, POD))
    body = {
        "metadata": {"name": POD},
        "spec": {
            "containers": [
                {"name": f"c{i}", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                for i in range(containers)
            ],
            "nodeSelector": {"kubernetes.io/hostname": "node-a"},
        },
    }
    fake.api.create(Target(KINDS["pods"], NS, None), body)
    script(kubelet)
    raw = fake.cluster.get("pods", NS, POD)
    kubelet.cluster.on_change.clear()
    return client.ApiClient().deserialize(SimpleNamespace(data=json.dumps(raw)), "V1Pod")


def run(k: FakeKubelet) -> None:
    k.run(NS, POD)


TABLE: list[tuple[str, Script, dict[str, Any]]] = [
    ("bound, containers creating", lambda k: None, {"state": State.PENDING, "node": "node-a"}),
    (
        "unschedulable",
        lambda k: k.unschedulable(NS, POD, message="0/1 nodes: Insufficient"),
        {
            "state": State.STUCK,
            "problem": "unschedulable",
            "reason": "Unschedulable: 0/1 nodes: Insufficient",
        },
    ),
    (
        "image pull back-off",
        lambda k: k.image_pull_error(NS, POD, reason="ImagePullBackOff"),
        {
            "state": State.STUCK,
            "problem": "image-pull",
            "hopeless": False,
            "category": "image-pull",
            "subcategory": "ImagePullBackOff",
        },
    ),
    (
        "invalid image name",
        lambda k: k.image_pull_error(NS, POD, reason="InvalidImageName"),
        {"state": State.STUCK, "problem": "image-pull", "hopeless": True},
    ),
    ("running", run, {"state": State.RUNNING, "node": "node-a"}),
    ("succeeded", lambda k: (run(k), k.succeed(NS, POD)), {"state": State.SUCCEEDED}),
    (
        "exit code and message",
        lambda k: (run(k), k.fail(NS, POD, exit_code=3, message="bad input\n")),
        {
            "state": State.FAILED,
            "exit": {"c0": 3},
            "message": "bad input",
            "condition": "",
            "reason": "container c0 exited with code 3 (Error): bad input",
        },
    ),
    (
        "OOMKilled",
        lambda k: (run(k), k.oom_kill(NS, POD)),
        {"state": State.FAILED, "exit": {"c0": 137}, "condition": "OOMKilled"},
    ),
    (
        "evicted",
        lambda k: (run(k), k.evict(NS, POD)),
        {
            "state": State.FAILED,
            "condition": "Evicted",
            "reason": "Evicted: The node was low on resource: memory.",
        },
    ),
    (
        "deadline exceeded",
        lambda k: (run(k), k.deadline_exceeded(NS, POD)),
        {"state": State.FAILED, "condition": "DeadlineExceeded"},
    ),
    (
        "rejected by the kubelet",
        lambda k: k.reject(NS, POD, reason="OutOfcpu"),
        {"state": State.RETURNED},
    ),
]


@pytest.mark.parametrize(
    ("script", "expected"), [(s, e) for _, s, e in TABLE], ids=[name for name, _, _ in TABLE]
)
def test_pod_states_map_to_run_updates(
    fake: FakeApiServer, script: Script, expected: dict[str, Any]
) -> None:
    seen = observe(make_pod(fake, script))
    assert seen.state is expected["state"]
    for key in ("node", "problem", "hopeless"):
        if key in expected:
            assert getattr(seen, key) == expected[key]
    if seen.state is State.RETURNED or (
        seen.state is State.STUCK and seen.problem == "unschedulable"
    ):
        if "reason" in expected:
            assert seen.reason == expected["reason"]
        return
    if seen.failure is None:
        return
    failure = seen.failure
    if "exit" in expected:
        assert {c.name: c.exit_code for c in failure.containers} == expected["exit"]
    if "message" in expected:
        assert failure.containers[0].message == expected["message"]
    for key in ("condition", "reason", "category", "subcategory"):
        if key in expected:
            assert getattr(failure, key) == expected[key]


def test_operator_categories_label_failures(fake: FakeApiServer) -> None:
    config = load_classification("""
categories:
  - name: cuda
    rules:
      - onTerminationMessage: {pattern: "(?i)cuda error"}
        subcategory: driver
""")
    pod = make_pod(
        fake, lambda k: (run(k), k.fail(NS, POD, exit_code=1, message="CUDA error: no device"))
    )
    failure = observe(pod, config).failure
    assert failure is not None
    assert (failure.category, failure.subcategory) == ("cuda", "driver")


def test_a_vanished_pod_is_returned_before_it_started_and_failed_after() -> None:
    assert vanished(None).state is State.RETURNED
    pending = client.V1Pod(
        spec=client.V1PodSpec(containers=[], node_name="n"),
        status=client.V1PodStatus(phase="Pending"),
    )
    assert vanished(pending).state is State.RETURNED
    running = client.V1Pod(
        spec=client.V1PodSpec(containers=[], node_name="n"),
        status=client.V1PodStatus(phase="Running"),
    )
    seen = vanished(running)
    assert seen.state is State.FAILED and seen.failure is not None
    assert (seen.failure.category, seen.failure.subcategory) == ("internal", "pod_missing")
    drained = client.V1Pod(
        spec=client.V1PodSpec(containers=[], node_name="n"),
        status=(
            client.V1PodStatus(
                phase="Running",
                conditions=[
                    client.V1PodCondition(
                        type="DisruptionTarget",
                        status="True",
                        reason="EvictionByEvictionAPI",
                        message="Eviction API: evicting",
                    )
                ],
            )
        ),
    )
    seen = vanished(drained)
    assert seen.failure is not None and seen.failure.condition == "Evicted"
