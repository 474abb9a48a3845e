"""Running the test DAGs and reading what they left behind."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from types import ModuleType
from typing import Any

from armada_core.client import ArmadaClient

from .conftest import DAGS, QUEUE


@cache
def dags() -> ModuleType:
    spec = importlib.util.spec_from_file_location("armada_test_dags", DAGS / "armada_test_dags.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_dag(dag_id: str) -> Any:
    return dags().BY_ID[dag_id]


def run_dag(
    dag_id: str, conf: dict[str, Any] | None = None, run_after: datetime | None = None
) -> Any:
    """dag.test() the DAG; returns the DagRun."""
    return get_dag(dag_id).test(run_conf=conf, run_after=run_after)


def new_run(dag_id: str) -> tuple[datetime, str]:
    """A run time and the job set the DAG's run at that time will use (known in advance, so
    a test can act on the run's jobs while dag.test() runs)."""
    run_after = datetime.now(UTC)
    return run_after, f"{dag_id}-manual__{run_after.isoformat()}"


def task_instance(dag_run: Any, task_id: str) -> Any:
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = dag_run.get_task_instance(task_id, session=session)
        session.expunge(ti)
        return ti


def xcom(dag_run: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(
                run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key
            )
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def job_set_of(dag_run: Any) -> str:
    return f"{dag_run.dag_id}-{dag_run.run_id}"


def submitted_jobs(client: ArmadaClient, job_set_id: str) -> list[str]:
    """Every job ever submitted to the job set, from its event log."""
    ids = []
    for message in client.get_job_set_events(QUEUE, job_set_id, watch=False):
        if message.message.WhichOneof("events") == "submitted":
            ids.append(message.message.submitted.job_id)
    return ids


def wait_until_running(client: ArmadaClient, job_set_id: str, timeout: float = 60) -> str:
    """The id of the first job of the job set seen running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in client.get_job_set_events(QUEUE, job_set_id, watch=False):
            if message.message.WhichOneof("events") == "running":
                return message.message.running.job_id
        time.sleep(0.1)
    raise TimeoutError(f"no job of {job_set_id} ran within {timeout}s")


class Background(threading.Thread):
    """Runs `action` beside dag.test(), keeping any exception for the test to re-raise."""

    def __init__(self, action: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.action = action
        self.error: BaseException | None = None
        self.result: Any = None

    def run(self) -> None:
        try:
            self.result = self.action()
        except BaseException as e:  # reported by join_checked
            self.error = e

    def join_checked(self, timeout: float = 60) -> Any:
        self.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result
