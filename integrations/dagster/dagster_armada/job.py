"""Running an Armada job (or gang) as part of a Dagster step: the shared path behind
`execute_armada_job`, the asset/op factories and `PipesArmadaClient`.

Submission is idempotent: the client id is derived from the Dagster run id, step key and retry
number, so a step re-executed after its process crashed (a resumed run) gets the same job ids
back from the server and waits on the jobs it started before, instead of submitting again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import AssetExecutionContext, MetadataValue, OpExecutionContext, RetryPolicy
from dagster._core.errors import DagsterExecutionInterruptedError

from armada_core.api import event_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.client import (
    ArmadaError,
    JobLogFollower,
    JobResult,
    PodSpecLike,
    gang_items,
    job_item,
)
from armada_core.client import pod_spec as to_pod_spec
from armada_core.retry import OutcomeReport

from .outcome import raise_for_outcome
from .resource import ArmadaResource

AnyContext = OpExecutionContext | AssetExecutionContext

#: Annotations that tie a job to the Dagster step that submitted it.
RUN_ID_ANNOTATION = "dagster.io/run-id"
STEP_KEY_ANNOTATION = "dagster.io/step-key"
RETRY_ANNOTATION = "dagster.io/retry-number"


@dataclass(frozen=True)
class StepIdentity:
    """Who is submitting: the Dagster run, step and attempt."""

    run_id: str
    step_key: str
    retry_number: int
    job_name: str = ""
    retry_policy: RetryPolicy | None = None

    @property
    def client_id(self) -> str:
        """Deterministic, so a resubmission by the same attempt is deduplicated."""
        return f"dagster-{self.run_id}-{self.step_key}-{self.retry_number}"

    @property
    def external_job_uri(self) -> str:
        return f"dagster://{self.run_id}/{self.step_key}/{self.retry_number}"


def step_identity(context: AnyContext) -> StepIdentity:
    """The run id, step key, retry number and RetryPolicy of the executing step."""
    op_context = (context.op_execution_context if isinstance(context, AssetExecutionContext)
                  else context)
    step_key = op_context.op_def.name
    policy: RetryPolicy | None = None
    job_name = ""
    try:
        step_context = op_context.get_step_execution_context()
        step_key = step_context.step.key
        policy = step_context.op_retry_policy
        job_name = op_context.job_name
    except Exception:  # direct invocation (build_op_context): no plan, no step
        pass
    return StepIdentity(run_id=op_context.run_id, step_key=step_key,
                        retry_number=op_context.retry_number, job_name=job_name,
                        retry_policy=policy)


def container_pod_spec(command: Sequence[str], *, image: str = "python:3.11",
                       cpu: str = "1", memory: str = "1Gi", env: Mapping[str, str] | None = None,
                       name: str = "main", **pod: Any) -> dict[str, Any]:
    """A one-container pod spec with equal requests and limits (what Armada wants)."""
    container: dict[str, Any] = {
        "name": name, "image": image, "command": list(command),
        "resources": {"requests": {"cpu": cpu, "memory": memory},
                      "limits": {"cpu": cpu, "memory": memory}}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"containers": [container], **pod}


def with_env(spec: PodSpecLike, env: Mapping[str, str]) -> core_v1_pb2.PodSpec:
    """The pod spec with `env` set in every container (replacing same-named variables)."""
    pod = to_pod_spec(spec)
    if env:
        for container in pod.containers:
            kept = [v for v in container.env if v.name not in env]
            del container.env[:]
            container.env.extend(kept)
            container.env.extend(core_v1_pb2.EnvVar(name=k, value=v) for k, v in env.items())
    return pod


def build_items(armada: ArmadaResource, identity: StepIdentity, pod_spec: PodSpecLike |
                Sequence[PodSpecLike], *, replicas: int | None = None,
                env: Mapping[str, str] | None = None, client_id: str | None = None,
                **job: Any) -> list[submit_pb2.JobSubmitRequestItem]:
    """Job items for one job (a single spec, no replicas) or a gang (replicas or a list)."""
    annotations = {RUN_ID_ANNOTATION: identity.run_id, STEP_KEY_ANNOTATION: identity.step_key,
                   RETRY_ANNOTATION: str(identity.retry_number),
                   **(job.pop("annotations", None) or {})}
    job.setdefault("namespace", armada.namespace)
    if armada.priority_class is not None:
        job.setdefault("priority_class", armada.priority_class)
    job.setdefault("external_job_uri", identity.external_job_uri)
    cid = client_id or identity.client_id
    if isinstance(pod_spec, (list, tuple)) or replicas is not None:
        specs: Any = ([with_env(s, env or {}) for s in pod_spec]
                      if isinstance(pod_spec, (list, tuple)) else with_env(pod_spec, env or {}))
        return gang_items(specs, replicas=replicas, client_id=cid, annotations=annotations,
                          **job)
    return [job_item(with_env(pod_spec, env or {}), client_id=cid, annotations=annotations,
                     **job)]


@dataclass
class ArmadaJobRun:
    """A finished job or gang: ids, per-job results and when each ran."""

    queue: str
    job_set_id: str
    job_ids: list[str]
    results: dict[str, JobResult]
    report: OutcomeReport
    started: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)

    @property
    def is_gang(self) -> bool:
        return len(self.job_ids) > 1

    @property
    def duration_seconds(self) -> float | None:
        """From the first member starting its last run to the last member ending."""
        if not self.started or not self.ended:
            return None
        return round(max(self.ended.values()) - min(self.started.values()), 3)

    def metadata(self) -> dict[str, Any]:
        """Materialization / output metadata: job id, run id, node, duration, exit code,
        links, queue and job set."""
        results = [self.results[j] for j in self.job_ids]
        codes = [code for r in results for code in r.exit_codes.values()]
        metadata: dict[str, Any] = {
            "armada/job_id": self.job_ids[0],
            "armada/run_id": results[0].run_id,
            "armada/node": results[0].node,
            "armada/queue": self.queue,
            "armada/job_set_id": self.job_set_id,
            "armada/exit_code": max(codes, key=abs) if codes else 0,
            "armada/state": results[0].state_name,
        }
        if self.duration_seconds is not None:
            metadata["armada/duration_seconds"] = self.duration_seconds
        if self.is_gang:
            metadata["armada/job_ids"] = list(self.job_ids)
            metadata["armada/run_ids"] = [r.run_id for r in results]
            metadata["armada/nodes"] = [r.node for r in results]
        retries = sum(len(r.retryable_failures) for r in results)
        if retries:
            metadata["armada/server_retries"] = retries
        for job_id, url in self.urls.items():
            key = "armada/link" if not self.is_gang else f"armada/link/{job_id}"
            metadata[key] = MetadataValue.url(url)
        return {k: v for k, v in metadata.items() if v not in (None, "")}


class _Timeline:
    """When each job started its latest run and ended, from the events' own timestamps."""

    def __init__(self, context: AnyContext, job_ids: Sequence[str]) -> None:
        self.context = context
        self.gang = len(job_ids) > 1
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    def __call__(self, message: event_pb2.EventStreamMessage, result: JobResult) -> None:
        kind = message.message.WhichOneof("events")
        if kind is None:
            return
        event = getattr(message.message, kind)
        when = event.created.ToNanoseconds() / 1e9 if event.HasField("created") else None
        if kind == "running" and when is not None:
            self.started[result.job_id] = when
            self.context.log.info(f"Armada job {result.job_id} is running on "
                                  f"{result.node or 'a node'}")
        elif kind in ("succeeded", "failed", "cancelled", "preempted") and when is not None:
            self.ended[result.job_id] = when
        if kind == "failed" and event.retryable:
            self.context.log.warning(f"Armada job {result.job_id} failed "
                                     f"({event.reason or 'no reason given'}); the server "
                                     "retries it")
        elif kind == "preempted":
            self.context.log.warning(f"Armada job {result.job_id} was preempted")


