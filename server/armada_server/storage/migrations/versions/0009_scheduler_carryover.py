"""scheduler_carryover: what the scheduling leader carries from one cycle to the next (each
queue's decayed usage, the rate limits' token buckets), so a restart or another replica taking
the lead goes on from it instead of starting afresh. One row.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scheduler_carryover",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("scheduler_carryover")
