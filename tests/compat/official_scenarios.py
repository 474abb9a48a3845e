"""Scenarios driven by the official `armada-client` against a running server.

Runs with the interpreter of the throwaway environment that holds `armada-client` (see
conftest.py), never with the project's. Reads {"address": HOST:PORT, "prefix": NAME} as JSON on
stdin, drives the server only through the official `ArmadaClient` and `ArmadaAsyncIOClient`
(and the message classes the package ships), and writes what it observed as JSON on stdout;
the assertions are in test_official_client.py. A failed call is recorded as
{"error": CODE_NAME, "details": TEXT}, never raised, so one surprise does not hide the rest.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from armada_client.armada import submit_pb2
from armada_client.asyncio_client import ArmadaAsyncIOClient
from armada_client.client import ArmadaClient
from armada_client.k8s.io.api.core.v1 import generated_pb2 as core_v1
from armada_client.k8s.io.apimachinery.pkg.api.resource import generated_pb2 as resource
from armada_client.permissions import Permissions, Subject
from armada_client.typings import JobState
from google.protobuf import json_format

GANG = "armadaproject.io/gangId"
GANG_CARDINALITY = "armadaproject.io/gangCardinality"
GANG_MINIMUM = "armadaproject.io/gangMinimumCardinality"
GANG_LABEL = "armadaproject.io/gangNodeUniformityLabel"
EXTERNAL_URI = "armadaproject.io/externalJobUri"
UNKNOWN_ID = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"
WATCH_TIMEOUT = 30.0


def as_dict(message) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def outcome(call: Callable[[], Any]) -> Any:
    """The call's answer as a dict (or None for Empty), or the gRPC error it raised."""
    try:
        answer = call()
    except grpc.RpcError as e:
        return {"error": e.code().name, "details": e.details()}
    if answer is None or not hasattr(answer, "DESCRIPTOR"):
        return answer
    return as_dict(answer)


def state_names(response) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {k: submit_pb2.JobState.Name(v) for k, v in response.job_states.items()}


def quantities(**values: str) -> dict[str, resource.Quantity]:
    return {k: resource.Quantity(string=v) for k, v in values.items()}


def pod_spec(
    cpu: str = "500m", memory: str = "256Mi", priority_class: str = "", **extra: Any
) -> core_v1.PodSpec:
    """A realistic batch pod: resources, env, volumes, tolerations, selector, grace period."""
    container = core_v1.Container(
        name="main",
        image="busybox:1.36",
        command=["sh", "-c"],
        args=["echo hello; sleep 5"],
        env=[
            core_v1.EnvVar(name="STAGE", value="compat"),
            core_v1.EnvVar(
                name="POD",
                valueFrom=core_v1.EnvVarSource(
                    fieldRef=core_v1.ObjectFieldSelector(fieldPath="metadata.name")
                ),
            ),
        ],
        resources=core_v1.ResourceRequirements(
            requests=quantities(cpu=cpu, memory=memory), limits=quantities(cpu=cpu, memory=memory)
        ),
        volumeMounts=[core_v1.VolumeMount(name="scratch", mountPath="/scratch")],
        securityContext=core_v1.SecurityContext(runAsNonRoot=True, runAsUser=1000),
    )
    init = core_v1.Container(
        name="setup",
        image="busybox:1.36",
        command=["true"],
        resources=core_v1.ResourceRequirements(
            requests=quantities(cpu="100m", memory="64Mi"),
            limits=quantities(cpu="100m", memory="64Mi"),
        ),
    )
    return core_v1.PodSpec(
        containers=[container],
        initContainers=[init],
        volumes=[
            core_v1.Volume(
                name="scratch",
                volumeSource=core_v1.VolumeSource(emptyDir=core_v1.EmptyDirVolumeSource()),
            )
        ],
        nodeSelector={"pool": "cpu"},
        tolerations=[
            core_v1.Toleration(
                key="dedicated", operator="Equal", value="batch", effect="NoSchedule"
            )
        ],
        terminationGracePeriodSeconds=30,
        restartPolicy="Never",
        priorityClassName=priority_class,
        **extra,
    )


