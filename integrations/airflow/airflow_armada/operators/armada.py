"""`ArmadaOperator`: run a task as an Armada job or gang and map its end to the task's state."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from google.protobuf.json_format import MessageToDict

from airflow_armada.hooks.armada import ArmadaHook
from airflow_armada.links.armada import ArmadaJobLink
from airflow_armada.triggers.armada import ArmadaJobTrigger
from armada_core.api import submit_pb2
from armada_core.client import (
    ArmadaError,
    InvalidArgument,
    SpecError,
    check_items,
    gang_items,
    job_item,
)
from armada_core.client.reattach import decide_reattach
from armada_core.retry import Outcome

if TYPE_CHECKING:
    from airflow.sdk import Context

#: Key of the task state store entry (survives retries; XCom does not).
STATE_KEY = "armada_submission"
#: The default job set: one per DAG run, so a run's jobs are watched and cancelled together.
DEFAULT_JOB_SET_ID = "{{ dag.dag_id }}-{{ run_id }}"
#: Annotations naming the Airflow task instance that submitted a job.
ANNOTATION_PREFIX = "airflow.apache.org/"


def _plain_pod_spec(spec: Any) -> Any:
    """A kubernetes V1PodSpec becomes its JSON dict, so Airflow can template and serialise it;
    dicts, YAML text and api PodSpecs pass unchanged."""
    if hasattr(spec, "openapi_types") and hasattr(spec, "to_dict"):
        from kubernetes.client import ApiClient

        return ApiClient().sanitize_for_serialization(spec)
    return spec


def client_id_for(dag_id: str, task_id: str, run_id: str, map_index: int,
                  try_number: int, attempt: int = 0) -> str:
    """Deterministic and unique per task try and submission attempt: a resubmission from the
    same try is deduplicated by the server, a new try gets a new job. `attempt` counts the
    submissions a single try had to make because its earlier jobs ended otherwise than
    succeeding (cancelled, preempted...); the server would answer the old id with those jobs.
    Readable prefix, hashed identity (run ids may be long and hold any character)."""
    parts: list[Any] = [dag_id, task_id, run_id, map_index, try_number]
    if attempt:
        parts.append(attempt)
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]
    suffix = f".{attempt}" if attempt else ""
    return f"airflow-{task_id[:40]}-{try_number}{suffix}-{digest}"


class ArmadaOperator(BaseOperator):
    """Submit one Armada job, or a gang, and wait for it to end.

    Give ``pod_spec`` (one job, or with ``replicas`` > 1 a gang of identical members) or
    ``pod_specs`` (a gang, one member per spec). Pod specs may be ``kubernetes`` V1PodSpec
    objects, dicts (camelCase or snake_case) or YAML text; they are templated.

    Waiting is deferrable by default (the triggerer follows the event stream; no worker slot is
    held). Success returns (and pushes to XCom) the result: job ids, run ids, nodes, duration,
    links and per-job details. An infrastructure failure (preemption, eviction, lost lease)
    raises a retryable ``AirflowException``; a user error, a rejection or a cancellation by
    someone else raises ``AirflowFailException``. See the README for every parameter.
    """

    template_fields: Sequence[str] = (
        "armada_queue", "job_set_id", "pod_spec", "pod_specs", "namespace", "priority_class",
        "annotations", "labels", "armada_retry_policy", "gang_id", "node_uniformity_label",
        "job_url_template",
    )
    template_ext: Sequence[str] = (".yaml", ".yml")
    template_fields_renderers: ClassVar[dict[str, str]] = {"pod_spec": "yaml", "pod_specs": "json",
                                 "annotations": "json", "labels": "json"}
    operator_extra_links = (ArmadaJobLink(),)
    ui_color = "#d9e8f5"

    def __init__(
        self,
        *,
        armada_queue: str,
        pod_spec: Any = None,
        pod_specs: Sequence[Any] | None = None,
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
        if (pod_spec is None) == (pod_specs is None):
            raise ValueError("give exactly one of pod_spec and pod_specs")
        if pod_specs is not None and replicas is not None:
            raise ValueError("replicas goes with pod_spec; pod_specs already lists the members")
        if replicas is not None and replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {replicas}")
        self.armada_queue = armada_queue
        self.pod_spec = _plain_pod_spec(pod_spec) if pod_spec is not None else None
        self.pod_specs = ([_plain_pod_spec(s) for s in pod_specs]
                          if pod_specs is not None else None)
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

    # --- building ---------------------------------------------------------------------------

    @property
    def is_gang(self) -> bool:
        return self.pod_specs is not None or (self.replicas or 1) > 1

    def build_items(self, context: Context, client_id: str
                    ) -> list[submit_pb2.JobSubmitRequestItem]:
        """The request items, validated as the server would; SpecError names a bad field."""
        ti = context["ti"]
        annotations = {
            f"{ANNOTATION_PREFIX}dag-id": ti.dag_id, f"{ANNOTATION_PREFIX}task-id": ti.task_id,
            f"{ANNOTATION_PREFIX}run-id": ti.run_id,
            f"{ANNOTATION_PREFIX}map-index": str(ti.map_index),
            f"{ANNOTATION_PREFIX}try-number": str(ti.try_number),
            **{str(k): str(v) for k, v in self.annotations.items()},
        }
        common: dict[str, Any] = {
            "priority": float(self.priority), "namespace": self.namespace,
            "priority_class": self.priority_class or None, "client_id": client_id,
            "labels": {str(k): str(v) for k, v in self.labels.items()},
            "annotations": annotations, "retry_policy": self.armada_retry_policy or None,
            "external_job_uri": f"airflow://{ti.dag_id}/{ti.run_id}/{ti.task_id}/"
                                f"{ti.map_index}",
        }
        if self.is_gang:
            specs = self.pod_specs if self.pod_specs is not None else self.pod_spec
            items = gang_items(specs, replicas=None if self.pod_specs is not None
                               else self.replicas, gang_id=self.gang_id or None,
                               minimum_cardinality=self.gang_minimum_cardinality,
                               node_uniformity_label=self.node_uniformity_label or None,
                               **common)
        else:
            items = [job_item(self.pod_spec, **common)]
        check_items(items, queue=self.armada_queue, job_set_id=self.job_set_id)
        return items

    def _member_labels(self, job_ids: Sequence[str]) -> list[str]:
        if len(job_ids) == 1:
            return [f"job {job_ids[0]}"]
        return [f"member {i} job {j}" for i, j in enumerate(job_ids)]

    def _job_urls(self, job_ids: Sequence[str]) -> list[str]:
        template = self.job_url_template or ArmadaHook(self.armada_conn_id).job_url_template()
        return [template.format(job_id=j, queue=self.armada_queue, job_set_id=self.job_set_id)
                for j in job_ids]

    # --- running ----------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        ti = context["ti"]
        if not self.armada_queue or not self.job_set_id:
            raise AirflowFailException("armada_queue and job_set_id must not be empty")
        client_id = client_id_for(ti.dag_id, ti.task_id, ti.run_id, ti.map_index,
                                  ti.try_number)
        try:
            items = self.build_items(context, client_id)
        except (SpecError, ValueError) as e:
            raise AirflowFailException(f"invalid Armada job spec, nothing submitted: {e}") from e
        if self.is_dry_run:
            return self._dry_run(items)
        hook = ArmadaHook(self.armada_conn_id)
        job_ids = self._submit_or_reattach(context, hook, client_id, items)
        self._submitted = (self.armada_queue, self.job_set_id, job_ids)
        urls = self._job_urls(job_ids)
        ti.xcom_push(key=ArmadaJobLink().xcom_key, value=urls[0])
        ti.xcom_push(key="armada_job_ids", value=job_ids)
        self.log.info("Armada jobs: %s", ", ".join(urls))
        if self.deferrable:
            self.defer(trigger=ArmadaJobTrigger(
                queue=self.armada_queue, job_set_id=self.job_set_id, job_ids=job_ids,
                armada_conn_id=self.armada_conn_id, stream_logs=self.stream_logs,
                log_interval=self.log_interval, poll_interval=self.poll_interval,
                member_labels=self._member_labels(job_ids),
                cancel_on_kill=self.cancel_on_kill),
                method_name="execute_complete", timeout=self.execution_timeout)
        payload = asyncio.run(hook.await_jobs(
            self.armada_queue, self.job_set_id, job_ids, log=self.log, stream_logs=self.stream_logs,
            log_interval=self.log_interval, poll_interval=self.poll_interval,
            member_labels=self._member_labels(job_ids)))
        return self._finish(context, payload)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed from the trigger: map its payload to the task's outcome."""
        return self._finish(context, event)

    def _dry_run(self, items: Sequence[submit_pb2.JobSubmitRequestItem]) -> dict[str, Any]:
        rendered = [MessageToDict(item) for item in items]
        self.log.info("Dry run: would submit to queue %r, job set %r:\n%s", self.armada_queue,
                      self.job_set_id, yaml.safe_dump(rendered, sort_keys=False))
        return {"dry_run": True, "queue": self.armada_queue, "job_set_id": self.job_set_id,
                "items": rendered}

    def _submit_or_reattach(self, context: Context, hook: ArmadaHook, client_id: str,
                            items: list[submit_pb2.JobSubmitRequestItem]) -> list[str]:
        """Reattach to this task's jobs from an earlier try if they can still succeed or did
        succeed (`armada_core.client.reattach`); otherwise submit new ones. The intent is
        stored before submitting and the job ids after, so a crash anywhere leaves enough to
        find the jobs again."""
        store = context.get("task_state_store")
        record = store.get(STATE_KEY) if store is not None else None
        ti = context["ti"]
        attempt = 0
        with hook.get_conn() as client:
            if isinstance(record, dict):
                same_place = (record.get("queue") == self.armada_queue
                              and record.get("job_set_id") == self.job_set_id)
                if same_place and not record.get("finished"):
                    job_ids = self._earlier_jobs(context, client, store, record)
                    if job_ids:
                        return job_ids
                if record.get("try_number") == ti.try_number:
                    # This very try submitted before: a new client id, or the server would
                    # answer with the jobs that just ended.
                    attempt = int(record.get("attempt", 0)) + 1
            if attempt:
                client_id = client_id_for(ti.dag_id, ti.task_id, ti.run_id, ti.map_index,
                                          ti.try_number, attempt)
                items = self.build_items(context, client_id)
            record = {"client_id": client_id, "queue": self.armada_queue,
                      "job_set_id": self.job_set_id, "job_ids": None,
                      "try_number": ti.try_number, "attempt": attempt}
            if store is not None:
                store.set(STATE_KEY, record)
            job_ids = self._submit(client, items)
            if store is not None:
                store.set(STATE_KEY, {**record, "job_ids": job_ids})
        self.log.info("Submitted %d Armada job(s) to queue %r, job set %r: %s", len(job_ids),
                      self.armada_queue, self.job_set_id, ", ".join(job_ids))
        return job_ids

    def _earlier_jobs(self, context: Context, client: Any, store: Any,
                      record: dict[str, Any]) -> list[str] | None:
        """The unfinished record's jobs if this try may reattach to them, else None (after
        cancelling what still runs of them, so two tries never run at once)."""
        job_ids = record.get("job_ids")
        if not job_ids:
            # The last try crashed while submitting: the same client id makes the server
            # answer with the jobs it created then (or create them now).
            self.log.info("Resubmitting with client id %s of an interrupted try",
                          record["client_id"])
            job_ids = self._submit(client, self.build_items(context, record["client_id"]))
            store.set(STATE_KEY, {**record, "job_ids": job_ids})
        states = client.get_job_status(job_ids)
        described = ", ".join(f"{j} {submit_pb2.JobState.Name(s)}" for j, s in states.items())
        decision = decide_reattach(states)
        if decision.reattach:
            # Still able to succeed, or succeeded while no task watched: this try reports it.
            self.log.info("Reattaching to Armada jobs %s of an earlier try (%s)",
                          ", ".join(job_ids), described)
            return list(job_ids)
        self.log.info("The earlier try's Armada jobs ended without succeeding or are unknown "
                      "to the server (%s): submitting new jobs", described)
        if decision.live:
            self.log.info("Cancelling what still runs of them: %s", ", ".join(decision.live))
            try:
                client.cancel_jobs(record["queue"], record["job_set_id"], decision.live,
                                   reason="Airflow: replaced by a new submission of the task")
            except ArmadaError as e:
                raise AirflowException(f"cancelling the earlier try's Armada jobs failed: "
                                       f"{e}") from e
        return None

    def _submit(self, client: Any, items: list[submit_pb2.JobSubmitRequestItem]) -> list[str]:
        try:
            return client.submit_jobs(self.armada_queue, self.job_set_id, items)
        except (InvalidArgument, SpecError) as e:
            raise AirflowFailException(f"Armada rejected the job: {e}") from e
        except ArmadaError as e:
            raise AirflowException(f"submitting to Armada failed: {e}") from e

    def _finish(self, context: Context, payload: Mapping[str, Any]) -> dict[str, Any]:
        outcome = payload.get("outcome")
        summary = payload.get("summary", "")
        store = context.get("task_state_store")
        if store is not None and outcome != "error":
            record = store.get(STATE_KEY)
            if isinstance(record, dict):
                store.set(STATE_KEY, {**record, "finished": True, "outcome": outcome})
        if outcome == Outcome.SUCCEEDED:
            result = dict(payload)
            result["links"] = self._job_urls(payload["job_ids"])
            self.log.info("%s", summary)
            return result
        if outcome in (Outcome.USER_ERROR, Outcome.REJECTED, Outcome.CANCELLED):
            raise AirflowFailException(summary)
        raise AirflowException(summary)  # infrastructure failure or a broken watch: retry

    def on_kill(self) -> None:
        """The task was killed (marked failed/success, cleared, timed out): cancel the jobs."""
        if not self.cancel_on_kill or self._submitted is None:
            return
        queue, job_set_id, job_ids = self._submitted
        self.log.info("Task killed: cancelling Armada jobs %s", ", ".join(job_ids))
        try:
            ArmadaHook(self.armada_conn_id).cancel(queue, job_set_id, job_ids,
                                                   reason="Airflow task killed")
        except ArmadaError as e:
            self.log.warning("Cancelling Armada jobs %s failed: %s", ", ".join(job_ids), e)


__all__ = ["DEFAULT_JOB_SET_ID", "STATE_KEY", "ArmadaOperator", "client_id_for"]
