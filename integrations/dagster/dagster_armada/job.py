"""Running an Armada job (or gang, or elastic pod group) as part of a Dagster step: the shared
path behind
`execute_armada_job`, the asset/op factories and `PipesArmadaClient`.

Submission follows the task lifecycle every integration shares
(`armada_core.client.lifecycle`). A step is a `TaskIdentity`: the task is the root run of its
re-execution lineage plus the step key (the same for every run that re-executes the step), the
attempt is the run id plus the step's retry number. So:

- the same attempt again (a resumed run after its worker crashed) reattaches to its jobs while
  they can still succeed or did;
- a new attempt (a Dagster step retry, or a re-execution under a new run id such as a run
  retry) cancels the jobs earlier attempts left running, in its own job set and in the job sets
  of the earlier runs of the lineage, and waits for their end before submitting: one step
  never has two jobs running at once, and a killed run leaves no zombie behind.
"""

from __future__ import annotations

import dataclasses
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
    JobResult,
    PodSpecLike,
    Role,
    gang_items,
    job_item,
    pod_group_items,
)
from armada_core.client import pod_spec as to_pod_spec
from armada_core.client.lifecycle import (
    ATTEMPT_ANNOTATION,
    Submission,
    TaskIdentity,
    result_payload,
    submit_or_reattach,
    wait,
)
from armada_core.client.reattach import LIVE_STATES
from armada_core.retry import OutcomeReport

from .instance_id import INSTANCE_ANNOTATION, instance_digest
from .outcome import raise_for_outcome
from .resource import ArmadaResource, LogDestination

AnyContext = OpExecutionContext | AssetExecutionContext
Items = list[submit_pb2.JobSubmitRequestItem]
#: Makes a step's request items from the client id the lifecycle chose.
BuildItems = Callable[[str], Items]

#: The orchestrator part of every Dagster task identity (and of its external job URI).
ORCHESTRATOR = "dagster"

#: Annotations that tie a job to the Dagster step that submitted it.
RUN_ID_ANNOTATION = "dagster.io/run-id"
STEP_KEY_ANNOTATION = "dagster.io/step-key"
RETRY_ANNOTATION = "dagster.io/retry-number"

#: Dagster's run tags naming a re-execution's lineage.
PARENT_RUN_ID_TAG = "dagster/parent_run_id"
ROOT_RUN_ID_TAG = "dagster/root_run_id"

#: Longest lineage followed (a guard against a cycle in corrupt run storage).
_MAX_LINEAGE = 1000


@dataclass(frozen=True)
class StepIdentity:
    """Who is submitting: the Dagster run, step and attempt, and the Armada task they are.

    `task` is what the lifecycle submits and reattaches under (see the module docstring;
    derived from the other fields when not given, without earlier job sets);
    `earlier_runs` lists the re-execution lineage's earlier runs, parent first up to the root,
    as (run id, job name).
    """

    run_id: str
    step_key: str
    retry_number: int
    job_name: str = ""
    retry_policy: RetryPolicy | None = None
    root_run_id: str = ""
    earlier_runs: tuple[tuple[str, str], ...] = ()
    #: The submitting instance's `instance_digest` ("" when unknown: the job is not stamped).
    instance: str = ""
    task: TaskIdentity = field(default_factory=lambda: TaskIdentity(ORCHESTRATOR, "", ""))

    def __post_init__(self) -> None:
        if not self.task.task:
            object.__setattr__(
                self,
                "task",
                task_identity(
                    root_run_id=self.root_run_id or self.run_id,
                    step_key=self.step_key,
                    run_id=self.run_id,
                    retry_number=self.retry_number,
                ),
            )


def task_identity(
    *,
    root_run_id: str,
    step_key: str,
    run_id: str,
    retry_number: int,
    job_sets: Sequence[str] = (),
    key: str = "",
) -> TaskIdentity:
    """The task identity of a step: task = root run id + step key (+ `key`, when one step
    submits several jobs), attempt = run id + retry number, searched in `job_sets` too."""
    task = f"{root_run_id}/{step_key}" + (f"/{key}" if key else "")
    name = f"{step_key}-{key}" if key else step_key
    return TaskIdentity(
        ORCHESTRATOR,
        task,
        f"{run_id}/{retry_number}",
        name=name,
        job_sets=tuple(dict.fromkeys(job_sets)),
    )


