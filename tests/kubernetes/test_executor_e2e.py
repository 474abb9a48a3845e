"""The Kubernetes executor end to end: a real armada-server, the real executor agent over
loopback gRPC, the real `kubernetes` client, and the fake cluster (no API server can run on
these machines) whose kubelet the tests drive."""

from __future__ import annotations

import asyncio

from kubernetes import client as k8s

from armada_core.api import submit_pb2
from armada_core.client import gang_items, job_item
from armada_core.jobs import JobState
from armada_core.retry import load_policy
from armada_server.executors.kubernetes import labels as lb

from .conftest import EXECUTOR, Cluster

NS = "default"


def spec(cpu: str = "1", grace: int = 5, **extra) -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["work"],
                "resources": {
                    "requests": {"cpu": cpu, "memory": "1Gi"},
                    "limits": {"cpu": cpu, "memory": "1Gi"},
                },
            }
        ],
        "terminationGracePeriodSeconds": grace,
        **extra,
    }


def name(pod: dict) -> str:
    return pod["metadata"]["name"]


async def test_a_job_runs_as_a_labelled_pod_and_succeeds(cluster: Cluster) -> None:
    ex = await cluster.start_executor()
    [job] = await cluster.submit(
        job_item(spec(), labels={"team": "a"}, annotations={"note": "hello"})
    )
    pod = await cluster.pod_of(job)
    labels, meta = pod["metadata"]["labels"], pod["metadata"]
    assert labels[lb.JOB_ID] == job and labels[lb.EXECUTOR] == EXECUTOR
    assert labels[lb.QUEUE] == "q" and labels[lb.JOB_SET] == "s" and labels["team"] == "a"
    assert meta["annotations"]["note"] == "hello"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["nodeSelector"][lb.HOSTNAME] == pod["spec"]["nodeName"]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    await cluster.wait_state(job, "PENDING")
    cluster.kubelet.run(NS, name(pod))
    await cluster.wait_state(job, "RUNNING")
    cluster.kubelet.succeed(NS, name(pod))
    await cluster.wait_state(job, "SUCCEEDED")
    details = (await cluster.call(cluster.client.get_job_details, [job], expand_job_run=True))[job]
    [run] = details.job_runs
    assert run.cluster == EXECUTOR and run.node == pod["spec"]["nodeName"]
    # Finished pods are deleted after the retention (0 here); the run is no longer held.
    await cluster.wait(lambda: not cluster.fake.objects("pods"))
    assert ex.backend.held() == set()
    reported = {n.name: n for n in ex.backend.nodes()}
    assert set(reported) == {"node-a", "node-b"}
    assert reported["node-a"].allocatable["cpu"] == "4000m"


async def test_a_gang_runs_together(cluster: Cluster) -> None:
    await cluster.start_executor()
    ids = await cluster.submit(*gang_items(spec(cpu="3"), replicas=2))
    pods = await cluster.pods(2)
    assert {p["metadata"]["labels"][lb.JOB_ID] for p in pods} == set(ids)
    assert len({p["spec"]["nodeName"] for p in pods}) == 2  # 3 cpu each: one per node
    for pod in pods:
        cluster.kubelet.run(NS, name(pod))
    for job in ids:
        await cluster.wait_state(job, "RUNNING")
    for pod in pods:
        cluster.kubelet.succeed(NS, name(pod))
    for job in ids:
        await cluster.wait_state(job, "SUCCEEDED")


async def test_exit_code_and_termination_message(cluster: Cluster) -> None:
    await cluster.start_executor()
    [job] = await cluster.submit(job_item(spec()))
    pod = await cluster.pod_of(job)
    cluster.kubelet.run(NS, name(pod))
    cluster.kubelet.fail(NS, name(pod), exit_code=3, message="bad input file")
    results = await cluster.call(cluster.client.wait_for_jobs, "q", "s", [job], timeout=10)
    result = results[job]
    assert result.state == JobState.FAILED
    assert result.exit_codes == {"main": 3}
    assert "bad input file" in result.termination_messages["main"]


