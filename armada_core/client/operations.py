"""Each unary RPC as a request plus the way to read its answer, shared by both clients.

The sync and asyncio clients differ only in how they invoke a call; what goes on the wire and
what comes back to the caller is defined once here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from armada_core.api import (
    binoculars_pb2,
    binoculars_pb2_grpc,
    event_pb2_grpc,
    health_pb2,
    job_pb2,
    job_pb2_grpc,
    nodes_pb2,
    nodes_pb2_grpc,
    scheduler_reporting_pb2,
    scheduler_reporting_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
    tasks_pb2,
    tasks_pb2_grpc,
)
from armada_core.api.k8s import core_v1_pb2
from armada_core.retry import RetryPolicy, policy_to_proto

from .errors import SubmitRejected

R = TypeVar("R")

#: A job state by number (submit_pb2.QUEUED) or name ("queued", "QUEUED").
StateLike = int | str


@dataclass(frozen=True)
class Call(Generic[R]):
    """One unary call: which service and method, the request, how to read the response."""

    service: str
    method: str
    request: Message
    unpack: Callable[[Any], R]

    @property
    def name(self) -> str:
        return f"{self.service}/{self.method}"


def service_stubs(
    channel: grpc.Channel | grpc.aio.Channel, logs_channel: grpc.Channel | grpc.aio.Channel
) -> dict[str, Any]:
    """Each service's stub on a channel (blocking or asyncio), by the name `Call.service`
    gives; binoculars (logs) may be served elsewhere."""
    return {
        "Submit": submit_pb2_grpc.SubmitStub(channel),
        "QueueService": submit_pb2_grpc.QueueServiceStub(channel),
        "RetryPolicyService": submit_pb2_grpc.RetryPolicyServiceStub(channel),
        "Event": event_pb2_grpc.EventStub(channel),
        "Jobs": job_pb2_grpc.JobsStub(channel),
        "Nodes": nodes_pb2_grpc.NodesStub(channel),
        "TaskJobs": tasks_pb2_grpc.TaskJobsStub(channel),
        "SchedulerReporting": scheduler_reporting_pb2_grpc.SchedulerReportingStub(channel),
        "Binoculars": binoculars_pb2_grpc.BinocularsStub(logs_channel),
    }


def _nothing(_: Any) -> None:
    return None


def job_state(value: StateLike) -> submit_pb2.JobState.ValueType:
    """A JobState number from a number or a (case-insensitive) name."""
    if isinstance(value, str):
        try:
            return submit_pb2.JobState.Value(value.upper())
        except ValueError:
            known = ", ".join(n.lower() for n in submit_pb2.JobState.keys())  # noqa: SIM118
            raise ValueError(f"unknown job state {value!r} (known: {known})") from None
    if value not in submit_pb2.JobState.values():
        raise ValueError(f"unknown job state number {value}")
    return submit_pb2.JobState.ValueType(value)


def _retry_policy(policy: RetryPolicy | submit_pb2.RetryPolicy) -> submit_pb2.RetryPolicy:
    return policy if isinstance(policy, submit_pb2.RetryPolicy) else policy_to_proto(policy)


# --- Submit -----------------------------------------------------------------------------------


def _submitted(response: submit_pb2.JobSubmitResponse) -> list[str]:
    errors = [f"item {i}: {r.error}" for i, r in enumerate(response.job_response_items) if r.error]
    if errors:
        raise SubmitRejected("; ".join(errors), method="Submit/SubmitJobs")
    return [r.job_id for r in response.job_response_items]


@dataclass(frozen=True)
class Submission:
    """What SubmitJobs answers: the jobs' ids, in the items' order, and what the server notes
    of them (an extension of ours, e.g. that no executor has connected yet, so whether the
    jobs fit a node was not checked; upstream Armada sends none)."""

    job_ids: list[str]
    notes: list[str]


def submit(
    queue: str, job_set_id: str, items: Iterable[submit_pb2.JobSubmitRequestItem]
) -> Call[Submission]:
    request = submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id=job_set_id, job_request_items=list(items)
    )
    return Call("Submit", "SubmitJobs", request, lambda r: Submission(_submitted(r), list(r.notes)))


def submit_jobs(
    queue: str, job_set_id: str, items: Iterable[submit_pb2.JobSubmitRequestItem]
) -> Call[list[str]]:
    call = submit(queue, job_set_id, items)
    return Call(call.service, call.method, call.request, _submitted)


def cancel_jobs(
    queue: str, job_set_id: str, job_ids: Iterable[str], reason: str = ""
) -> Call[list[str]]:
    request = submit_pb2.JobCancelRequest(
        queue=queue, job_set_id=job_set_id, job_ids=list(job_ids), reason=reason
    )
    return Call("Submit", "CancelJobs", request, lambda r: list(r.cancelled_ids))


def cancel_job_set(
    queue: str, job_set_id: str, states: Iterable[StateLike] = (), reason: str = ""
) -> Call[None]:
    request = submit_pb2.JobSetCancelRequest(
        queue=queue,
        job_set_id=job_set_id,
        reason=reason,
        filter=submit_pb2.JobSetFilter(states=[job_state(s) for s in states]),
    )
    return Call("Submit", "CancelJobSet", request, _nothing)


def reprioritize_jobs(
    queue: str, job_set_id: str, new_priority: float, job_ids: Iterable[str] = ()
) -> Call[dict[str, str]]:
    request = submit_pb2.JobReprioritizeRequest(
        queue=queue, job_set_id=job_set_id, job_ids=list(job_ids), new_priority=new_priority
    )
    return Call("Submit", "ReprioritizeJobs", request, lambda r: dict(r.reprioritization_results))


def preempt_jobs(
    queue: str, job_set_id: str, job_ids: Iterable[str], reason: str = ""
) -> Call[dict[str, str]]:
    request = submit_pb2.JobPreemptRequest(
        queue=queue, job_set_id=job_set_id, job_ids=list(job_ids), reason=reason
    )
    return Call("Submit", "PreemptJobs", request, lambda r: dict(r.preemption_results))


def health(service: str = "Submit") -> Call[int]:
    """Submit/Health or Event/Health: a HealthCheckResponse.ServingStatus number."""
    return Call(service, "Health", empty_pb2.Empty(), lambda r: int(r.status))


SERVING = health_pb2.HealthCheckResponse.SERVING


# --- QueueService -----------------------------------------------------------------------------


def queue(
    name: str,
    *,
    priority_factor: float = 1.0,
    user_owners: Iterable[str] = (),
    group_owners: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
    retry_policies: Iterable[str] = (),
    cordoned: bool = False,
    permissions: Iterable[tuple[Iterable[tuple[str, str]], Iterable[str]]] = (),
) -> submit_pb2.Queue:
    """A Queue message; `permissions` are (subjects as (kind, name) pairs, verbs)."""
    msg = submit_pb2.Queue(
        name=name,
        priority_factor=priority_factor,
        user_owners=list(user_owners),
        group_owners=list(group_owners),
        retry_policies=list(retry_policies),
        cordoned=cordoned,
    )
    msg.labels.update(labels or {})
    for subjects, verbs in permissions:
        msg.permissions.add(
            subjects=[submit_pb2.Queue.Permissions.Subject(kind=k, name=n) for k, n in subjects],
            verbs=list(verbs),
        )
    return msg


def create_queue(q: submit_pb2.Queue) -> Call[None]:
    return Call("QueueService", "CreateQueue", q, _nothing)


def create_queues(queues: Iterable[submit_pb2.Queue]) -> Call[list[submit_pb2.QueueCreateResponse]]:
    return Call(
        "QueueService",
        "CreateQueues",
        submit_pb2.QueueList(queues=list(queues)),
        lambda r: list(r.failed_queues),
    )


def update_queue(q: submit_pb2.Queue) -> Call[None]:
    return Call("QueueService", "UpdateQueue", q, _nothing)


def update_queues(queues: Iterable[submit_pb2.Queue]) -> Call[list[submit_pb2.QueueUpdateResponse]]:
    return Call(
        "QueueService",
        "UpdateQueues",
        submit_pb2.QueueList(queues=list(queues)),
        lambda r: list(r.failed_queues),
    )


def delete_queue(name: str) -> Call[None]:
    return Call("QueueService", "DeleteQueue", submit_pb2.QueueDeleteRequest(name=name), _nothing)


def get_queue(name: str) -> Call[submit_pb2.Queue]:
    return Call("QueueService", "GetQueue", submit_pb2.QueueGetRequest(name=name), lambda r: r)


def queues_until_end(
    messages: Iterable[submit_pb2.StreamingQueueMessage],
) -> list[submit_pb2.Queue]:
    """The queues a GetQueues stream carries, up to its end marker."""
    queues: list[submit_pb2.Queue] = []
    for message in messages:
        if message.WhichOneof("event") == "end":
            break
        queues.append(message.queue)
    return queues


def cordon_queue(name: str) -> Call[None]:
    return Call("QueueService", "CordonQueue", submit_pb2.QueueCordonRequest(name=name), _nothing)


def uncordon_queue(name: str) -> Call[None]:
    return Call(
        "QueueService", "UncordonQueue", submit_pb2.QueueUncordonRequest(name=name), _nothing
    )


def preempt_on_queue(
    name: str, priority_classes: Iterable[str] = (), pools: Iterable[str] = ()
) -> Call[None]:
    request = submit_pb2.QueuePreemptRequest(
        name=name, priorityClasses=list(priority_classes), pools=list(pools)
    )
    return Call("QueueService", "PreemptOnQueue", request, _nothing)


def cancel_on_queue(
    name: str,
    priority_classes: Iterable[str] = (),
    states: Iterable[StateLike] = (),
    pools: Iterable[str] = (),
) -> Call[None]:
    request = submit_pb2.QueueCancelRequest(
        name=name,
        priorityClasses=list(priority_classes),
        jobStates=[job_state(s) for s in states],
        pools=list(pools),
    )
    return Call("QueueService", "CancelOnQueue", request, _nothing)


# --- RetryPolicyService -----------------------------------------------------------------------


def create_retry_policy(policy: RetryPolicy | submit_pb2.RetryPolicy) -> Call[None]:
    return Call("RetryPolicyService", "CreateRetryPolicy", _retry_policy(policy), _nothing)


def update_retry_policy(policy: RetryPolicy | submit_pb2.RetryPolicy) -> Call[None]:
    return Call("RetryPolicyService", "UpdateRetryPolicy", _retry_policy(policy), _nothing)


def delete_retry_policy(name: str) -> Call[None]:
    return Call(
        "RetryPolicyService",
        "DeleteRetryPolicy",
        submit_pb2.RetryPolicyDeleteRequest(name=name),
        _nothing,
    )


def get_retry_policy(name: str) -> Call[submit_pb2.RetryPolicy]:
    return Call(
        "RetryPolicyService",
        "GetRetryPolicy",
        submit_pb2.RetryPolicyGetRequest(name=name),
        lambda r: r,
    )


def get_retry_policies() -> Call[list[submit_pb2.RetryPolicy]]:
    return Call(
        "RetryPolicyService",
        "GetRetryPolicies",
        submit_pb2.RetryPolicyListRequest(),
        lambda r: list(r.retry_policies),
    )


# --- Jobs -------------------------------------------------------------------------------------


def get_job_status(job_ids: Iterable[str]) -> Call[dict[str, int]]:
    return Call(
        "Jobs",
        "GetJobStatus",
        job_pb2.JobStatusRequest(job_ids=list(job_ids)),
        lambda r: dict(r.job_states),
    )


def get_job_status_by_external_uri(
    queue: str, job_set_id: str, external_job_uri: str
) -> Call[dict[str, int]]:
    request = job_pb2.JobStatusUsingExternalJobUriRequest(
        queue=queue, jobset=job_set_id, external_job_uri=external_job_uri
    )
    return Call("Jobs", "GetJobStatusUsingExternalJobUri", request, lambda r: dict(r.job_states))


def get_job_details(
    job_ids: Iterable[str], expand_job_spec: bool = False, expand_job_run: bool = False
) -> Call[dict[str, job_pb2.JobDetails]]:
    request = job_pb2.JobDetailsRequest(
        job_ids=list(job_ids), expand_job_spec=expand_job_spec, expand_job_run=expand_job_run
    )
    return Call("Jobs", "GetJobDetails", request, lambda r: dict(r.job_details))


def get_job_errors(job_ids: Iterable[str]) -> Call[dict[str, str]]:
    return Call(
        "Jobs",
        "GetJobErrors",
        job_pb2.JobErrorsRequest(job_ids=list(job_ids)),
        lambda r: dict(r.job_errors),
    )


def get_job_run_details(run_ids: Iterable[str]) -> Call[dict[str, job_pb2.JobRunDetails]]:
    return Call(
        "Jobs",
        "GetJobRunDetails",
        job_pb2.JobRunDetailsRequest(run_ids=list(run_ids)),
        lambda r: dict(r.job_run_details),
    )


def get_active_queues() -> Call[dict[str, list[str]]]:
    return Call(
        "Jobs",
        "GetActiveQueues",
        job_pb2.GetActiveQueuesRequest(),
        lambda r: {pool: list(q.queues) for pool, q in r.active_queues_by_pool.items()},
    )


def get_nodes(executor: str = "") -> Call[list[nodes_pb2.NodeStatus]]:
    """Every executor's nodes (our extension service `api.Nodes`)."""
    return Call(
        "Nodes",
        "GetNodes",
        nodes_pb2.NodeListRequest(executor=executor),
        lambda r: list(r.nodes),
    )


