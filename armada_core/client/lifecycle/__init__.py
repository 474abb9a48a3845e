"""One task lifecycle for every orchestrator integration: identity, submit-or-reattach, the
wait (events, logs, waiting reasons, status checks), and the result payload.

An integration keeps only "orchestrator context -> `TaskIdentity`" and "outcome ->
orchestrator exception"; everything between is here, so Airflow, Dagster and Prefect decide
the same way whether to reattach, when to cancel an earlier attempt, and what a result holds.

Every job a task submits carries the task's external job URI and annotations naming the task,
the attempt and the generation. A new attempt finds the task's jobs by that URI in the job sets
its lineage names, without any state of its own:

- jobs of the same attempt that can still succeed, or did, are reattached to (a crashed
  submitter, a resumed run, a worker taking over a flow run);
- if the same attempt's jobs ended otherwise (cancelled, preempted, failed...), it submits a
  new generation (a new client id, or the server would answer with the ended jobs);
- live jobs of any other attempt are cancelled, and their end awaited, before submitting: two
  attempts of one task never run at once, and no attempt is left running as a zombie.

The logic is written once as a generator of calls (`armada_core.client.operations.Call`) and
pauses, driven by the blocking client (`submit_or_reattach`, `wait`) or the asyncio one
(`asubmit_or_reattach`, `wait_async`). Modules: `identity` (who a job works for),
`submission` (submit-or-reattach), `waiting` (the one wait), `run_logs` (the runs whose log
lines it copies), `result` (the payload), `steps`
(the drivers), `reaping` (the reconciler that cancels the jobs of tasks their orchestrator
ended behind the integration's back) and `airflow_states` (its Airflow adapter).
"""

from .identity import ATTEMPT_ANNOTATION, GENERATION_ANNOTATION, TASK_ANNOTATION, TaskIdentity
from .result import result_payload
from .run_logs import LogTail
from .steps import LifecycleError
from .submission import (
    FoundJob,
    Plan,
    Submission,
    asubmit_or_reattach,
    plan,
    submit_or_reattach,
    submit_or_reattach_steps,
)
from .waiting import (
    AskCancel,
    JobsVanished,
    News,
    Progress,
    StatusCheck,
    TaskEnd,
    WaitingReasons,
    WaitSettings,
    Watch,
    job_labels,
    notice_line,
    wait,
    wait_async,
    wait_steps,
)

__all__ = [
    "ATTEMPT_ANNOTATION",
    "GENERATION_ANNOTATION",
    "TASK_ANNOTATION",
    "AskCancel",
    "FoundJob",
    "JobsVanished",
    "LifecycleError",
    "LogTail",
    "News",
    "Plan",
    "Progress",
    "StatusCheck",
    "Submission",
    "TaskEnd",
    "TaskIdentity",
    "WaitSettings",
    "WaitingReasons",
    "Watch",
    "asubmit_or_reattach",
    "job_labels",
    "notice_line",
    "plan",
    "result_payload",
    "submit_or_reattach",
    "submit_or_reattach_steps",
    "wait",
    "wait_async",
    "wait_steps",
]