def run_lineage(context: AnyContext) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(root run id, earlier runs) of the executing run: walks `dagster/parent_run_id`
    through the instance up to the root. A parent missing from the instance (deleted) still
    counts, with this run's job name, and ends the walk at the root the run's tags name."""
    op_context = _op_context(context)
    try:
        run = op_context.run
    except Exception:  # direct invocation (build_op_context): no run, no lineage
        return op_context.run_id, ()
    root = run.tags.get(ROOT_RUN_ID_TAG) or run.root_run_id or run.run_id
    earlier: list[tuple[str, str]] = []
    seen = {run.run_id}
    parent_id = run.tags.get(PARENT_RUN_ID_TAG) or run.parent_run_id
    while parent_id and parent_id not in seen and len(earlier) < _MAX_LINEAGE:
        seen.add(parent_id)
        try:
            parent = op_context.instance.get_run_by_id(parent_id)
        except Exception:  # storage unreachable: the tags still name the root
            parent = None
        earlier.append((parent_id, parent.job_name if parent is not None else run.job_name))
        if parent is None:
            if root not in seen:
                earlier.append((root, run.job_name))
            break
        parent_id = parent.tags.get(PARENT_RUN_ID_TAG) or parent.parent_run_id
    return root, tuple(earlier)


def _op_context(context: AnyContext) -> OpExecutionContext:
    return context.op_execution_context if isinstance(context, AssetExecutionContext) else context


def step_identity(
    context: AnyContext,
    armada: ArmadaResource | None = None,
    *,
    job_set_id: str | None = None,
    key: str = "",
) -> StepIdentity:
    """The run id, step key, retry number, RetryPolicy and task identity of the executing
    step. With `armada`, the task's job sets are those the resource names for the lineage's
    earlier runs; `job_set_id` (an explicit job set) is searched too; `key` tells several
    submissions of one step apart."""
    op_context = _op_context(context)
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
    root, earlier = run_lineage(context)
    job_sets = [armada.job_set_for(run_id, name) for run_id, name in earlier] if armada else []
    if job_set_id:
        job_sets.append(job_set_id)
    task = task_identity(
        root_run_id=root,
        step_key=step_key,
        run_id=op_context.run_id,
        retry_number=op_context.retry_number,
        job_sets=job_sets,
        key=key,
    )
    return StepIdentity(
        run_id=op_context.run_id,
        step_key=step_key,
        retry_number=op_context.retry_number,
        job_name=job_name,
        retry_policy=policy,
        root_run_id=root,
        earlier_runs=earlier,
        instance=instance_digest(op_context.instance),
        task=task,
    )


def container_pod_spec(
    command: Sequence[str],
    *,
    image: str = "python:3.11",
    cpu: str = "1",
    memory: str = "1Gi",
    env: Mapping[str, str] | None = None,
    name: str = "main",
    **pod: Any,
) -> dict[str, Any]:
    """A one-container pod spec with equal requests and limits (what Armada wants)."""
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": list(command),
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        },
    }
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


def build_items(
    armada: ArmadaResource,
    identity: StepIdentity,
    pod_spec: PodSpecLike | Sequence[PodSpecLike] | None,
    *,
    replicas: int | None = None,
    env: Mapping[str, str] | None = None,
    client_id: str | None = None,
    roles: Sequence[Role | Mapping[str, Any]] | None = None,
    **job: Any,
) -> Items:
    """Job items for one job (a single spec, no replicas), a gang (replicas or a list) or an
    elastic pod group (`roles`, each a `Role` or its mapping; `env` goes to every role).

    `client_id` is the one the lifecycle chose for this attempt and generation (a gang's
    members get `-<i>`, and the gang id is the client id); the task's external job URI and
    annotations are set by the lifecycle when it submits.
    """
    annotations = {
        RUN_ID_ANNOTATION: identity.run_id,
        STEP_KEY_ANNOTATION: identity.step_key,
        RETRY_ANNOTATION: str(identity.retry_number),
        **({INSTANCE_ANNOTATION: identity.instance} if identity.instance else {}),
        **(job.pop("annotations", None) or {}),
    }
    job.setdefault("namespace", armada.namespace)
    if armada.priority_class is not None:
        job.setdefault("priority_class", armada.priority_class)
    cid = client_id or identity.task.client_id()
    if roles is not None:
        if pod_spec is not None or replicas is not None:
            raise ValueError("give roles or a pod spec (with replicas), not both")
        parsed = [Role.parse(r, f"roles[{i}]") for i, r in enumerate(roles)]
        return pod_group_items(
            [dataclasses.replace(r, pod_spec=with_env(r.pod_spec, env or {})) for r in parsed],
            client_id=cid,
            annotations=annotations,
            **job,
        )
    if pod_spec is None:
        raise ValueError("give a pod_spec, a command or roles")
    if isinstance(pod_spec, (list, tuple)) or replicas is not None:
        specs: Any = (
            [with_env(s, env or {}) for s in pod_spec]
            if isinstance(pod_spec, (list, tuple))
            else with_env(pod_spec, env or {})
        )
        return gang_items(specs, replicas=replicas, client_id=cid, annotations=annotations, **job)
    return [job_item(with_env(pod_spec, env or {}), client_id=cid, annotations=annotations, **job)]


@dataclass
class ArmadaJobRun:
    """A finished job or gang: ids, per-job results, when each ran, and the result payload
    every integration reports (`armada_core.client.lifecycle.result_payload`)."""

    queue: str
    job_set_id: str
    job_ids: list[str]
    results: dict[str, JobResult]
    report: OutcomeReport
    started: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)
    #: Whether the step reattached to jobs an earlier process of the same attempt submitted.
    reattached: bool = False

    @property
    def is_gang(self) -> bool:
        return len(self.job_ids) > 1

    @property
    def result(self) -> dict[str, Any]:
        """The result payload (built from `results` alone when no payload was recorded)."""
        return self.payload or result_payload(
            self.queue, self.job_set_id, [self.results[j] for j in self.job_ids], {}
        )

    @property
    def duration_seconds(self) -> float | None:
        """How long the job ran (the longest member of a gang), from its run's start and end
        on the server; from the events' timestamps when the server did not say."""
        if self.payload.get("duration_seconds") is not None:
            return float(self.payload["duration_seconds"])
        if not self.started or not self.ended:
            return None
        return round(max(self.ended.values()) - min(self.started.values()), 3)

    def metadata(self) -> dict[str, Any]:
        """Materialization / output metadata, from the result payload: job id, run id, node,
        duration, exit code, outcome, links, queue and job set."""
        result = self.result
        jobs = result["jobs"]
        first = jobs[0]
        codes = [code for j in jobs for code in j["exit_codes"].values()]
        metadata: dict[str, Any] = {
            "armada/job_id": first["job_id"],
            "armada/run_id": first["run_id"],
            "armada/node": first["node"],
            "armada/queue": result["queue"],
            "armada/job_set_id": result["job_set_id"],
            "armada/exit_code": max(codes, key=abs) if codes else 0,
            "armada/state": first["state"],
            "armada/outcome": result["outcome"],
        }
        if self.duration_seconds is not None:
            metadata["armada/duration_seconds"] = self.duration_seconds
        if self.is_gang:
            metadata["armada/job_ids"] = list(result["job_ids"])
            metadata["armada/run_ids"] = list(result["run_ids"])
            metadata["armada/nodes"] = list(result["nodes"])
        retries = sum(j["server_retries"] for j in jobs)
        if retries:
            metadata["armada/server_retries"] = retries
        for job_id, url in self.urls.items():
            key = "armada/link" if not self.is_gang else f"armada/link/{job_id}"
            metadata[key] = MetadataValue.url(url)
        return {k: v for k, v in metadata.items() if v not in (None, "")}


