"""Indexes that let the retention find and delete what it prunes without scanning.

- ix_jobs_finished: ended jobs by the time they ended (partial: only terminal states, so a
  submission or a queued job's transitions never write it).
- ix_events_job_id: a job's events, so the events of pruned jobs go without reading their job
  sets' whole logs (job ids are time-ordered, so new entries land at the index's end).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TERMINAL = "state IN (3, 4, 8, 9, 10)"  # SUCCEEDED, FAILED, PREEMPTED, CANCELLED, REJECTED


def upgrade() -> None:
    op.create_index(
        "ix_jobs_finished",
        "jobs",
        ["last_transition_at"],
        sqlite_where=sa.text(TERMINAL),
        postgresql_where=sa.text(TERMINAL),
    )
    op.create_index("ix_events_job_id", "events", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_events_job_id", table_name="events")
    op.drop_index("ix_jobs_finished", table_name="jobs")
