"""ix_runs_active: the active runs by executor.

A lease expiry looks for the active runs of the executors that went silent, and an
executor's full read (every ten minutes) for its own; both scanned every run the database
keeps, the expiry in every cycle while any executor that ever synced was silent. The index
is partial: it holds the active runs only, so the many ended ones cost it nothing.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# LEASED, PENDING, RUNNING, as schema.active_run() spells it.
ACTIVE = "(state = 1 OR state = 2 OR state = 3)"


def upgrade() -> None:
    op.create_index(
        "ix_runs_active",
        "runs",
        ["cluster_id"],
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_active", table_name="runs")