@dataclass(frozen=True)
class Report:
    """A scheduler report (SchedulerReporting): the text for people, as upstream sends it,
    and the same as data (our extension; empty from an upstream server)."""

    text: str
    data: dict[str, Any]


def _report(
    response: scheduler_reporting_pb2.SchedulingReport
    | scheduler_reporting_pb2.QueueReport
    | scheduler_reporting_pb2.JobReport,
) -> Report:
    return Report(response.report, json.loads(response.json) if response.json else {})


def scheduling_report(pool: str = "", cycles: int = 0) -> Call[Report]:
    """The latest scheduling cycles (`cycles`, 0: the server's default), one pool's counts
    only with `pool`."""
    request = scheduler_reporting_pb2.SchedulingReportRequest(pool=pool, cycles=cycles)
    return Call("SchedulerReporting", "GetSchedulingReport", request, _report)


def queue_report(queue: str) -> Call[Report]:
    """A queue's standing, its waiting jobs by reason and what holds it back."""
    request = scheduler_reporting_pb2.QueueReportRequest(queue_name=queue)
    return Call("SchedulerReporting", "GetQueueReport", request, _report)


def job_report(job_id: str) -> Call[Report]:
    """A job's reasons over the cycles, its place in line, the nodes closest to holding it."""
    request = scheduler_reporting_pb2.JobReportRequest(job_id=job_id)
    return Call("SchedulerReporting", "GetJobReport", request, _report)


