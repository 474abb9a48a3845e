"""runs.excess_flow: what the run holds of its queue's excess-flow budget (thousandths of a
resource-minute), set by the scheduling cycle that leased it; read back with the running
jobs, so any replica that comes to lead knows what each budget has left.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("excess_flow", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("excess_flow")
