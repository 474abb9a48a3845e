"""Logs of the Kubernetes executor's pods through Binoculars: the server asks the executor
(ExecutorControl over loopback gRPC), which reads the pod's log from the (fake) Kubernetes API
while the pod exists and from its own archive after the pod is deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from armada_core.client import ArmadaError, job_item
from armada_server.executors.kubernetes.logs import LogArchive
from armada_server.executors.logs import LogQuery

from .conftest import Cluster

NS = "default"


def two_containers() -> dict:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    return {
        "containers": [
            {"name": "main", "image": "busybox:1.36", "command": ["work"], "resources": resources},
            {"name": "side", "image": "busybox:1.36", "command": ["help"], "resources": resources},
        ],
        "terminationGracePeriodSeconds": 1,
    }


async def logs(cluster: Cluster, job: str, **options) -> list[str]:  # type: ignore[no-untyped-def]
    return [line.line for line in await cluster.call(cluster.client.logs, job, **options)]


async def test_logs_of_a_running_pod_and_after_it_is_deleted(cluster: Cluster) -> None:
    await cluster.start_executor()
    [job] = await cluster.submit(job_item(two_containers()))
    pod = await cluster.pod_of(job)
    name = pod["metadata"]["name"]
    # Not started yet: nothing logged, not an error.
    assert await logs(cluster, job) == []
    cluster.kubelet.run(NS, name)
    await cluster.wait_state(job, "RUNNING")
    cluster.kubelet.log(NS, name, "main", "one", "two", "three")
    cluster.kubelet.log(NS, name, "side", "helping")
    assert await logs(cluster, job) == ["one", "two", "three"]
    assert await logs(cluster, job, container="side") == ["helping"]
    assert await logs(cluster, job, tail_lines=2) == ["two", "three"]
    lines = await cluster.call(cluster.client.logs, job)
    # since_time is exclusive, at the nanoseconds Kubernetes writes.
    assert await logs(cluster, job, since_time=lines[0].timestamp) == ["two", "three"]
    assert await logs(cluster, job, since_time=lines[0].timestamp, tail_lines=1) == ["three"]
    with pytest.raises(ArmadaError) as raised:
        await logs(cluster, job, container="nope")
    assert raised.value.code.name == "INVALID_ARGUMENT" and "nope" in raised.value.details

    cluster.kubelet.log(NS, name, "main", "four")
    cluster.kubelet.succeed(NS, name)
    await cluster.wait_state(job, "SUCCEEDED")
    # The finished pod is deleted (retention 0 in these tests): its logs were kept first.
    await cluster.wait(lambda: not cluster.fake.objects("pods"))
    assert cluster.fake.cluster.logs == {}
    assert await logs(cluster, job) == ["one", "two", "three", "four"]
    assert await logs(cluster, job, container="side", timestamps=True) == ["helping"]
    assert await logs(cluster, job, tail_lines=1) == ["four"]
    assert await logs(cluster, job, since_time=lines[2].timestamp) == ["four"]


async def test_a_cancelled_pods_log_is_kept_and_a_log_dir_survives_restarts(
    cluster: Cluster, tmp_path: Path
) -> None:
    log_dir = tmp_path / "pod-logs"
    ex = await cluster.start_executor(log_dir=str(log_dir))
    [job] = await cluster.submit(job_item(two_containers()))
    name = (await cluster.pod_of(job))["metadata"]["name"]
    cluster.kubelet.run(NS, name)
    await cluster.wait_state(job, "RUNNING")
    cluster.kubelet.log(NS, name, "main", "working")
    [run_id] = ex.backend.held()
    await cluster.call(cluster.client.cancel_jobs, "q", "s", [job])
    await cluster.wait_state(job, "CANCELLED")
    await cluster.call(cluster.fake.wait_for, lambda: not cluster.fake.objects("pods"))
    assert await logs(cluster, job) == ["working"]
    assert (log_dir / run_id / "main.log").read_text().endswith(" working\n")
    # A new executor process (same id) reads what the last one kept.
    await ex.close()
    again = await cluster.start_executor(log_dir=str(log_dir))
    await cluster.wait(lambda: again.agent.syncs > 0)  # the server has its new address
    assert await logs(cluster, job) == ["working"]


async def test_logs_beyond_the_retention_are_not_found(cluster: Cluster) -> None:
    await cluster.start_executor(log_retention=1)
    jobs = []
    for text in ("first", "second"):
        [job] = await cluster.submit(job_item(two_containers()), job_set=text)
        name = (await cluster.pod_of(job))["metadata"]["name"]
        cluster.kubelet.run(NS, name)
        cluster.kubelet.log(NS, name, "main", text)
        cluster.kubelet.succeed(NS, name)
        await cluster.wait_state(job, "SUCCEEDED")
        await cluster.wait(lambda: not cluster.fake.objects("pods"))
        jobs.append(job)
    assert await logs(cluster, jobs[1]) == ["second"]
    with pytest.raises(ArmadaError) as raised:
        await logs(cluster, jobs[0])
    assert raised.value.code.name == "NOT_FOUND"
    assert "no longer keeps its log" in raised.value.details


def test_the_archive_keeps_the_end_of_long_logs_and_the_newest_runs(tmp_path: Path) -> None:
    archive = LogArchive(tmp_path, retention=2, max_bytes=40)
    text = "".join(f"2024-01-01T00:00:0{i}.000000001Z line {i}\n" for i in range(5))
    archive.put("run-a", {"main": text})
    kept = archive.get("run-a", "main")
    assert kept is not None and kept.endswith("line 4\n") and len(kept.encode()) <= 40
    assert kept.startswith("2024-")  # cut at a line boundary
    archive.put("run-b", {"main": "x"})
    archive.put("run-c", {"main": "y"})
    assert "run-a" not in archive and not (tmp_path / "run-a").exists()
    again = LogArchive(tmp_path, retention=2)
    assert again.get("run-c", "main") == "y" and again.get("run-c", "other") == ""
    assert again.get("run-a", "main") is None
    with pytest.raises(ValueError):
        archive.put("../escape", {"main": "x"})
    # LogQuery's since is the datetime the local executor's reader takes.
    assert LogQuery("r", "j", "p", "", "main", since_ns=1_500_000_000).since is not None