def _line_forwarder(context: AnyContext, armada: ArmadaResource, gang: bool,
                    destination: str | None) -> Callable[[str, str], None]:
    to_stdout, to_event_log = armada.log_lines_to(destination)  # type: ignore[arg-type]

    def forward(job_id: str, line: str) -> None:
        text = f"[{job_id}] {line}" if gang else line
        if to_stdout:
            print(text, file=sys.stdout, flush=True)
        if to_event_log:
            context.log.info(f"[armada {job_id}] {line}")
    return forward


def run_items(context: AnyContext, armada: ArmadaResource,
              items: Sequence[submit_pb2.JobSubmitRequestItem], *,
              identity: StepIdentity | None = None, job_set_id: str | None = None,
              log_destination: str | None = None, follow_logs: bool = True,
              on_submitted: Callable[[str, list[str]], None] | None = None,
              timeout: float | None = None) -> ArmadaJobRun:
    """Submit (idempotently), stream logs, wait through server retries, cancel on run
    termination, and map the end to Dagster: returns on success, else raises RetryRequested
    or Failure (see outcome.py)."""
    identity = identity or step_identity(context)
    job_set = job_set_id or armada.job_set_for(identity.run_id, identity.job_name)
    ids = armada.submit_items(job_set, items)
    what = f"gang of {len(ids)} jobs" if len(ids) > 1 else "job"
    context.log.info(f"Armada {what} {', '.join(ids)} in queue {armada.queue!r}, job set "
                     f"{job_set!r} (client id {items[0].client_id!r})")
    if on_submitted is not None:
        on_submitted(job_set, ids)
    timeline = _Timeline(context, ids)
    follower = None
    if follow_logs and armada.log_lines_to(log_destination) != (False, False):  # type: ignore[arg-type]
        follower = JobLogFollower(armada.get_client(), ids,
                                  _line_forwarder(context, armada, len(ids) > 1,
                                                  log_destination),
                                  interval=armada.log_poll_interval,
                                  on_warning=context.log.warning).start()
    try:
        results = armada.wait(ids, job_set_id=job_set, on_event=timeline, timeout=timeout)
    except (DagsterExecutionInterruptedError, KeyboardInterrupt):
        context.log.warning(f"Dagster run interrupted: cancelling Armada {what} "
                            f"{', '.join(ids)}")
        try:
            armada.cancel(ids, job_set_id=job_set, reason=f"Dagster run {identity.run_id} was "
                                                          "terminated")
        except ArmadaError as e:
            context.log.error(f"could not cancel Armada {what} {', '.join(ids)}: {e}")
        raise
    finally:
        if follower is not None:
            follower.stop()
    report = raise_for_outcome(results, retry_policy=identity.retry_policy,
                               retry_number=identity.retry_number,
                               max_infrastructure_retries=armada.max_infrastructure_retries)
    run = ArmadaJobRun(queue=armada.queue, job_set_id=job_set, job_ids=ids, results=results,
                       report=report, started=timeline.started, ended=timeline.ended,
                       urls={j: u for j in ids if (u := armada.job_url(j, job_set))})
    context.log.info(f"Armada {what} {', '.join(ids)} succeeded")
    return run