def kubernetes_refusals(client: ArmadaClient, queue: str, job_set: str) -> dict[str, Any]:
    """What a Kubernetes API server refuses, submitted as the official client builds it."""
    spaced = pod_spec(cpu=" 1")
    gpus = pod_spec()
    gpus.containers[0].resources.requests["nvidia.com/gpu"].string = "1"
    gpus.containers[0].resources.limits["nvidia.com/gpu"].string = "2"
    billion = pod_spec()
    billion.containers[0].resources.limits["nvidia.com/gpu"].string = "1000000000"
    bad_volume = pod_spec()
    bad_volume.volumes[0].name = "Bad_Name"
    bad_volume.containers[0].volumeMounts[0].name = "Bad_Name"
    cases: dict[str, tuple[core_v1.PodSpec, dict[str, str]]] = {
        "spaced_cpu": (spaced, {}),
        "gpu_request_below_limit": (gpus, {}),
        "billion_gpus": (billion, {}),
        "bad_volume_name": (bad_volume, {}),
        "bad_gang_label": (
            pod_spec(),
            {GANG: "g3", GANG_CARDINALITY: "1", GANG_LABEL: "bad label!"},
        ),
        "huge_annotation_key": (pod_spec(), {"k" * (10 * 1024 * 1024): "v"}),
    }
    return {
        name: outcome(
            lambda spec=spec, annotations=annotations: client.submit_jobs(
                queue,
                job_set,
                [client.create_job_request_item(pod_spec=spec, annotations=annotations)],
            )
        )
        for name, (spec, annotations) in cases.items()
    }


def job_summary(job) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """What the official client reads back from a `submitted` event's job."""
    pod = job.pod_specs[0]
    main = pod.containers[0]
    return {
        "id": job.id,
        "client_id": job.client_id,
        "queue": job.queue,
        "job_set_id": job.job_set_id,
        "priority": job.priority,
        "namespace": job.namespace,
        "labels": dict(job.labels),
        "annotations": dict(job.annotations),
        "priority_class": pod.priorityClassName,
        "grace": pod.terminationGracePeriodSeconds,
        "deadline": pod.activeDeadlineSeconds,
        "restart_policy": pod.restartPolicy,
        "requests": {k: v.string for k, v in main.resources.requests.items()},
        "limits": {k: v.string for k, v in main.resources.limits.items()},
        "env": [as_dict(e) for e in main.env],
        "init_containers": [c.name for c in pod.initContainers],
        "volumes": [as_dict(v) for v in pod.volumes],
        "node_selector": dict(pod.nodeSelector),
        "tolerations": [as_dict(t) for t in pod.tolerations],
        "security_context": as_dict(main.securityContext),
        "scheduling_requests": {
            k: v.string for k, v in job.scheduling_resource_requirements.requests.items()
        },
    }


class Watcher:
    """Reads a job set through the official event stream on a thread, unmarshalling each event.

    Stops by itself once every expected job has a `cancelled` event.
    """

    def __init__(
        self,
        client: ArmadaClient,
        queue: str,
        job_set: str,
        expect: set[str],
        from_message_id: str | None = None,
    ) -> None:
        self.client = client
        self.stream = client.get_job_events_stream(queue, job_set, from_message_id)
        self.expect = set(expect)
        self.events: list[dict[str, str]] = []
        self.error: str | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        cancelled: set[str] = set()
        try:
            for message in self.stream:
                event = self.client.unmarshal_event_response(message)
                self.events.append(
                    {
                        "id": event.id,
                        "type": event.type.value,
                        "job_id": event.message.job_id,
                        "job_set_id": event.message.job_set_id,
                        "queue": event.message.queue,
                        "created": event.message.created.ToJsonString(),
                    }
                )
                if event.type.value == "submitted":
                    self.events[-1]["job"] = job_summary(event.message.job)
                if event.type.value == "cancelled":
                    cancelled.add(event.message.job_id)
                    if self.expect <= cancelled:
                        break
        except Exception as e:  # recorded for the test to show
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done.set()

    def wait_for(self, count: int, timeout: float = WATCH_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while len(self.events) < count and not self.done.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)

    def finish(self, timeout: float = WATCH_TIMEOUT) -> dict[str, Any]:
        finished = self.done.wait(timeout)
        self.client.unwatch_events(self.stream)
        return {"events": self.events, "finished": finished, "error": self.error}


