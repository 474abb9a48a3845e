"""`ArmadaOperator`: run a task as an Armada job, gang or elastic pod group and map its end to
the task's state.

The operator keeps only what is Airflow's: which task instance this is (`task_identity`) and
what an outcome means to Airflow (`ArmadaOperator._finish`). Finding the task's jobs,
reattaching, replacing and cancelling them, the waiting reasons and the result payload are the
task lifecycle every integration shares (`armada_core.client.lifecycle`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from google.protobuf.json_format import MessageToDict

from airflow_armada.hooks.armada import ArmadaHook, kill_reason, killed_by_try
from airflow_armada.links.armada import ArmadaJobLink
from airflow_armada.triggers.armada import ArmadaJobTrigger
from armada_core.api import submit_pb2
from armada_core.client import (
    ArmadaClient,
    ArmadaError,
    InvalidArgument,
    Role,
    SpecError,
    SubmitRejected,
    check_items,
    gang_items,
    job_item,
    pod_group_items,
)
from armada_core.client.k8s_convert import sanitize
from armada_core.client.lifecycle import (
    Submission,
    TaskIdentity,
    job_labels,
    submit_or_reattach,
)
from armada_core.client.lifecycle.reaping import REAP_ANNOTATION
from armada_core.retry import Outcome

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.execution_time.context import TaskStateStoreAccessor

#: The default job set: one per DAG run, so a run's jobs are watched and cancelled together.
DEFAULT_JOB_SET_ID = "{{ dag.dag_id }}-{{ run_id }}"
#: Annotations naming the Airflow task instance that submitted a job (for people: the
#: lifecycle finds a task's jobs by their external job URI).
ANNOTATION_PREFIX = "airflow.apache.org/"
#: Task state store key (it survives retries and clears; XCom does not): how many times a try
#: of this task instance has reported its jobs' end, i.e. the lifecycle attempt of the next try.
ATTEMPT_KEY = "armada_attempt"


def task_identity(
    dag_id: str, run_id: str, task_id: str, map_index: int | None, attempt: int = 0
) -> TaskIdentity:
    """A task instance as the task lifecycle names it.

    The task is the DAG, run, task and map index (external job URI
    ``airflow://<dag>/<run>/<task>/<map index>``). The attempt is the same for every try
    until one of them has reported the jobs' end (`ATTEMPT_KEY`): so a try reattaches to the
    jobs an earlier try left while they can still succeed or did, submits a new generation if
    they ended otherwise (a cleared task, a preemption nobody saw), and a try after a reported
    end (a retry after a failure, a cleared successful task) runs new jobs.
    """
    return TaskIdentity(
        "airflow", f"{dag_id}/{run_id}/{task_id}/{map_index}", str(attempt), name=task_id
    )


def _stored_attempt(store: TaskStateStoreAccessor) -> int:
    """The attempt the task state store holds (0 before the first reported end)."""
    value = store.get(ATTEMPT_KEY) or 0
    if not isinstance(value, int | float | str):
        raise TypeError(f"{ATTEMPT_KEY} in the task state store is not a number: {value!r}")
    return int(value)


def _plain_pod_spec(spec: Any) -> Any:
    """A kubernetes V1PodSpec becomes its JSON dict, so Airflow can template and serialise it;
    dicts, YAML text and api PodSpecs pass unchanged."""
    if hasattr(spec, "openapi_types") and hasattr(spec, "to_dict"):
        return sanitize(spec)
    return spec


def _plain_role(role: Role | Mapping[str, Any]) -> dict[str, Any]:
    """A role as a plain dict (what `Role.parse` reads back), so Airflow templates and
    serialises it like the pod spec fields."""
    plain = Role.parse(role).as_dict() if isinstance(role, Role) else dict(role)
    for key in ("pod_spec", "podSpec"):
        if key in plain:
            plain[key] = _plain_pod_spec(plain[key])
    return plain


class ArmadaOperator(BaseOperator):
    """Submit one Armada job, a gang or an elastic pod group, and wait for it to end.

    Give ``pod_spec`` (one job, or with ``replicas`` > 1 a gang of identical members),
    ``pod_specs`` (a gang, one member per spec) or ``roles`` (an elastic pod group: each role a
    ``Role`` or a dict with ``name``, ``pod_spec``, ``minimum`` and ``maximum``; every member is
    one of the task's jobs). Pod specs may be ``kubernetes`` V1PodSpec objects, dicts
    (camelCase or snake_case) or YAML text; they and the roles are templated.

    Waiting is deferrable by default (the triggerer follows the event stream; no worker slot is
    held); while a job waits to run, the task log says why. Success returns (and pushes to
    XCom) the lifecycle's result: job ids, run ids, nodes, duration, links and per-job
    details. An infrastructure failure (preemption, eviction, lost lease) raises a retryable
    ``AirflowException``; a user error, a rejection or a cancellation by someone else raises
    ``AirflowFailException``. See the README for every parameter.
    """

    template_fields: Sequence[str] = (
        "armada_queue",
        "job_set_id",
        "pod_spec",
        "pod_specs",
        "roles",
        "namespace",
        "priority_class",
        "annotations",
        "labels",
        "armada_retry_policy",
        "gang_id",
        "node_uniformity_label",
        "job_url_template",
    )
    template_ext: Sequence[str] = (".yaml", ".yml")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "pod_spec": "yaml",
        "pod_specs": "json",
        "roles": "json",
        "annotations": "json",
        "labels": "json",
    }
    operator_extra_links = (ArmadaJobLink(),)
    ui_color = "#d9e8f5"

    def __init__(
        self,
        *,
        armada_queue: str,
        pod_spec: Any = None,
        pod_specs: Sequence[Any] | None = None,
        roles: Sequence[Role | Mapping[str, Any]] | None = None,
        replicas: int | None = None,
        job_set_id: str = DEFAULT_JOB_SET_ID,
        armada_conn_id: str = ArmadaHook.default_conn_name,
        namespace: str = "default",
        priority: float = 0.0,
        priority_class: str | None = None,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        armada_retry_policy: str | Sequence[str] | None = None,
        gang_id: str | None = None,
        gang_minimum_cardinality: int | None = None,
        node_uniformity_label: str | None = None,
        deferrable: bool = True,
        stream_logs: bool = True,
        log_interval: float = 5.0,
        poll_interval: float = 5.0,
        dry_run: bool = False,
        job_url_template: str | None = None,
        cancel_on_kill: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if [pod_spec, pod_specs, roles].count(None) != 2:
            raise ValueError("give exactly one of pod_spec, pod_specs and roles")
        if pod_spec is None and replicas is not None:
            raise ValueError(
                "replicas goes with pod_spec; pod_specs and roles already list the members"
            )
        if roles is not None and gang_minimum_cardinality is not None:
            raise ValueError(
                "a pod group's minimums are its roles'; gang_minimum_cardinality "
                "goes with pod_spec or pod_specs"
            )
        if replicas is not None and replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {replicas}")
        self.armada_queue = armada_queue
        self.pod_spec = _plain_pod_spec(pod_spec) if pod_spec is not None else None
        self.pod_specs = [_plain_pod_spec(s) for s in pod_specs] if pod_specs is not None else None
        self.roles = [_plain_role(r) for r in roles] if roles is not None else None
        self.replicas = replicas
        self.job_set_id = job_set_id
        self.armada_conn_id = armada_conn_id
        self.namespace = namespace
        self.priority = priority
        self.priority_class = priority_class
        self.annotations = dict(annotations or {})
        self.labels = dict(labels or {})
        self.armada_retry_policy = armada_retry_policy
        self.gang_id = gang_id
        self.gang_minimum_cardinality = gang_minimum_cardinality
        self.node_uniformity_label = node_uniformity_label
        self.deferrable = deferrable
        self.stream_logs = stream_logs
        self.log_interval = log_interval
        self.poll_interval = poll_interval
        self.is_dry_run = dry_run  # BaseOperator.dry_run is a method
        self.job_url_template = job_url_template
        self.cancel_on_kill = cancel_on_kill
        self._submitted: tuple[str, str, list[str]] | None = None
        self._try_number: int | None = None
        self._job_link: str | None = None

    # --- building ---------------------------------------------------------------------------

    @property
    def is_gang(self) -> bool:
        return self.pod_specs is not None or self.roles is not None or (self.replicas or 1) > 1

    def build_items(
        self, context: Context, client_id: str
    ) -> list[submit_pb2.JobSubmitRequestItem]:
        """The request items, validated as the server would; SpecError names a bad field.
        (The lifecycle adds the task's external job URI and its own annotations.)"""
        ti = context["ti"]
        annotations = {
            f"{ANNOTATION_PREFIX}dag-id": ti.dag_id,
            f"{ANNOTATION_PREFIX}task-id": ti.task_id,
            f"{ANNOTATION_PREFIX}run-id": ti.run_id,
            f"{ANNOTATION_PREFIX}map-index": str(ti.map_index),
            f"{ANNOTATION_PREFIX}try-number": str(ti.try_number),
            **{str(k): str(v) for k, v in self.annotations.items()},
        }
        if not self.cancel_on_kill:  # the jobs outlive a kill: the reaper leaves them too
            annotations[REAP_ANNOTATION] = "false"
        common: dict[str, Any] = {
            "priority": float(self.priority),
            "namespace": self.namespace,
            "priority_class": self.priority_class or None,
            "client_id": client_id,
            "labels": {str(k): str(v) for k, v in self.labels.items()},
            "annotations": annotations,
            "retry_policy": self.armada_retry_policy or None,
        }
        if self.roles is not None:
            items = pod_group_items(
                self.roles,
                gang_id=self.gang_id or None,
                node_uniformity_label=self.node_uniformity_label or None,
                **common,
            )
        elif self.is_gang:
            specs = self.pod_specs if self.pod_specs is not None else self.pod_spec
            items = gang_items(
                specs,
                replicas=None if self.pod_specs is not None else self.replicas,
                gang_id=self.gang_id or None,
                minimum_cardinality=self.gang_minimum_cardinality,
                node_uniformity_label=self.node_uniformity_label or None,
                **common,
            )
        else:
            items = [job_item(self.pod_spec, **common)]
        check_items(items, queue=self.armada_queue, job_set_id=self.job_set_id)
        return items

    @property
    def job_link(self) -> str | None:
        """This try's link to its first job: "" until it has submitted, None when this
        instance has not executed (resumed from the trigger: the link is in XCom)."""
        return self._job_link

    def _member_labels(self, job_ids: Sequence[str]) -> list[str]:
        return list(job_labels(job_ids).values())

    def _job_urls(self, job_ids: Sequence[str]) -> list[str]:
        template = self.job_url_template or ArmadaHook(self.armada_conn_id).job_url_template()
        return [
            template.format(job_id=j, queue=self.armada_queue, job_set_id=self.job_set_id)
            for j in job_ids
        ]

    # --- running ----------------------------------------------------------------------------

    def identity(self, context: Context) -> TaskIdentity:
        """This task instance for the lifecycle, at the attempt the task state store gives."""
        ti = context["ti"]
        store = context.get("task_state_store")
        attempt = _stored_attempt(store) if store is not None else 0
        return task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index, attempt)

    def execute(self, context: Context) -> Any:
        ti = context["ti"]
        self._try_number = ti.try_number
        self._job_link = ""
        if not self.armada_queue or not self.job_set_id:
            raise AirflowFailException("armada_queue and job_set_id must not be empty")
        identity = self.identity(context)
        try:  # validated before anything reaches the server
            items = identity.stamp(self.build_items(context, identity.client_id()), 0)
        except (SpecError, ValueError) as e:
            raise AirflowFailException(f"invalid Armada job spec, nothing submitted: {e}") from e
        if self.is_dry_run:
            return self._dry_run(items)
        hook = ArmadaHook(self.armada_conn_id)
        with hook.get_conn() as client:
            submission = self._submit_or_reattach(context, client, identity)
            queue, job_set_id, job_ids = submission.queue, submission.job_set_id, submission.job_ids
            self._submitted = (queue, job_set_id, job_ids)
            urls = self._job_urls(job_ids)
            ti.xcom_push(key=ArmadaJobLink().xcom_key, value=urls[0])
            self._job_link = urls[0]
            ti.xcom_push(key="armada_job_ids", value=job_ids)
            self.log.info("Armada jobs: %s", ", ".join(urls))
            labels = self._member_labels(job_ids)
            if self.deferrable:
                self.defer(
                    trigger=ArmadaJobTrigger(
                        queue=queue,
                        job_set_id=job_set_id,
                        job_ids=job_ids,
                        armada_conn_id=self.armada_conn_id,
                        stream_logs=self.stream_logs,
                        log_interval=self.log_interval,
                        poll_interval=self.poll_interval,
                        member_labels=labels,
                        cancel_on_kill=self.cancel_on_kill,
                        try_number=ti.try_number,
                    ),
                    method_name="execute_complete",
                    timeout=self.execution_timeout,
                )
            payload = hook.wait_jobs(
                queue,
                job_set_id,
                job_ids,
                log=self.log,
                stream_logs=self.stream_logs,
                log_interval=self.log_interval,
                poll_interval=self.poll_interval,
                member_labels=labels,
                client=client,
            )
        return self._finish(context, payload)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed from the trigger: map its payload to the task's outcome."""
        return self._finish(context, event)

    def _dry_run(self, items: Sequence[submit_pb2.JobSubmitRequestItem]) -> dict[str, Any]:
        rendered = [MessageToDict(item) for item in items]
        self.log.info(
            "Dry run: would submit to queue %r, job set %r:\n%s",
            self.armada_queue,
            self.job_set_id,
            yaml.safe_dump(rendered, sort_keys=False),
        )
        return {
            "dry_run": True,
            "queue": self.armada_queue,
            "job_set_id": self.job_set_id,
            "items": rendered,
        }

    def _submit_or_reattach(
        self, context: Context, client: ArmadaClient, identity: TaskIdentity
    ) -> Submission:
        """The lifecycle's submit-or-reattach, its errors mapped to Airflow's: a rejected job
        fails the task, anything else (the server unreachable, an earlier attempt's job that
        would not end) is retried."""
        try:
            return submit_or_reattach(
                client,
                self.armada_queue,
                self.job_set_id,
                identity,
                lambda client_id: self.build_items(context, client_id),
                log=self.log.info,
            )
        except (InvalidArgument, SubmitRejected, SpecError) as e:
            raise AirflowFailException(f"Armada rejected the job: {e}") from e
        except ArmadaError as e:
            raise AirflowException(f"submitting to Armada failed: {e}") from e

    def _finish(self, context: Context, payload: Mapping[str, Any]) -> Any:
        outcome = payload.get("outcome")
        summary = payload.get("summary", "")
        if outcome == Outcome.CANCELLED and _killed_by_an_earlier_try(
            payload, context["ti"].try_number
        ):
            # This try reattached to jobs an earlier try's kill then cancelled: the task was
            # restarted (cleared) on purpose, so it runs, with new jobs.
            self.log.info(
                "The Armada jobs were cancelled by the kill of an earlier try of this "
                "task, after this try had found them: submitting new ones"
            )
            return self.execute(context)
        store = context.get("task_state_store")
        if store is not None and outcome != "error":
            # The jobs' end is reported: the next try (a retry, a cleared task) runs new jobs.
            store.set(ATTEMPT_KEY, _stored_attempt(store) + 1)
        if outcome == Outcome.SUCCEEDED:
            result = dict(payload)
            result["links"] = self._job_urls(payload["job_ids"])
            self.log.info("%s", summary)
            return result
        if outcome in (Outcome.USER_ERROR, Outcome.REJECTED, Outcome.CANCELLED) or (
            payload.get("retryable") is False
        ):
            raise AirflowFailException(summary)
        raise AirflowException(summary)  # infrastructure failure or a broken watch: retry

    def on_kill(self) -> None:
        """The task was killed (marked failed/success, cleared, timed out): cancel the jobs."""
        if not self.cancel_on_kill or self._submitted is None:
            return
        queue, job_set_id, job_ids = self._submitted
        self.log.info("Task killed: cancelling Armada jobs %s", ", ".join(job_ids))
        try:
            ArmadaHook(self.armada_conn_id).cancel(
                queue, job_set_id, job_ids, reason=kill_reason(self._try_number)
            )
        except ArmadaError as e:
            self.log.warning("Cancelling Armada jobs %s failed: %s", ", ".join(job_ids), e)


def _killed_by_an_earlier_try(payload: Mapping[str, Any], try_number: int) -> bool:
    """Some jobs were cancelled by the kill of a try before `try_number`, none otherwise."""
    killers = [
        killed_by_try(job.get("cancel_reason", ""))
        for job in payload.get("jobs", ())
        if job.get("state") == "CANCELLED"
    ]
    return bool(killers) and all(k is not None and k < try_number for k in killers)


__all__ = ["ATTEMPT_KEY", "DEFAULT_JOB_SET_ID", "ArmadaOperator", "task_identity"]
