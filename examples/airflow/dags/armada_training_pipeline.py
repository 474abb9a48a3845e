"""Preprocess, train on a 4-pod gang, evaluate: three Armada jobs in one Airflow DAG.

Jobs run as local processes on the embedded server's local executor, so they share this
machine's file system: the run's conf names a work directory every job uses.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_armada.operators.armada import ArmadaOperator

QUEUE = "ml"
WORKDIR = "{{ dag_run.conf.get('workdir', '/tmp/armada-example') }}"


def pod(script: str, cpu: str = "500m", memory: str = "256Mi") -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "image": "python:3.11-slim",
                "command": ["sh", "-c", script],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ]
    }


with DAG(
    "armada_training_pipeline",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=5)},
    tags=["armada", "example"],
) as dag:
    preprocess = ArmadaOperator(
        task_id="preprocess",
        armada_queue=QUEUE,
        pod_spec=pod(
            f"mkdir -p {WORKDIR} && seq 1 1000 > {WORKDIR}/data.txt && "
            f"echo preprocessed $(wc -l < {WORKDIR}/data.txt) rows"
        ),
        log_interval=1.0,
    )

    train = ArmadaOperator(
        task_id="train",
        armada_queue=QUEUE,
        replicas=4,  # a gang: all four pods are placed together or not at all
        pod_spec=pod(
            f"echo worker $HOSTNAME of 4 training on $(wc -l < {WORKDIR}/data.txt) "
            f"rows; sleep 2; echo $HOSTNAME >> {WORKDIR}/workers.txt"
        ),
        priority_class="armada-preemptible",
        labels={"stage": "train"},
        log_interval=1.0,
    )

    evaluate = ArmadaOperator(
        task_id="evaluate",
        armada_queue=QUEUE,
        pod_spec=pod(
            "echo evaluating the model trained by "
            "{{ ti.xcom_pull(task_ids='train')['job_ids'] | length }} workers; "
            f"test $(wc -l < {WORKDIR}/workers.txt) -eq 4 && echo accuracy=0.97"
        ),
        log_interval=1.0,
    )

    preprocess >> train >> evaluate