class _Timeline:
    """When each job started its latest run and ended, from the events' own timestamps."""

    def __init__(self) -> None:
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
        elif kind in ("succeeded", "failed", "cancelled", "preempted") and when is not None:
            self.ended[result.job_id] = when


def _line_forwarder(
    context: AnyContext, armada: ArmadaResource, gang: bool, destination: LogDestination | None
) -> Callable[[str, str], None]:
    to_stdout, to_event_log = armada.log_lines_to(destination)

    def forward(job_id: str, line: str) -> None:
        text = f"[{job_id}] {line}" if gang else line
        if to_stdout:
            print(text, file=sys.stdout, flush=True)
        if to_event_log:
            context.log.info(f"[armada {job_id}] {line}")

    return forward


def _cancel(
    context: AnyContext,
    armada: ArmadaResource,
    job_set: str,
    ids: Sequence[str],
    identity: StepIdentity,
) -> None:
    what = f"gang of {len(ids)} jobs" if len(ids) > 1 else "job"
    context.log.warning(f"Dagster run interrupted: cancelling Armada {what} {', '.join(ids)}")
    try:
        armada.cancel(
            ids, job_set_id=job_set, reason=f"Dagster run {identity.run_id} was terminated"
        )
    except ArmadaError as e:
        context.log.error(f"could not cancel Armada {what} {', '.join(ids)}: {e}")


