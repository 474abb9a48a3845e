"""scheduling_cycles and job_reasons: what the scheduling reports read.

- scheduling_cycles: one row per scheduling cycle (its number, when it began, how long it
  took, and the cycle's figures as JSON); the leader keeps the last `report_cycles`.
- job_reasons: a job's reasons for waiting, one row per change (the cycle it changed in and
  the new reason), not one per cycle; "" after a job was placed.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scheduling_cycles",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("report", sa.Text, nullable=False),
    )
    op.create_table(
        "job_reasons",
        sa.Column("job_id", sa.String(26), primary_key=True),
        sa.Column("cycle", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    op.create_index("ix_job_reasons_cycle", "job_reasons", ["cycle"])


def downgrade() -> None:
    op.drop_index("ix_job_reasons_cycle", table_name="job_reasons")
    op.drop_table("job_reasons")
    op.drop_table("scheduling_cycles")
