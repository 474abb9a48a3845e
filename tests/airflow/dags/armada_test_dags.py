"""DAGs the Airflow integration tests run with dag.test() against an embedded Armada server.

Per-run details come from the run's conf (templated), so one file serves every test.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_armada.hooks.armada import ArmadaHook, kill_reason
from airflow_armada.operators.armada import ArmadaOperator
from armada_core.api import submit_pb2
from armada_core.client import Role

QUEUE = "airflow"
START = datetime(2024, 1, 1)


def pod(script: str, *, cpu: str = "0.5", memory: str = "128Mi", **extra: Any) -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh", "-c", script],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ],
        **extra,
    }


#: Every DAG of this file by id (some are made in a loop, so not module globals).
BY_ID: dict[str, DAG] = {}


def dag(dag_id: str, **kwargs: Any) -> DAG:
    BY_ID[dag_id] = DAG(
        dag_id, schedule=None, start_date=START, catchup=False, tags=["armada-tests"], **kwargs
    )
    return BY_ID[dag_id]


FAST = {"log_interval": 0.3, "poll_interval": 1.0}


def wait_for_state(hook: ArmadaHook, job_ids: list[str], state: str, timeout: float = 60) -> None:
    """Until every job is in `state` (a JobState name)."""
    wanted = submit_pb2.JobState.Value(state)
    deadline = time.monotonic() + timeout
    with hook.get_conn() as client:
        while time.monotonic() < deadline:
            if set(client.get_job_status(job_ids).values()) == {wanted}:
                return
            time.sleep(0.1)
    raise TimeoutError(f"jobs {job_ids} not {state} within {timeout}s")


class CrashAfterSubmit(ArmadaOperator):
    """Simulates a worker that dies on its first try right after submitting. With conf
    `marker`, a later try creates that file once it has its jobs (a job waiting for it is then
    certainly still running when that try reattaches)."""

    def _submit_or_reattach(self, context, client, identity):  # type: ignore[no-untyped-def]
        submission = super()._submit_or_reattach(context, client, identity)
        if context["ti"].try_number == 1:
            raise RuntimeError("simulated worker crash after submission")
        marker = context["dag_run"].conf.get("marker")
        if marker:
            open(marker, "w").close()
        return submission


class DiesWhenJobsEnd(ArmadaOperator):
    """Simulates a first try whose process dies before it sees its jobs end: with conf
    `kill` it is killed as a cleared task is (on_kill cancels the jobs); either way it dies
    once its jobs are in conf `until` (CANCELLED, or PREEMPTED by the test), having reported
    nothing."""

    def _submit_or_reattach(self, context, client, identity):  # type: ignore[no-untyped-def]
        submission = super()._submit_or_reattach(context, client, identity)
        if context["ti"].try_number == 1:
            conf = context["dag_run"].conf
            if conf.get("kill"):
                self._submitted = (self.armada_queue, self.job_set_id, submission.job_ids)
                self.on_kill()
            wait_for_state(ArmadaHook(self.armada_conn_id), submission.job_ids, conf["until"])
            raise RuntimeError("simulated task process death")
        return submission


class SameTryAgain(ArmadaOperator):
    """Simulates one try whose process crashes after submitting and is run again with the same
    try number: the second pass starts from what the server holds alone. With conf `kill`, the
    jobs are cancelled (as on_kill does) before the second pass. The jobs wait for the file
    conf `marker`, made after the second pass, so none ends before that pass has seen it."""

    def _submit_or_reattach(self, context, client, identity):  # type: ignore[no-untyped-def]
        submission = super()._submit_or_reattach(context, client, identity)
        if context["dag_run"].conf.get("kill"):
            self._submitted = (self.armada_queue, self.job_set_id, submission.job_ids)
            self.on_kill()
            wait_for_state(ArmadaHook(self.armada_conn_id), submission.job_ids, "CANCELLED")
        self.log.info("simulated crash: the same try runs again")
        submission = super()._submit_or_reattach(context, client, self.identity(context))
        open(context["dag_run"].conf["marker"], "w").close()
        return submission


class CrashInsideSubmit(ArmadaOperator):
    """Simulates a worker that dies on its first try after the server accepted the jobs but
    before their ids came back."""

    def _submit_or_reattach(self, context, client, identity):  # type: ignore[no-untyped-def]
        if context["ti"].try_number == 1:
            run = client._run

            def dies_once_submitted(call, timeout=None):  # type: ignore[no-untyped-def]
                answer = run(call, timeout)
                if call.method == "SubmitJobs":
                    raise RuntimeError("simulated worker crash during submission")
                return answer

            client._run = dies_once_submitted
        return super()._submit_or_reattach(context, client, identity)


class KilledLate(ArmadaOperator):
    """Simulates a deferred task cleared while its next try starts before the triggerer has
    run the old try's on_kill: try 1 dies once it has submitted; try 2 reattaches to the job,
    which is then cancelled as try 1's kill does."""

    def _submit_or_reattach(self, context, client, identity):  # type: ignore[no-untyped-def]
        submission = super()._submit_or_reattach(context, client, identity)
        if context["ti"].try_number == 1:
            raise RuntimeError("simulated kill of try 1, its trigger still running")
        if submission.reattached and submission.generation == 0:
            client.cancel_jobs(
                self.armada_queue, self.job_set_id, submission.job_ids, reason=kill_reason(1)
            )
        return submission