def _cancel_attempt(
    context: AnyContext, armada: ArmadaResource, job_set: str, identity: StepIdentity
) -> None:
    """Interrupted while submitting: cancel whatever live jobs this attempt has by now."""
    client = armada.get_client()
    try:
        states = client.get_job_status_by_external_uri(
            armada.queue, job_set, identity.task.external_job_uri
        )
        live = [j for j, s in states.items() if s in LIVE_STATES]
        details = client.get_job_details(live, expand_job_spec=True) if live else {}
    except ArmadaError as e:
        context.log.error(f"could not look up this attempt's Armada jobs to cancel them: {e}")
        return
    attempt = identity.task.annotations()[ATTEMPT_ANNOTATION]
    mine = [
        j
        for j in live
        if j in details and details[j].job_spec.annotations.get(ATTEMPT_ANNOTATION) == attempt
    ]
    if mine:
        _cancel(context, armada, job_set, mine, identity)


def submit_step(
    context: AnyContext,
    armada: ArmadaResource,
    build: BuildItems,
    *,
    identity: StepIdentity,
    job_set_id: str,
) -> Submission:
    """Submit this attempt's jobs or reattach to them (`submit_or_reattach`), logging the
    decision to the step's log; an interruption meanwhile cancels what was submitted."""
    try:
        return submit_or_reattach(
            armada.get_client(),
            armada.queue,
            job_set_id,
            identity.task,
            build,
            log=context.log.info,
            cancel_wait=armada.cancel_wait,
        )
    except (DagsterExecutionInterruptedError, KeyboardInterrupt):
        _cancel_attempt(context, armada, job_set_id, identity)
        raise


