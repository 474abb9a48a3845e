"""How the executor marks what it creates, so that it can find its objects again.

Every pod, service and ingress carries the executor's id and the run's ids as labels; after a
restart the executor lists by its own label to re-adopt its pods and remove leftovers, and a
run's auxiliary objects are found (and deleted) by its run id. Values that are not valid label
values (a free-form job set name) go in annotations instead.
"""

from __future__ import annotations

import re

from armada_core.jobs.annotations import PREFIX

JOB_ID = PREFIX + "job-id"
RUN_ID = PREFIX + "run-id"
QUEUE = PREFIX + "queue"
JOB_SET = PREFIX + "job-set"
EXECUTOR = PREFIX + "executor"
#: Annotation with the job set's full name (a label value cannot hold every name).
JOB_SET_ANNOTATION = PREFIX + "job-set-id"
#: Annotation naming the node the run was leased on.
LEASED_NODE = PREFIX + "leased-node"
#: Label marking an object as belonging to a run, not being the run's pod.
AUXILIARY = PREFIX + "auxiliary"

HOSTNAME = "kubernetes.io/hostname"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and bool(_LABEL_VALUE.match(text))


def selector(**labels: str) -> str:
    """An equality label selector, e.g. `armadaproject.io/executor=gpu-1`."""
    return ",".join(f"{k}={v}" for k, v in labels.items())


def of_executor(executor_id: str) -> str:
    return selector(**{EXECUTOR: executor_id})


def of_run(executor_id: str, run_id: str) -> str:
    return selector(**{EXECUTOR: executor_id, RUN_ID: run_id})