class RunsAgainAfterSuccess(ArmadaOperator):
    """Simulates a successful task cleared and run again: the same task instance executes
    twice (in one process, with the task state store as it is after the first end)."""

    def execute(self, context):  # type: ignore[no-untyped-def]
        first = super().execute(context)
        self.log.info("simulated clear of a successful task: running it again")
        return {"first": first, "second": super().execute(context)}


class RecordsTrigger(ArmadaOperator):
    """Pushes the kwargs of the trigger it defers to (what the triggerer will build it from)."""

    def defer(self, *, trigger, **kwargs):  # type: ignore[no-untyped-def,override]
        from airflow.sdk import get_current_context

        get_current_context()["ti"].xcom_push(key="trigger_kwargs", value=trigger.serialize()[1])
        super().defer(trigger=trigger, **kwargs)


with dag("armada_trigger_kwargs"):
    for keep in (False, True):
        RecordsTrigger(
            task_id=f"cancel_on_kill_{keep}",
            armada_queue=QUEUE,
            **FAST,
            cancel_on_kill=keep,
            pod_spec=pod("true"),
        )

for mode, deferrable in (("deferrable", True), ("sync", False)):
    with dag(f"armada_single_{mode}"):
        ArmadaOperator(
            task_id="hello",
            armada_queue=QUEUE,
            deferrable=deferrable,
            **FAST,
            pod_spec=pod("echo hello from armada; sleep 1; echo second line"),
        )

    with dag(f"armada_kill_{mode}"):
        ArmadaOperator(
            task_id="sleeper",
            armada_queue=QUEUE,
            deferrable=deferrable,
            retries=2,
            retry_delay=timedelta(0),
            **FAST,
            pod_spec=pod("sleep 120"),
        )

with dag("armada_gang"):
    ArmadaOperator(
        task_id="gang",
        armada_queue=QUEUE,
        replicas=3,
        **FAST,
        pod_spec=pod("echo member $HOSTNAME; sleep 1"),
    )

with dag("armada_pod_group"):
    # An elastic pod group: a coordinator and two to four workers, the roles templated. The
    # coordinator ends first and the workers run on (a member that succeeded keeps its role).
    ArmadaOperator(
        task_id="group",
        armada_queue=QUEUE,
        **FAST,
        roles=[
            Role("coordinator", pod("echo role coordinator of {{ ti.task_id }}", cpu="0.2")),
            {
                "name": "worker",
                "minimum": 2,
                "maximum": 4,
                "pod_spec": pod("echo role worker of {{ ti.task_id }}; sleep 2", cpu="0.2"),
            },
        ],
    )

with dag("armada_user_error"):
    ArmadaOperator(
        task_id="fails",
        armada_queue=QUEUE,
        retries=2,
        retry_delay=timedelta(0),
        **FAST,
        pod_spec=pod("echo about to fail; echo 'bad input file' > /dev/termination-log; exit 3"),
    )

with dag("armada_preempted"):
    # The first try is preempted by the test (an urgent job on the only "victim" node); the
    # retry Airflow makes then succeeds.
    ArmadaOperator(
        task_id="victim",
        armada_queue=QUEUE,
        retries=1,
        retry_delay=timedelta(0),
        priority_class="low",
        **FAST,
        pod_spec=pod(
            "if [ {{ ti.try_number }} -eq 1 ]; then sleep 60; fi; echo done",
            cpu="1",
            nodeSelector={"role": "victim"},
        ),
    )

with dag("armada_server_retry"):
    hog = f'{sys.executable} -c "x = bytearray(400 * 1024 * 1024); import time; time.sleep(5)"'
    ArmadaOperator(
        task_id="oom_once",
        armada_queue=QUEUE,
        retries=0,
        **FAST,
        armada_retry_policy="{{ dag_run.conf['policy'] }}",
        pod_spec=pod(
            "if [ -e {{ dag_run.conf['marker'] }} ]; then echo recovered; "
            "else touch {{ dag_run.conf['marker'] }}; " + hog + "; fi",
            memory="100Mi",
        ),
    )

