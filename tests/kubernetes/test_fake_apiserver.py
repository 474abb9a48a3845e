"""The fake API server, checked through the real `kubernetes` client: if these hold, the
executor's tests exercise the same requests, responses and watch semantics as a cluster."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client, watch

from .fake_apiserver import FakeApiServer
from .fake_kubelet import FakeKubelet

NS = "default"


@pytest.fixture
def core(fake: FakeApiServer) -> Iterator[client.CoreV1Api]:
    yield client.CoreV1Api(fake.api_client())


def pod(name: str, **labels: str) -> dict:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def error(call) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    with pytest.raises(client.ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body)


def test_create_get_list_and_errors(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, pod("a", app="x"))
    assert created.metadata.uid and created.status.phase == "Pending"
    assert created.spec.termination_grace_period_seconds == 30  # defaulted
    assert core.read_namespaced_pod("a", NS).metadata.uid == created.metadata.uid
    status, body = error(lambda: core.create_namespaced_pod(NS, pod("a")))
    assert (status, body["reason"], body["kind"]) == (409, "AlreadyExists", "Status")
    status, body = error(lambda: core.read_namespaced_pod("nope", NS))
    assert (status, body["reason"], body["details"]["name"]) == (404, "NotFound", "nope")
    status, body = error(
        lambda: core.create_namespaced_pod(
            NS, {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "main"}]}}
        )
    )
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.containers[0].image"
    status, _ = error(lambda: core.create_namespaced_pod("missing", pod("c")))
    assert status == 404
    status, _ = error(lambda: core.create_namespaced_pod(NS, pod("d", bad="not ok/")))
    assert status == 422


def test_selectors(core: client.CoreV1Api, fake: FakeApiServer) -> None:
    kubelet = FakeKubelet(fake)
    kubelet.add_node("n1")
    core.create_namespaced_pod(NS, pod("a", app="x", tier="web"))
    core.create_namespaced_pod(NS, pod("b", app="y"))

    def names(**kw):
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kw).items]

    assert names(label_selector="app=x") == ["a"]
    assert names(label_selector="app!=x") == ["b"]
    assert names(label_selector="app in (x, y),!tier") == ["b"]
    assert names(label_selector="tier") == ["a"]
    kubelet.run(NS, "a")
    assert names(field_selector="status.phase=Running") == ["a"]
    assert names(field_selector="status.phase!=Running,spec.nodeName=n1") == ["b"]
    status, body = error(lambda: names(field_selector="spec.image=x"))
    assert (status, body["reason"]) == (400, "BadRequest")


def test_watch_events_follow_the_selector(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a", app="x"))
    start = core.list_namespaced_pod(NS, label_selector="app=x").metadata.resource_version
    seen: list[tuple[str, str]] = []

    def follow() -> None:
        for e in watch.Watch().stream(
            core.list_namespaced_pod,
            NS,
            label_selector="app=x",
            resource_version=start,
            timeout_seconds=1,
        ):
            seen.append((e["type"], e["object"].metadata.name))

    thread = threading.Thread(target=follow)
    thread.start()
    time.sleep(0.1)
    core.create_namespaced_pod(NS, pod("b", app="x"))
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": "z"}}})  # leaves
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": "x"}}})  # comes back
    core.delete_namespaced_pod("b", NS)  # unbound: goes at once
    thread.join()
    assert seen == [("ADDED", "b"), ("DELETED", "a"), ("ADDED", "a"), ("DELETED", "b")]


def test_watch_from_a_compacted_version_is_gone(
    core: client.CoreV1Api, fake: FakeApiServer
) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    old = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("b"))
    fake.cluster.compact()
    with pytest.raises(client.ApiException) as info:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, NS, resource_version=old, timeout_seconds=1
            )
        )
    assert info.value.status == 410
    # From the current version, the watch is fine.
    now = core.list_namespaced_pod(NS).metadata.resource_version
    assert (
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, NS, resource_version=now, timeout_seconds=1
            )
        )
        == []
    )


def test_graceful_deletion_and_preconditions(core: client.CoreV1Api, fake: FakeApiServer) -> None:
    kubelet = FakeKubelet(fake)
    kubelet.add_node("n1")
    created = core.create_namespaced_pod(NS, pod("a"))
    kubelet.run(NS, "a")
    status, body = error(
        lambda: core.delete_namespaced_pod(
            "a",
            NS,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="someone-else")),
        )
    )
    assert (status, body["reason"]) == (409, "Conflict")
    deleted = core.delete_namespaced_pod(
        "a",
        NS,
        body=client.V1DeleteOptions(
            grace_period_seconds=1, preconditions=client.V1Preconditions(uid=created.metadata.uid)
        ),
    )
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 1
    assert core.read_namespaced_pod("a", NS).metadata.deletion_timestamp is not None
    fake.wait_for(lambda: fake.cluster.get("pods", NS, "a") is None, timeout=3)
    core.create_namespaced_pod(NS, pod("b"))
    kubelet.run(NS, "b")
    core.delete_namespaced_pod("b", NS, grace_period_seconds=0)
    assert fake.cluster.get("pods", NS, "b") is None


def test_stale_updates_conflict(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, pod("a"))
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"v": "1"}}})
    created.metadata.labels = {"v": "2"}
    status, body = error(lambda: core.replace_namespaced_pod("a", NS, created))
    assert (status, body["reason"]) == (409, "Conflict")
    fresh = core.read_namespaced_pod("a", NS)
    fresh.metadata.labels = {"v": "2"}
    assert core.replace_namespaced_pod("a", NS, fresh).metadata.labels == {"v": "2"}


def test_services_and_ingresses(fake: FakeApiServer) -> None:
    api = fake.api_client()
    core, net = client.CoreV1Api(api), client.NetworkingV1Api(api)
    svc = core.create_namespaced_service(
        NS,
        {
            "metadata": {"name": "s", "labels": {"a": "b"}},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]},
        },
    )
    assert svc.spec.cluster_ip and svc.spec.ports[0].node_port >= 30000
    net.create_namespaced_ingress(
        NS,
        {
            "metadata": {"name": "i", "labels": {"a": "b"}},
            "spec": {"rules": [{"host": "h.example"}]},
        },
    )
    assert [
        i.spec.rules[0].host
        for i in net.list_ingress_for_all_namespaces(label_selector="a=b").items
    ] == ["h.example"]
    assert net.delete_namespaced_ingress("i", NS).status == "Success"
    core.delete_namespaced_service("s", NS)
    assert core.list_service_for_all_namespaces().items == []
    status, _ = error(
        lambda: core.create_namespaced_service(
            NS, {"metadata": {"name": "1-starts-with-a-digit"}, "spec": {}}
        )
    )
    assert status == 422
