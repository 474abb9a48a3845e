"""Initial schema: queues, retry policies, job sets, events, jobs, runs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "queues",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("cordoned", sa.Boolean, nullable=False),
        sa.Column("spec", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "retry_policies",
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("spec", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "job_sets",
        sa.Column("queue", sa.String(63), primary_key=True),
        sa.Column("name", sa.String(1024), primary_key=True),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("created_at", tz, nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("queue", sa.String(63), primary_key=True),
        sa.Column("job_set", sa.String(1024), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True),
        sa.Column("job_id", sa.String(26), nullable=False),
        sa.Column("created_at", tz, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("job_set", sa.String(1024), nullable=False),
        sa.Column("client_id", sa.String(1024)),
        sa.Column("external_job_uri", sa.String(2048)),
        sa.Column("state", sa.SmallInteger, nullable=False),
        sa.Column("priority", sa.Float, nullable=False),
        sa.Column("priority_class", sa.String(253), nullable=False),
        sa.Column("gang_id", sa.String(1024)),
        sa.Column("submitted_at", tz, nullable=False),
        sa.Column("last_transition_at", tz, nullable=False),
        sa.Column("retry_after", tz),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("cancel_reason", sa.Text, nullable=False),
        sa.Column("cancel_user", sa.String(253), nullable=False),
        sa.Column("cancelled_at", tz),
        sa.Column("preempt_requested", sa.Boolean, nullable=False),
        sa.Column("failure_reason", sa.Text, nullable=False),
        sa.Column("spec", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_jobs_queue_job_set", "jobs", ["queue", "job_set"])
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index(
        "ux_jobs_queue_client_id",
        "jobs",
        ["queue", "client_id"],
        unique=True,
        sqlite_where=sa.text("client_id IS NOT NULL"),
        postgresql_where=sa.text("client_id IS NOT NULL"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "job_id", sa.String(26), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("run_index", sa.Integer, nullable=False),
        sa.Column("cluster_id", sa.String(253), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("pool", sa.String(253), nullable=False),
        sa.Column("state", sa.SmallInteger, nullable=False),
        sa.Column("leased_at", tz),
        sa.Column("pending_at", tz),
        sa.Column("started_at", tz),
        sa.Column("finished_at", tz),
        sa.Column("kubernetes_id", sa.String(253), nullable=False),
        sa.Column("condition", sa.String(64), nullable=False),
        sa.Column("category", sa.String(253), nullable=False),
        sa.Column("subcategory", sa.String(253), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("containers", sa.Text, nullable=False),
    )
    op.create_index("ix_runs_job_id", "runs", ["job_id", "run_index"], unique=True)


def downgrade() -> None:
    for table in ("runs", "jobs", "events", "job_sets", "retry_policies", "queues"):
        op.drop_table(table)
