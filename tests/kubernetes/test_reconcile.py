"""The Kubernetes executor after a restart deletes the pods the server no longer leases to it,
and never creates a pod on a node whose room is still held by a terminating pod."""

from __future__ import annotations

import asyncio

from armada_core.api import executor_pb2, submit_pb2
from armada_core.client import job_item
from armada_server.executors.kubernetes import KubernetesBackend
from armada_server.executors.kubernetes import labels as lb

from .conftest import EXECUTOR, FAST, Cluster
from .fake_apiserver import FakeApiServer
from .fake_kubelet import FakeKubelet
from .test_executor_e2e import NS, name, spec


async def test_a_restarted_executor_deletes_the_pods_of_runs_cancelled_while_it_was_away(
    cluster: Cluster,
) -> None:
    first = await cluster.start_executor()
    kept, cancelled = await cluster.submit(job_item(spec(grace=3)), job_item(spec(grace=3)))
    pods = {job: await cluster.pod_of(job) for job in (kept, cancelled)}
    for pod in pods.values():
        cluster.kubelet.run(NS, name(pod))
    await cluster.wait_state(kept, "RUNNING")
    await cluster.wait_state(cancelled, "RUNNING")
    await first.close()  # its pods keep running

    await cluster.call(cluster.client.cancel_jobs, "q", "s", [cancelled])
    second = await cluster.start_executor()
    run_of = {job: pod["metadata"]["labels"][lb.RUN_ID] for job, pod in pods.items()}
    assert second.backend.held() == set(run_of.values())  # both reported in the first sync
    # The server answers with a stop for the cancelled run: its pod is deleted gracefully.
    deletion = await cluster.wait(
        lambda: [d for d in cluster.fake.cluster.deletions if d.name == name(pods[cancelled])]
    )
    assert [d.grace for d in deletion] == [3]
    cluster.kubelet.terminated(NS, name(pods[cancelled]))
    await cluster.wait(lambda: run_of[cancelled] not in second.backend.held())
    await cluster.wait_state(cancelled, "CANCELLED")
    # The other one was adopted, never deleted, and its end is reported.
    assert not [d for d in cluster.fake.cluster.deletions if d.name == name(pods[kept])]
    assert await cluster.state(kept) == "RUNNING"
    cluster.kubelet.succeed(NS, name(pods[kept]))
    await cluster.wait_state(kept, "SUCCEEDED")


def lease(run: str, job: str, cpu: str, grace: int) -> executor_pb2.Lease:
    item = job_item(spec(cpu=cpu, grace=grace), check=False)
    built = submit_pb2.Job(
        id=job, queue="q", job_set_id="s", namespace=NS, pod_specs=item.pod_specs
    )
    built.scheduling_resource_requirements.requests["cpu"].string = cpu
    return executor_pb2.Lease(run_id=run, node="node-a", pod_name=f"armada-{job}-0", job=built)


async def test_a_lease_waits_until_a_terminating_pod_has_left_room_on_its_node(
    fake: FakeApiServer, kubelet: FakeKubelet
) -> None:
    backend = KubernetesBackend(fake.api_client(), EXECUTOR, FAST)
    reports: list[executor_pb2.RunUpdate] = []

    def kinds(run: str) -> list[str | None]:
        return [u.WhichOneof("update") for u in reports if u.run_id == run]

    async def until(condition) -> None:  # type: ignore[no-untyped-def]
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the condition did not hold in time")

    await backend.open(reports.append)
    try:
        backend.start(lease("r-victim", "victim", "4", grace=30), reports.append)
        await until(lambda: fake.cluster.get("pods", NS, "armada-victim-0") is not None)
        kubelet.run(NS, "armada-victim-0")
        await until(lambda: "running" in kinds("r-victim"))
        backend.stop("r-victim", preempt=True)  # terminating for up to 30 s
        await until(
            lambda: (
                "deletionTimestamp" in fake.cluster.get("pods", NS, "armada-victim-0")["metadata"]
            )
        )

        backend.start(lease("r-urgent", "urgent", "4", grace=1), reports.append)
        assert kinds("r-urgent") == ["pending"]  # held: node-a has no room yet
        assert "r-urgent" in backend.held()
        await asyncio.sleep(0.3)  # several ticks and node refreshes change nothing
        assert fake.cluster.get("pods", NS, "armada-urgent-0") is None

        kubelet.terminated(NS, "armada-victim-0")  # the victim's containers have exited
        await until(lambda: "stopped" in kinds("r-victim"))
        await until(lambda: fake.cluster.get("pods", NS, "armada-urgent-0") is not None)
        assert fake.cluster.get("pods", NS, "armada-victim-0") is None
    finally:
        await backend.close()


async def test_a_stop_for_a_lease_held_for_room_reports_it_stopped_at_once(
    fake: FakeApiServer, kubelet: FakeKubelet
) -> None:
    backend = KubernetesBackend(fake.api_client(), EXECUTOR, FAST)
    reports: list[executor_pb2.RunUpdate] = []
    await backend.open(reports.append)
    try:
        backend.start(lease("r-1", "one", "4", grace=1), reports.append)
        backend.start(lease("r-2", "two", "4", grace=1), reports.append)
        assert [u.WhichOneof("update") for u in reports if u.run_id == "r-2"] == ["pending"]
        backend.stop("r-2", preempt=False)
        assert [u.WhichOneof("update") for u in reports if u.run_id == "r-2"] == [
            "pending",
            "stopped",
        ]
        assert backend.held() == {"r-1"}
    finally:
        await backend.close()