async def test_oom_is_retried_by_a_policy(cluster: Cluster) -> None:
    await cluster.call(
        cluster.client.create_retry_policy,
        load_policy("""
apiVersion: armadaproject.io/v1
kind: RetryPolicy
metadata: {name: oom}
spec:
  retryLimit: 1
  defaultAction: Fail
  rules:
    - action: Retry
      onConditions: [OOMKilled]
"""),
    )
    await cluster.call(
        cluster.client.update_queue,
        submit_pb2.Queue(name="q", priority_factor=1, retry_policies=["oom"]),
    )
    await cluster.start_executor()
    [job] = await cluster.submit(job_item(spec()))
    first = await cluster.pod_of(job)
    cluster.kubelet.run(NS, name(first))
    cluster.kubelet.oom_kill(NS, name(first))
    second = await cluster.pod_of(job, run_index=1)  # the retry: a pod of its own
    assert second["metadata"]["labels"][lb.RUN_ID] != first["metadata"]["labels"][lb.RUN_ID]
    cluster.kubelet.run(NS, name(second))
    cluster.kubelet.oom_kill(NS, name(second))
    results = await cluster.call(cluster.client.wait_for_jobs, "q", "s", [job], timeout=10)
    assert results[job].state == JobState.FAILED
    assert results[job].condition == "OOMKilled"
    assert len(results[job].retryable_failures) == 1


async def test_cancel_deletes_the_pod_with_its_grace_period(cluster: Cluster) -> None:
    ex = await cluster.start_executor()
    [job] = await cluster.submit(job_item(spec(grace=7)))
    pod = await cluster.pod_of(job)
    cluster.kubelet.run(NS, name(pod))
    await cluster.wait_state(job, "RUNNING")
    await cluster.call(cluster.client.cancel_jobs, "q", "s", [job])
    await cluster.wait_state(job, "CANCELLED")
    deleted = await cluster.wait(
        lambda: [d for d in cluster.fake.cluster.deletions if d.resource == "pods"]
    )
    assert [(d.name, d.grace) for d in deleted] == [(name(pod), 7)]
    terminating = cluster.fake.cluster.get("pods", NS, name(pod))
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 7
    run_id = pod["metadata"]["labels"][lb.RUN_ID]
    assert run_id in ex.backend.held()  # held until the pod is gone
    cluster.kubelet.terminated(NS, name(pod))
    await cluster.wait(lambda: run_id not in ex.backend.held())
    assert cluster.fake.objects("pods") == []
    await asyncio.sleep(0.3)  # the server's repeated stops never delete twice
    assert len([d for d in cluster.fake.cluster.deletions if d.resource == "pods"]) == 1


async def test_preemption_stops_the_pod_and_reports_it_stopped(cluster: Cluster) -> None:
    cluster.kubelet.set_node("node-b", unschedulable=True)
    await cluster.start_executor()
    [low] = await cluster.submit(job_item(spec(cpu="4", grace=1), priority_class="low"))
    victim = await cluster.pod_of(low)
    cluster.kubelet.run(NS, name(victim))
    await cluster.wait_state(low, "RUNNING")
    [high] = await cluster.submit(job_item(spec(cpu="4"), priority_class="high"), job_set="t")
    # The low job's pod is deleted gracefully (1 s); once it is gone the executor reports it
    # stopped, the server marks the job preempted and the high job gets the node.
    await cluster.wait(
        lambda: (
            cluster.fake.cluster.get("pods", NS, name(victim)) is None
            or "deletionTimestamp" in cluster.fake.cluster.get("pods", NS, name(victim))["metadata"]
        )
    )
    winner = await cluster.pod_of(high, timeout=15)
    assert winner["spec"]["nodeName"] == "node-a"
    await cluster.wait_state(low, "PREEMPTED", "QUEUED", "LEASED", "PENDING")
    deletion = next(d for d in cluster.fake.cluster.deletions if d.name == name(victim))
    assert deletion.grace == 1