def queue_crud(client: ArmadaClient, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    name, tmp, extra = f"{prefix}-main", f"{prefix}-tmp", f"{prefix}-extra"
    queue = client.create_queue_request(
        name,
        priority_factor=2.0,
        user_owners=["alice"],
        group_owners=["research"],
        resource_limits={"cpu": 0.5},
        permissions=[
            Permissions(
                [Subject("Group", "research"), Subject("User", "bob")],
                ["submit", "cancel", "watch"],
            )
        ],
    )
    out["create"] = outcome(lambda: client.create_queue(queue))
    out["create_again"] = outcome(lambda: client.create_queue(queue))
    out["get"] = outcome(lambda: client.get_queue(name))
    updated = client.create_queue_request(name, priority_factor=3.0, user_owners=["alice", "carol"])
    out["update"] = outcome(lambda: client.update_queue(updated))
    out["get_updated"] = outcome(lambda: client.get_queue(name))
    out["update_missing"] = outcome(
        lambda: client.update_queue(
            client.create_queue_request(f"{prefix}-ghost", priority_factor=1.0)
        )
    )
    out["create_default_factor"] = outcome(
        lambda: client.create_queue(client.create_queue_request(tmp, priority_factor=None))
    )
    out["create_invalid"] = outcome(
        lambda: client.create_queue(client.create_queue_request("not a name", priority_factor=1.0))
    )
    out["create_queues"] = outcome(
        lambda: client.create_queues(
            [
                client.create_queue_request(extra, priority_factor=1.0),
                client.create_queue_request(name, priority_factor=1.0),
            ]
        )
    )
    out["update_queues"] = outcome(
        lambda: client.update_queues(
            [
                client.create_queue_request(extra, priority_factor=4.0),
                client.create_queue_request(f"{prefix}-ghost", priority_factor=1.0),
            ]
        )
    )
    out["listed"] = [as_dict(q) for q in client.get_queues()]
    out["delete"] = outcome(lambda: client.delete_queue(tmp))
    out["delete_extra"] = outcome(lambda: client.delete_queue(extra))
    out["get_deleted"] = outcome(lambda: client.get_queue(tmp))
    out["delete_missing"] = outcome(lambda: client.delete_queue(tmp))
    out["listed_after_delete"] = [q.name for q in client.get_queues()]
    return out


def task_generations(client: ArmadaClient, queue: str, job_set: str) -> dict[str, Any]:
    """Two attempts of one task (the annotations the task lifecycle stamps): the second is
    refused while the first's job is live, as an error the official client raises."""

    def attempt(number: str) -> Any:
        stamps = {
            "armadaproject.io/task": "compat/task",
            "armadaproject.io/task-attempt": number,
            "armadaproject.io/task-generation": "0",
        }
        item = client.create_job_request_item(
            pod_spec=pod_spec(), namespace="default", annotations=stamps
        )
        return outcome(lambda: client.submit_jobs(queue, job_set, [item]))

    return {"first": attempt("1"), "second": attempt("2")}


def jobs_scenario(client: ArmadaClient, queue: str, job_set: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    uri = f"airflow://compat/{job_set}/task/1"
    items = [
        client.create_job_request_item(
            priority=1.0,
            pod_spec=pod_spec(),
            namespace="default",
            client_id="single-1",
            labels={"team": "compat"},
            annotations={EXTERNAL_URI: uri},
        ),
        client.create_job_request_item(
            priority=2.0,
            pod_specs=[pod_spec("1", "1Gi", "armada-preemptible")],
            namespace="default",
            client_id="single-2",
        ),
    ]
    for _ in range(2):
        items.append(
            client.create_job_request_item(
                priority=1.0,
                pod_specs=[pod_spec("2", "2Gi", "armada-default")],
                namespace="default",
                annotations={
                    GANG: f"{job_set}-gang",
                    GANG_CARDINALITY: "3",
                    GANG_MINIMUM: "2",
                    GANG_LABEL: "zone",
                },
            )
        )
    # The third gang member comes in its own request, as a separate submitter would send it.
    late_member = client.create_job_request_item(
        priority=1.0,
        pod_specs=[pod_spec("2", "2Gi", "armada-default")],
        namespace="default",
        annotations={
            GANG: f"{job_set}-gang",
            GANG_CARDINALITY: "3",
            GANG_MINIMUM: "2",
            GANG_LABEL: "zone",
        },
    )
    by_field = client.create_job_request_item(pod_spec=pod_spec(), namespace="default")
    by_field.external_job_uri = f"{uri}-field"

    response = client.submit_jobs(queue, job_set, items)
    ids = [i.job_id for i in response.job_response_items]
    out["submit"] = as_dict(response)
    out["submit_late_member"] = outcome(lambda: client.submit_jobs(queue, job_set, [late_member]))
    by_field_answer = client.submit_jobs(queue, job_set, [by_field])
    ids.append(out["submit_late_member"]["job_response_items"][0]["job_id"])
    ids.append(by_field_answer.job_response_items[0].job_id)
    out["ids"] = ids
    # Resubmitting a known client_id returns the original id and stores nothing new.
    out["resubmit"] = outcome(
        lambda: client.submit_jobs(
            queue,
            job_set,
            [
                client.create_job_request_item(pod_spec=pod_spec(), client_id="single-2"),
                client.create_job_request_item(pod_spec=pod_spec(), client_id="single-1"),
            ],
        )
    )

    bad_quantity = pod_spec()
    bad_quantity.containers[0].resources.requests["cpu"].string = "lots"
    out["submit_bad_quantity"] = outcome(
        lambda: client.submit_jobs(
            queue,
            job_set,
            [
                client.create_job_request_item(pod_spec=pod_spec()),
                client.create_job_request_item(pod_spec=bad_quantity),
            ],
        )
    )
    out["submit_bad_gang"] = outcome(
        lambda: client.submit_jobs(
            queue,
            job_set,
            [
                client.create_job_request_item(
                    pod_spec=pod_spec(), annotations={GANG: "g", GANG_CARDINALITY: "two"}
                )
            ],
        )
    )
    out["submit_mismatched_gang"] = outcome(
        lambda: client.submit_jobs(
            queue,
            job_set,
            [
                client.create_job_request_item(
                    pod_spec=pod_spec(), annotations={GANG: "g2", GANG_CARDINALITY: "2"}
                ),
                client.create_job_request_item(
                    pod_spec=pod_spec(), annotations={GANG: "g2", GANG_CARDINALITY: "3"}
                ),
            ],
        )
    )
    out["submit_unknown_class"] = outcome(
        lambda: client.submit_jobs(
            queue,
            job_set,
            [client.create_job_request_item(pod_spec=pod_spec(priority_class="gold"))],
        )
    )
    out["kubernetes_refusals"] = kubernetes_refusals(client, queue, job_set)
    out["submit_missing_queue"] = outcome(
        lambda: client.submit_jobs(
            f"{queue}-ghost", job_set, [client.create_job_request_item(pod_spec=pod_spec())]
        )
    )
    # The test's server takes at most 5 items a request: the limit's error, as this client sees it.
    out["submit_too_many"] = outcome(
        lambda: client.submit_jobs(
            queue,
            job_set,
            [client.create_job_request_item(pod_spec=pod_spec()) for _ in range(6)],
        )
    )
    out["task_generations"] = task_generations(client, queue, f"{job_set}-task")

    out["status"] = state_names(client.get_job_status([*ids, UNKNOWN_ID]))
    out["details"] = as_dict(client.get_job_details(ids))
    out["errors"] = as_dict(client.get_job_errors([*ids, UNKNOWN_ID]))
    out["by_uri"] = state_names(client.get_job_status_by_external_job_uri(queue, job_set, uri))
    out["by_uri_field"] = state_names(
        client.get_job_status_by_external_job_uri(queue, job_set, f"{uri}-field")
    )
    out["by_uri_unknown"] = state_names(
        client.get_job_status_by_external_job_uri(queue, job_set, "nothing://here")
    )
    out["run_details"] = outcome(lambda: client.get_job_run_details(["no-such-run"]))

    out["reprioritize_one"] = outcome(
        lambda: client.reprioritize_jobs(
            new_priority=5.0, job_ids=[ids[0], UNKNOWN_ID], job_set_id=job_set, queue=queue
        )
    )
    out["reprioritize_set"] = outcome(
        lambda: client.reprioritize_jobs(
            new_priority=3.0, job_ids=None, job_set_id=job_set, queue=queue
        )
    )
    out["preempt_queued"] = outcome(lambda: client.preempt_jobs(queue, job_set, ids[1]))

    # Watch live: every submitted job's submitted + queued events, then its cancellation.
    # submitted + queued for each job, then reprioritizing + reprioritized for one, then all.
    expected_before = 2 * len(ids) + 2 + 2 * len(ids)
    watcher = Watcher(client, queue, job_set, set(ids))
    watcher.wait_for(expected_before)
    out["seen_before_cancel"] = len(watcher.events)
    out["cancel_one"] = outcome(lambda: client.cancel_jobs(queue, job_set, job_id=ids[0]))
    out["cancel_again"] = outcome(lambda: client.cancel_jobs(queue, job_set, job_id=ids[0]))
    out["cancel_set"] = outcome(
        lambda: client.cancel_jobset(
            queue, job_set, [JobState.QUEUED, JobState.PENDING, JobState.RUNNING]
        )
    )
    out["watch"] = watcher.finish()
    events = out["watch"]["events"]

    # Resume strictly after a message id, through the official stream.
    if len(events) > 4:
        resumed = Watcher(client, queue, job_set, set(ids), from_message_id=events[3]["id"])
        out["resumed"] = resumed.finish()
    out["status_after"] = state_names(client.get_job_status(ids))
    out["details_after"] = as_dict(client.get_job_details(ids))
    out["errors_after"] = as_dict(client.get_job_errors(ids))
    out["reprioritize_cancelled"] = outcome(
        lambda: client.reprioritize_jobs(
            new_priority=9.0, job_ids=[ids[0]], job_set_id=job_set, queue=queue
        )
    )
    out["watch_missing_set"] = watch_missing(client, queue, f"{job_set}-never")
    return out


def watch_missing(client: ArmadaClient, queue: str, job_set: str) -> Any:
    """The official stream asks with errorIfMissing: an empty job set is NOT_FOUND."""
    stream = client.get_job_events_stream(queue, job_set)
    try:
        first = next(stream)
        return {"unexpected": as_dict(first)}
    except grpc.RpcError as e:
        return {"error": e.code().name, "details": e.details()}
    finally:
        client.unwatch_events(stream)


async def async_scenario(address: str, queue: str, job_set: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        client = ArmadaAsyncIOClient(channel)
        health = [await client.submit_health(), await client.event_health()]
        out["health"] = [type(h).ServingStatus.Name(h.status) for h in health]
        out["queue"] = as_dict(await client.get_queue(queue))
        out["queues"] = [q.name for q in await client.get_queues()]
        response = await client.submit_jobs(
            queue,
            job_set,
            [
                client.create_job_request_item(
                    pod_spec=pod_spec(), namespace="default", client_id="async-1"
                )
            ],
        )
        [job_id] = [i.job_id for i in response.job_response_items]
        out["job_id"] = job_id
        stream = await client.get_job_events_stream(queue, job_set)
        kinds: list[str] = []

        async def read() -> None:
            async for message in stream:
                event = client.unmarshal_event_response(message)
                kinds.append(event.type.value)
                if len(kinds) == 2:
                    await client.cancel_jobs(queue, job_set, job_id=job_id)
                if event.type.value == "cancelled":
                    return

        try:
            await asyncio.wait_for(read(), WATCH_TIMEOUT)
        except TimeoutError:
            kinds.append("timeout")
        finally:
            client.unwatch_events(stream)
        out["events"] = kinds
        out["status"] = state_names(await client.get_job_status([job_id, UNKNOWN_ID]))
        details = await client.get_job_details([job_id])
        out["details"] = as_dict(details)
    return out


def main() -> None:
    request = json.load(sys.stdin)
    address, prefix = request["address"], request["prefix"]
    with grpc.insecure_channel(address) as channel:
        client = ArmadaClient(channel)
        health = [client.submit_health(), client.event_health()]
        out: dict[str, Any] = {
            "health": [type(h).ServingStatus.Name(h.status) for h in health],
            "queues": queue_crud(client, prefix),
        }
        out["jobs"] = jobs_scenario(client, f"{prefix}-main", f"{prefix}-set")
    out["async"] = asyncio.run(async_scenario(address, f"{prefix}-main", f"{prefix}-async"))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
