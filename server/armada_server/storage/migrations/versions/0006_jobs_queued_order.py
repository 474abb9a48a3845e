"""Queued jobs indexed in the scheduler's order within their queue, and queued gang members
by gang: GetJobDetails counts a waiting job's place in its queue's line from these alone.
Partial (state = 0, queued): the line is what they hold, and finished jobs cost nothing.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_jobs_queued_order",
        "jobs",
        [
            "queue",
            "priority_class",
            "priority",
            "submitted_at",
            "id",
            "gang_id",
            "retry_after",
            "state",
        ],
        sqlite_where=sa.text("state = 0"),
        postgresql_where=sa.text("state = 0"),
    )
    op.create_index(
        "ix_jobs_queued_gangs",
        "jobs",
        [
            "queue",
            "gang_id",
            "priority_class",
            "priority",
            "submitted_at",
            "id",
            "retry_after",
            "state",
        ],
        sqlite_where=sa.text("state = 0 AND gang_id IS NOT NULL"),
        postgresql_where=sa.text("state = 0 AND gang_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_queued_gangs", table_name="jobs")
    op.drop_index("ix_jobs_queued_order", table_name="jobs")