async def test_image_pull_errors_fail_the_run_after_a_timeout(cluster: Cluster) -> None:
    await cluster.start_executor()
    [job] = await cluster.submit(job_item(spec()))
    pod = await cluster.pod_of(job)
    cluster.kubelet.image_pull_error(
        NS, name(pod), reason="ImagePullBackOff", message="Back-off pulling image busybox:1.36"
    )
    await cluster.wait_state(job, "FAILED")
    details = (await cluster.call(cluster.client.get_job_details, [job], expand_job_run=True))[job]
    errors = await cluster.call(cluster.client.get_job_errors, [job])
    assert "ImagePullBackOff" in errors[job]
    assert details.job_runs[-1].state == 5 or details.state == submit_pb2.FAILED
    await cluster.wait(
        lambda: (
            cluster.fake.cluster.get("pods", NS, name(pod)) is None
            or "deletionTimestamp"
            in (cluster.fake.cluster.get("pods", NS, name(pod)) or {"metadata": {}})["metadata"]
        )
    )


async def test_an_unschedulable_pod_gives_the_lease_back(cluster: Cluster) -> None:
    await cluster.start_executor()
    cluster.kubelet.auto_schedule = False
    [job] = await cluster.submit(job_item(spec()))
    first = await cluster.call(cluster.kubelet.wait_pods, 1)
    cluster.kubelet.unschedulable(
        NS, name(first[0]), message="0/2 nodes are available: 2 Insufficient cpu."
    )
    cluster.kubelet.auto_schedule = True
    # Returned after the timeout: the pod is removed and the job leased again, a new pod.
    second = await cluster.pod_of(job, run_index=1, timeout=15)
    assert cluster.fake.cluster.get("pods", NS, name(first[0])) is None
    cluster.kubelet.run(NS, name(second))
    cluster.kubelet.succeed(NS, name(second))
    await cluster.wait_state(job, "SUCCEEDED")


