"""Jobs indexed by state then queue: counting jobs per queue and state (the metrics endpoint,
every scrape) reads the index alone instead of every job row with its spec.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_state_queue", "jobs", ["state", "queue"])
    op.drop_index("ix_jobs_state", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.drop_index("ix_jobs_state_queue", table_name="jobs")