def execute_armada_job(context: AnyContext, armada: ArmadaResource,
                       pod_spec: PodSpecLike | Sequence[PodSpecLike] | None = None, *,
                       command: Sequence[str] | None = None, image: str = "python:3.11",
                       cpu: str = "1", memory: str = "1Gi",
                       env: Mapping[str, str] | None = None, replicas: int | None = None,
                       job_set_id: str | None = None, client_id: str | None = None,
                       log_destination: str | None = None, timeout: float | None = None,
                       **job: Any) -> ArmadaJobRun:
    """Run a job (or, with `replicas` or a list of pod specs, a gang) from inside an op or
    asset and return it once every member succeeded.

    Give a full `pod_spec` (V1PodSpec, dict, YAML or protobuf) or just a `command`. Other
    keyword arguments go to armada_core's `job_item`/`gang_items` (priority, labels,
    annotations, retry_policy, minimum_cardinality, node_uniformity_label, ...).
    """
    if pod_spec is None:
        if command is None:
            raise ValueError("give a pod_spec or a command")
        pod_spec = container_pod_spec(command, image=image, cpu=cpu, memory=memory)
    identity = step_identity(context)
    items = build_items(armada, identity, pod_spec, replicas=replicas, env=env,
                        client_id=client_id, **job)
    return run_items(context, armada, items, identity=identity, job_set_id=job_set_id,
                     log_destination=log_destination, timeout=timeout)
