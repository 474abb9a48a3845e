"""runs.preemption_kind: why the run was preempted (urgency, fair_share, group_below_minimum
or manual), kept beside preempting_job_id so that the web UI can say it.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("preemption_kind", sa.String(32)))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("preemption_kind")
