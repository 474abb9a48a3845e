"""DAGs the Airflow integration tests run with dag.test() against an embedded Armada server.

Per-run details come from the run's conf (templated), so one file serves every test.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_armada.operators.armada import ArmadaOperator

QUEUE = "airflow"
START = datetime(2024, 1, 1)


def pod(script: str, *, cpu: str = "0.5", memory: str = "128Mi", **extra: Any) -> dict:
    return {"containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                            "resources": {"requests": {"cpu": cpu, "memory": memory},
                                          "limits": {"cpu": cpu, "memory": memory}}}],
            **extra}


#: Every DAG of this file by id (some are made in a loop, so not module globals).
BY_ID: dict[str, DAG] = {}


def dag(dag_id: str, **kwargs: Any) -> DAG:
    BY_ID[dag_id] = DAG(dag_id, schedule=None, start_date=START, catchup=False,
                        tags=["armada-tests"], **kwargs)
    return BY_ID[dag_id]


FAST = {"log_interval": 0.3, "poll_interval": 1.0}


class CrashAfterSubmit(ArmadaOperator):
    """Simulates a worker that dies on its first try right after submitting (job ids stored)."""

    def _submit_or_reattach(self, context, hook, client_id, items):  # type: ignore[no-untyped-def]
        job_ids = super()._submit_or_reattach(context, hook, client_id, items)
        if context["ti"].try_number == 1:
            raise RuntimeError("simulated worker crash after submission")
        return job_ids


class CrashInsideSubmit(ArmadaOperator):
    """Simulates a worker that dies on its first try after the server accepted the jobs but
    before their ids reached the task state store."""

    def _submit(self, client, items):  # type: ignore[no-untyped-def]
        job_ids = super()._submit(client, items)
        from airflow.sdk import get_current_context

        if get_current_context()["ti"].try_number == 1:
            raise RuntimeError("simulated worker crash during submission")
        return job_ids


for mode, deferrable in (("deferrable", True), ("sync", False)):
    with dag(f"armada_single_{mode}"):
        ArmadaOperator(task_id="hello", armada_queue=QUEUE, deferrable=deferrable, **FAST,
                       pod_spec=pod("echo hello from armada; sleep 1; echo second line"))

    with dag(f"armada_kill_{mode}"):
        ArmadaOperator(task_id="sleeper", armada_queue=QUEUE, deferrable=deferrable, retries=2,
                       retry_delay=timedelta(0), **FAST, pod_spec=pod("sleep 120"))

with dag("armada_gang"):
    ArmadaOperator(task_id="gang", armada_queue=QUEUE, replicas=3, **FAST,
                   pod_spec=pod("echo member $HOSTNAME; sleep 1"))

with dag("armada_user_error"):
    ArmadaOperator(task_id="fails", armada_queue=QUEUE, retries=2, retry_delay=timedelta(0), **FAST,
                   pod_spec=pod("echo about to fail; echo 'bad input file' > "
                                "/dev/termination-log; exit 3"))

with dag("armada_preempted"):
    # The first try is preempted by the test (an urgent job on the only "victim" node); the
    # retry Airflow makes then succeeds.
    ArmadaOperator(task_id="victim", armada_queue=QUEUE, retries=1, retry_delay=timedelta(0),
                   priority_class="low", **FAST,
                   pod_spec=pod("if [ {{ ti.try_number }} -eq 1 ]; then sleep 60; fi; echo done",
                                cpu="1", nodeSelector={"role": "victim"}))

with dag("armada_server_retry"):
    hog = f"{sys.executable} -c \"x = bytearray(400 * 1024 * 1024); import time; time.sleep(5)\""
    ArmadaOperator(task_id="oom_once", armada_queue=QUEUE, retries=0, **FAST,
                   armada_retry_policy="{{ dag_run.conf['policy'] }}",
                   pod_spec=pod("if [ -e {{ dag_run.conf['marker'] }} ]; then echo recovered; "
                                "else touch {{ dag_run.conf['marker'] }}; " + hog + "; fi",
                                memory="100Mi"))

with dag("armada_crash_after_submit"):
    CrashAfterSubmit(task_id="crashy", armada_queue=QUEUE, retries=1, retry_delay=timedelta(0),
                     **FAST, pod_spec=pod("sleep 2; echo finished"))

with dag("armada_crash_then_user_error"):
    CrashAfterSubmit(task_id="crashy", armada_queue=QUEUE, retries=3, retry_delay=timedelta(0),
                     **FAST, pod_spec=pod("sleep 1; exit 3"))

with dag("armada_crash_inside_submit"):
    CrashInsideSubmit(task_id="crashy", armada_queue=QUEUE, retries=1, retry_delay=timedelta(0),
                      deferrable=False, **FAST, pod_spec=pod("sleep 2; echo finished"))

with dag("armada_dry_run"):
    ArmadaOperator(task_id="dry", armada_queue=QUEUE, dry_run=True, replicas=2,
                   pod_spec=pod("echo {{ dag_run.conf.get('word', 'nothing') }}"))

with dag("armada_templated", params={"queue": QUEUE}):
    ArmadaOperator(
        task_id="templated", armada_queue="{{ params.queue }}", **FAST,
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
""")

with dag("armada_bad_spec"):
    bad = pod("true")
    bad["containers"][0]["imag"] = bad["containers"][0].pop("image")
    ArmadaOperator(task_id="bad", armada_queue=QUEUE, retries=2, retry_delay=timedelta(0),
                   pod_spec=bad)
