"""Executors and their nodes; per-job scheduling reason, retry history and avoided node.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "executors",
        sa.Column("id", sa.String(253), primary_key=True),
        sa.Column("pool", sa.String(253), nullable=False),
        sa.Column("nodes", sa.LargeBinary, nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("scheduling_reason", sa.Text, nullable=False, server_default=""))
        batch.add_column(sa.Column("retry_history", sa.Text, nullable=False, server_default="{}"))
        batch.add_column(sa.Column("avoid_node", sa.String(253)))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("avoid_node")
        batch.drop_column("retry_history")
        batch.drop_column("scheduling_reason")
    op.drop_table("executors")
