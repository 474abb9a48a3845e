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
    works while the task is deferred (Airflow otherwise computes links after execution)."""

    name = "Armada Job"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""