def run_items(
    context: AnyContext,
    armada: ArmadaResource,
    build: BuildItems,
    *,
    identity: StepIdentity | None = None,
    job_set_id: str | None = None,
    log_destination: LogDestination | None = None,
    follow_logs: bool = True,
    on_submitted: Callable[[str, list[str]], None] | None = None,
    on_line: Callable[[str, str], None] | None = None,
    timeout: float | None = None,
) -> ArmadaJobRun:
    """Submit or reattach, then wait (the shared task lifecycle: log lines, progress and
    waiting reasons in the step's log, server retries waited through, a restarting server
    ridden out, the jobs cancelled when the run is terminated), and map the end to Dagster:
    returns on success, else raises RetryRequested or Failure (see outcome.py).

    `build(client_id)` makes the request items (see `build_items`); the jobs' log lines go
    to `on_line` if given, else where `log_destination` says (unless not `follow_logs`)."""
    identity = identity or step_identity(context, armada, job_set_id=job_set_id)
    job_set = job_set_id or armada.job_set_for(identity.run_id, identity.job_name)
    submission = submit_step(context, armada, build, identity=identity, job_set_id=job_set)
    ids = submission.job_ids
    if on_submitted is not None:
        on_submitted(job_set, ids)
    if on_line is None and follow_logs and armada.log_lines_to(log_destination) != (False, False):
        on_line = _line_forwarder(context, armada, len(ids) > 1, log_destination)
    timeline = _Timeline()
    end = wait(
        armada.get_client(),
        armada.queue,
        job_set,
        ids,
        log=context.log.info,
        warn=context.log.warning,
        on_line=on_line,
        on_event=timeline,
        settings=armada.wait_settings(timeout, stream_logs=on_line is not None),
        cancel_reason=f"Dagster run {identity.run_id} was terminated",
    )
    report = raise_for_outcome(
        end.results,
        retry_policy=identity.retry_policy,
        retry_number=identity.retry_number,
        max_infrastructure_retries=armada.max_infrastructure_retries,
    )
    run = ArmadaJobRun(
        queue=armada.queue,
        job_set_id=job_set,
        job_ids=ids,
        results=end.results,
        report=report,
        started=timeline.started,
        ended=timeline.ended,
        urls={j: u for j in ids if (u := armada.job_url(j, job_set))},
        payload=end.payload(),
        reattached=submission.reattached,
    )
    what = f"gang of {len(ids)} jobs" if len(ids) > 1 else "job"
    context.log.info(f"Armada {what} {', '.join(ids)} succeeded")
    return run


def execute_armada_job(
    context: AnyContext,
    armada: ArmadaResource,
    pod_spec: PodSpecLike | Sequence[PodSpecLike] | None = None,
    *,
    command: Sequence[str] | None = None,
    image: str = "python:3.11",
    cpu: str = "1",
    memory: str = "1Gi",
    env: Mapping[str, str] | None = None,
    replicas: int | None = None,
    roles: Sequence[Role | Mapping[str, Any]] | None = None,
    job_set_id: str | None = None,
    client_id: str | None = None,
    log_destination: LogDestination | None = None,
    timeout: float | None = None,
    **job: Any,
) -> ArmadaJobRun:
    """Run a job (or, with `replicas` or a list of pod specs, a gang; with `roles`, an elastic
    pod group) from inside an op or asset and return it once every member succeeded.

    Give a full `pod_spec` (V1PodSpec, dict, YAML or protobuf), just a `command`, or `roles`
    (armada_core `Role`s or mappings with name, pod_spec, minimum and maximum: every member
    is one of the step's jobs, waited for together). Other keyword arguments go to
    armada_core's `job_item`/`gang_items`/`pod_group_items` (priority, labels, annotations,
    retry_policy, minimum_cardinality, node_uniformity_label, ...).

    `client_id` names this submission within the step, for a step that submits several jobs
    (each its own task: `<root run>/<step>/<client_id>`); the client ids sent to Armada are
    derived from it, the attempt and the generation, so that the server deduplicates a
    resubmission by the same attempt and never hands one attempt another's jobs.
    """
    if pod_spec is None and roles is None:
        if command is None:
            raise ValueError("give a pod_spec, a command or roles")
        pod_spec = container_pod_spec(command, image=image, cpu=cpu, memory=memory)
    identity = step_identity(context, armada, job_set_id=job_set_id, key=client_id or "")
    spec = pod_spec

    def build(cid: str) -> Items:
        return build_items(
            armada,
            identity,
            spec,
            replicas=replicas,
            env=env,
            client_id=cid,
            roles=roles,
            **dict(job),
        )

    return run_items(
        context,
        armada,
        build,
        identity=identity,
        job_set_id=job_set_id,
        log_destination=log_destination,
        timeout=timeout,
    )
