"""The control plane's guards and executor facts.

- jobs.version: the row's version; every transition writes `version + 1` where the version
  is still the one it read (compare-and-set), so a transition decided on a stale read (a
  cancel racing a lease on another replica) is detected instead of overwriting.
- runs.releases_at: until when a run that ended by the server's decision (cancelled,
  restarted with its gang, expired) may still hold its node's capacity; cleared once its
  executor no longer holds it.
- executors.capabilities / address / address_token: what an executor can honour, and where
  it serves logs (with the secret the server presents there).
- node_cordons: nodes an operator cordoned, of any executor.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("version", sa.Integer, nullable=False, server_default="0"))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("releases_at", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_runs_releases_at",
        "runs",
        ["cluster_id", "releases_at"],
        sqlite_where=sa.text("releases_at IS NOT NULL"),
        postgresql_where=sa.text("releases_at IS NOT NULL"),
    )
    with op.batch_alter_table("executors") as batch:
        batch.add_column(sa.Column("capabilities", sa.LargeBinary))
        batch.add_column(sa.Column("address", sa.String(1024)))
        batch.add_column(sa.Column("address_token", sa.String(256)))
    op.create_table(
        "node_cordons",
        sa.Column("executor_id", sa.String(253), primary_key=True),
        sa.Column("node", sa.String(253), primary_key=True),
        sa.Column("cordoned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requestor", sa.String(253), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("node_cordons")
    with op.batch_alter_table("executors") as batch:
        batch.drop_column("address_token")
        batch.drop_column("address")
        batch.drop_column("capabilities")
    op.drop_index("ix_runs_releases_at", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("releases_at")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("version")
