"""runs.preempting_job_id: the job a scheduling cycle preempted the run to make room for, kept
from the preemption request until the run has stopped, when the preempted event names it.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("preempting_job_id", sa.String(26)))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("preempting_job_id")