async def test_services_and_ingresses_are_created_and_deleted(cluster: Cluster) -> None:
    ex = await cluster.start_executor(ingress_domain="example.com")
    item = job_item(
        spec(),
        services=[{"type": "Headless", "ports": [6379]}],
        ingress=[
            {
                "ports": [8080],
                "tls_enabled": True,
                "cert_name": "tls-cert",
                "annotations": {"nginx.ingress.kubernetes.io/x": "y"},
            }
        ],
    )
    [job] = await cluster.submit(item)
    pod = await cluster.pod_of(job)
    run_id = pod["metadata"]["labels"][lb.RUN_ID]
    services = await cluster.wait(
        lambda: (
            len(cluster.fake.objects("services")) == 2
            and cluster.fake.objects("ingresses")
            and cluster.fake.objects("services")
        )
    )
    by_name = {s["metadata"]["name"]: s for s in services}
    headless = by_name[f"{name(pod)}-headless-0"]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"] == {lb.RUN_ID: run_id, lb.EXECUTOR: EXECUTOR}
    assert headless["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    [ingress] = cluster.fake.objects("ingresses")
    host = f"8080-{name(pod)}.default.example.com"
    assert ingress["spec"]["rules"][0]["host"] == host
    assert ingress["spec"]["tls"] == [{"hosts": [host], "secretName": "tls-cert"}]
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/x"] == "y"
    assert ex.backend.ingress_addresses(run_id) == {8080: host}

    def ingress_events() -> list:  # type: ignore[type-arg]
        return [
            m.message.ingress_info
            for m in cluster.client.get_job_set_events("q", "s")
            if m.message.WhichOneof("events") == "ingress_info"
        ]

    [info] = await cluster.wait(lambda: ingress_events() or None)
    assert info.job_id == job and dict(info.ingress_addresses) == {8080: host}
    cluster.kubelet.run(NS, name(pod))
    cluster.kubelet.succeed(NS, name(pod))
    await cluster.wait_state(job, "SUCCEEDED")
    await cluster.wait(
        lambda: not cluster.fake.objects("services") and not cluster.fake.objects("ingresses")
    )


async def test_a_restarted_executor_adopts_its_pods_and_deletes_orphans(cluster: Cluster) -> None:
    first = await cluster.start_executor()
    [job] = await cluster.submit(job_item(spec()))
    pod = await cluster.pod_of(job)
    cluster.kubelet.run(NS, name(pod))
    await cluster.wait_state(job, "RUNNING")
    await first.close()
    # While it is down: its pod is still running, and stray objects of runs the server does
    # not know (left by an earlier incarnation) sit in the cluster.
    core = k8s.CoreV1Api(cluster.fake.api_client())
    stray = {lb.EXECUTOR: EXECUTOR, lb.RUN_ID: "gone-run", lb.JOB_ID: "gone-job"}
    await cluster.call(
        core.create_namespaced_pod,
        NS,
        {
            "metadata": {"name": "armada-gone-0", "labels": stray},
            "spec": {
                "containers": [{"name": "main", "image": "busybox"}],
                "terminationGracePeriodSeconds": 0,
                "restartPolicy": "Never",
            },
        },
    )
    await cluster.call(
        core.create_namespaced_service,
        NS,
        {
            "metadata": {"name": "armada-gone-svc", "labels": {**stray, lb.AUXILIARY: "true"}},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    await cluster.call(
        core.create_namespaced_service,
        NS,
        {
            "metadata": {
                "name": "armada-older-svc",
                "labels": {**stray, lb.RUN_ID: "older-run", lb.AUXILIARY: "true"},
            },
            "spec": {"ports": [{"port": 80}]},
        },
    )
    cluster.kubelet.run(NS, "armada-gone-0")
    second = await cluster.start_executor()
    assert second.backend.held() == {pod["metadata"]["labels"][lb.RUN_ID], "gone-run"}
    # A service whose pod is gone is removed at start.
    assert [s["metadata"]["name"] for s in cluster.fake.objects("services")] == ["armada-gone-svc"]
    # The server stops the unknown run: the orphan pod is deleted, then its service.
    await cluster.wait(lambda: cluster.fake.cluster.get("pods", NS, "armada-gone-0") is None)
    await cluster.wait(lambda: cluster.fake.objects("services") == [])
    assert await cluster.state(job) == "RUNNING"
    cluster.kubelet.succeed(NS, name(pod))
    await cluster.wait_state(job, "SUCCEEDED")


async def test_a_pod_deleted_by_someone_else_fails_the_run(cluster: Cluster) -> None:
    await cluster.start_executor()
    [job] = await cluster.submit(
        job_item(spec(), annotations={"armadaproject.io/atMostOnce": "true"})
    )
    pod = await cluster.pod_of(job)
    cluster.kubelet.run(NS, name(pod))
    await cluster.wait_state(job, "RUNNING")
    core = k8s.CoreV1Api(cluster.fake.api_client())
    await cluster.call(core.delete_namespaced_pod, name(pod), NS, grace_period_seconds=0)
    results = await cluster.call(cluster.client.wait_for_jobs, "q", "s", [job], timeout=10)
    assert results[job].state == JobState.FAILED
    assert "deleted by someone other than Armada" in results[job].failure_reason
    assert results[job].failure_category == "internal"


async def test_the_watch_recovers_from_an_expired_resource_version(cluster: Cluster) -> None:
    ex = await cluster.start_executor(watch_timeout=1)
    [job] = await cluster.submit(job_item(spec()))
    pod = await cluster.pod_of(job)
    await cluster.wait_state(job, "PENDING")
    # Forget the history past the watch's version: it gets 410 Gone, lists again and carries
    # on from the listing.
    with cluster.fake.cluster.lock:  # the watch never sees this change, only a 410
        cluster.kubelet.run(NS, name(pod))
        cluster.fake.cluster.compact()
    # The relisting waits out a watch period and the executor's next sync: on a loaded
    # machine that has taken over 10 s.
    await cluster.wait_state(job, "RUNNING", timeout=30)
    cluster.kubelet.succeed(NS, name(pod))
    await cluster.wait_state(job, "SUCCEEDED", timeout=15)
    assert ex.backend.watcher.relists >= 1