with dag("armada_crash_after_submit"):
    CrashAfterSubmit(
        task_id="crashy",
        armada_queue=QUEUE,
        retries=1,
        retry_delay=timedelta(0),
        **FAST,
        pod_spec=pod("sleep 2; echo finished"),
    )

with dag("armada_crash_then_user_error"):
    CrashAfterSubmit(
        task_id="crashy",
        armada_queue=QUEUE,
        retries=3,
        retry_delay=timedelta(0),
        **FAST,
        pod_spec=pod("while [ ! -e {{ dag_run.conf['marker'] }} ]; do sleep 0.1; done; exit 3"),
    )

with dag("armada_dies_when_jobs_end"):
    # The first try dies once its job is cancelled (a clear) or preempted; the second runs a
    # new job that succeeds. retries=1: reattaching to the ended job would fail the task.
    DiesWhenJobsEnd(
        task_id="dies",
        armada_queue=QUEUE,
        retries=1,
        retry_delay=timedelta(0),
        priority_class="low",
        **FAST,
        pod_spec=pod(
            "if [ {{ ti.try_number }} -eq 1 ]; then sleep 60; fi; "
            "echo done try {{ ti.try_number }}",
            cpu="1",
            nodeSelector={"role": "victim"},
        ),
    )

with dag("armada_same_try_again"):
    SameTryAgain(
        task_id="again",
        armada_queue=QUEUE,
        retries=0,
        **FAST,
        pod_spec=pod(
            "while [ ! -e {{ dag_run.conf['marker'] }} ]; do sleep 0.1; done; echo finished"
        ),
    )

with dag("armada_killed_late"):
    KilledLate(
        task_id="late",
        armada_queue=QUEUE,
        retries=1,
        retry_delay=timedelta(0),
        **FAST,
        pod_spec=pod(
            "if [ {{ ti.try_number }} -eq 1 ]; then sleep 60; fi; echo done try {{ ti.try_number }}"
        ),
    )

with dag("armada_runs_again_after_success"):
    RunsAgainAfterSuccess(
        task_id="twice",
        armada_queue=QUEUE,
        deferrable=False,
        **FAST,
        pod_spec=pod("echo run try {{ ti.try_number }}"),
    )

for mode, deferrable in (("deferrable", True), ("sync", False)):
    with dag(f"armada_waits_{mode}"):
        # The test fills the only "victim" node first: the task's job waits, and says why.
        ArmadaOperator(
            task_id="waits",
            armada_queue=QUEUE,
            deferrable=deferrable,
            **FAST,
            pod_spec=pod("echo ran", cpu="1", nodeSelector={"role": "victim"}),
        )

with dag("armada_crash_inside_submit"):
    CrashInsideSubmit(
        task_id="crashy",
        armada_queue=QUEUE,
        retries=1,
        retry_delay=timedelta(0),
        deferrable=False,
        **FAST,
        pod_spec=pod("sleep 2; echo finished"),
    )

with dag("armada_dry_run"):
    ArmadaOperator(
        task_id="dry",
        armada_queue=QUEUE,
        dry_run=True,
        replicas=2,
        pod_spec=pod("echo {{ dag_run.conf.get('word', 'nothing') }}"),
    )

with dag("armada_templated", params={"queue": QUEUE}):
    ArmadaOperator(
        task_id="templated",
        armada_queue="{{ params.queue }}",
        **FAST,
        job_set_id="{{ dag_run.conf['job_set'] }}",
        labels={"team": "{{ dag_run.conf['team'] }}"},
        annotations={"example.com/word": "{{ dag_run.conf['word'] }}"},
        job_url_template="http://ui.example/{queue}/{job_set_id}/{job_id}",
        pod_spec="""
containers:
  - name: main
    image: busybox
    command: [sh, -c, "echo word={{ dag_run.conf['word'] }} try={{ ti.try_number }}"]
    resources:
      requests: {cpu: 200m, memory: 64Mi}
      limits: {cpu: 200m, memory: 64Mi}
""",
    )

with dag("armada_bad_spec"):
    bad = pod("true")
    bad["containers"][0]["imag"] = bad["containers"][0].pop("image")
    ArmadaOperator(
        task_id="bad", armada_queue=QUEUE, retries=2, retry_delay=timedelta(0), pod_spec=bad
    )

with dag("armada_missing_connection"):
    ArmadaOperator(
        task_id="nowhere",
        armada_queue=QUEUE,
        armada_conn_id="armada_elsewhere",
        retries=2,
        retry_delay=timedelta(0),
        pod_spec=pod("true"),
    )
