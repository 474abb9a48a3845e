"""`ArmadaJobLink`: the "Armada Job" button on a task, pointing at the job in Armada's UI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


class ArmadaJobLink(BaseOperatorLink):
    """The operator pushes the URL under `xcom_key` as soon as it has submitted, so the link
    works while the task is deferred (Airflow otherwise computes links after execution).

    Airflow asks every try for its links when it ends; an operator that knows its link (or
    that it has none: a try that failed before submitting) answers, so no XCom is read that
    was never pushed (Airflow logs such a read as an error that hides the task's own)."""

    name = "Armada Job"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        known = getattr(operator, "job_link", None)  # ArmadaOperator.job_link
        if isinstance(known, str):
            return known
        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""