def get_live_task_jobs(
    queue: str = "", orchestrator: str = ""
) -> Call[list[tasks_pb2.LiveTaskJob]]:
    """Live jobs of orchestrator tasks in `queue` ("": every queue the caller may watch), by
    job id (our extension service `api.TaskJobs`)."""
    return Call(
        "TaskJobs",
        "GetLiveTaskJobs",
        tasks_pb2.LiveTaskJobsRequest(queue=queue, orchestrator=orchestrator),
        lambda r: list(r.jobs),
    )


# --- Binoculars -------------------------------------------------------------------------------


def logs(
    job_id: str,
    *,
    pod_number: int = 0,
    namespace: str = "",
    since_time: str = "",
    tail_lines: int | None = None,
    timestamps: bool = False,
    container: str = "",
    previous: bool = False,
    run_id: str = "",
) -> Call[list[binoculars_pb2.LogLine]]:
    """With `run_id` (our extension), the logs of that run of the job rather than of its
    latest: job_id is then left out, so that a server without the extension refuses the call
    rather than answering with the latest run's logs."""
    options = core_v1_pb2.PodLogOptions()
    if container:
        options.container = container
    if tail_lines is not None:
        options.tailLines = tail_lines
    if timestamps:
        options.timestamps = True
    if previous:
        options.previous = True
    request = binoculars_pb2.LogRequest(
        job_id="" if run_id else job_id,
        pod_number=pod_number,
        pod_namespace=namespace,
        since_time=since_time,
        log_options=options,
        run_id=run_id,
    )
    return Call("Binoculars", "Logs", request, lambda r: list(r.log))


def cordon_node(node: str) -> Call[None]:
    """`node` is `NODE`, or `EXECUTOR/NODE` when several executors have a node of that name."""
    return Call("Binoculars", "Cordon", binoculars_pb2.CordonRequest(node_name=node), _nothing)


def uncordon_node(node: str) -> Call[None]:
    """Our extension of Cordon (field 100); a server without it refuses the empty node_name."""
    return Call(
        "Binoculars", "Cordon", binoculars_pb2.CordonRequest(uncordon_node_name=node), _nothing
    )
