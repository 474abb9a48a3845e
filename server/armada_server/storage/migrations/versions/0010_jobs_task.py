"""jobs.task and task_locks: one live generation per task.

- jobs.task: the task a job works for (its armadaproject.io/task annotation, NULL for none),
  with ix_jobs_queue_task (queue, task), partial over jobs with a task. Filled here for the
  jobs that can still be live (not ended, or ended with a run still stopping); jobs that had
  ended before keep NULL, as no live-generation check or lookup needs them.
- task_locks: a row per task and queue, locked by a submission of the task's jobs while it
  looks for the task's live jobs (storage/task_generations.py).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from armada_core.api import submit_pb2

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TASK = "armadaproject.io/task"
ENDED = (
    submit_pb2.SUCCEEDED,
    submit_pb2.FAILED,
    submit_pb2.PREEMPTED,
    submit_pb2.CANCELLED,
    submit_pb2.REJECTED,
)


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("task", sa.String(512)))
    op.create_index(
        "ix_jobs_queue_task",
        "jobs",
        ["queue", "task"],
        sqlite_where=sa.text("task IS NOT NULL"),
        postgresql_where=sa.text("task IS NOT NULL"),
    )
    op.create_table(
        "task_locks",
        sa.Column("queue", sa.String(63), primary_key=True),
        sa.Column("task", sa.String(512), primary_key=True),
        sa.Column("locked_at", sa.DateTime(timezone=True), nullable=False),
    )
    _fill_live_tasks()


def _fill_live_tasks() -> None:
    """jobs.task of the jobs that can still be live, from their specs' annotations."""
    jobs = sa.table("jobs", sa.column("id"), sa.column("state"), sa.column("spec"))
    runs = sa.table("runs", sa.column("job_id"), sa.column("releases_at"))
    stopping = sa.select(runs.c.job_id).where(runs.c.releases_at.is_not(None))
    conn = op.get_bind()
    rows: Sequence[tuple[str, bytes]] = conn.execute(
        sa.select(jobs.c.id, jobs.c.spec).where(
            sa.or_(jobs.c.state.not_in([int(s) for s in ENDED]), jobs.c.id.in_(stopping))
        )
    ).all()
    tasks = []
    for job_id, spec in rows:
        task = submit_pb2.Job.FromString(spec).annotations.get(TASK)
        if task and len(task) <= 512:
            tasks.append({"_id": job_id, "task": task})
    if tasks:
        named = sa.table("jobs", sa.column("id"), sa.column("task"))
        conn.execute(
            sa.update(named)
            .where(named.c.id == sa.bindparam("_id"))
            .values(task=sa.bindparam("task")),
            tasks,
        )


def downgrade() -> None:
    op.drop_table("task_locks")
    op.drop_index("ix_jobs_queue_task", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("task")
