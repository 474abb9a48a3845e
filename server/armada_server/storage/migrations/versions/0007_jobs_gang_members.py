"""Every member of a gang by gang id and queue, whatever its state: the scheduling loop reads
the members that succeeded of each pod group with members running (they keep their role's
minimum), and a retried or cut gang reads its members. Partial (gang members only); queue and
gang id never change, so a job writes the index once.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_jobs_gang_members",
        "jobs",
        ["gang_id", "queue"],
        sqlite_where=sa.text("gang_id IS NOT NULL"),
        postgresql_where=sa.text("gang_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_gang_members", table_name="jobs")
