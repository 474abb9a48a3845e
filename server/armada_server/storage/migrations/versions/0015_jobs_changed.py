"""jobs.changed: the change number of a job's latest write, by which the scheduling loop
reads only the jobs that changed since its last cycle (storage/changes.py); change_clock,
SQLite's source of those numbers.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("change_clock", sa.Column("n", sa.BigInteger, nullable=False))
    op.execute("INSERT INTO change_clock (n) VALUES (1)")
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("changed", sa.BigInteger, nullable=False, server_default="0"))
    op.create_index("ix_jobs_changed", "jobs", ["changed"])


def downgrade() -> None:
    op.drop_index("ix_jobs_changed", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("changed")
    op.drop_table("change_clock")
