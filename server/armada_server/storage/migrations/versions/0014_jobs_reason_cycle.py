"""jobs.reason_cycle: the cycle a job's reason in force began in, kept on the job's row, so
job_reasons holds only the reasons before it (a backlog's first reasons cost no rows).

A job whose latest job_reasons row is its reason in force has that row moved onto it.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_LATEST = "(SELECT max(r.cycle) FROM job_reasons r WHERE r.job_id = jobs.id)"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("reason_cycle", sa.BigInteger))
    op.execute(
        f"UPDATE jobs SET reason_cycle = {_LATEST} WHERE EXISTS (SELECT 1 FROM job_reasons r"
        f" WHERE r.job_id = jobs.id AND r.reason = jobs.scheduling_reason AND r.cycle = {_LATEST})"
    )
    op.execute(
        "DELETE FROM job_reasons WHERE EXISTS (SELECT 1 FROM jobs"
        " WHERE jobs.id = job_reasons.job_id AND jobs.reason_cycle = job_reasons.cycle)"
    )


def downgrade() -> None:
    op.execute(
        "INSERT INTO job_reasons (job_id, cycle, reason) SELECT id, reason_cycle,"
        " scheduling_reason FROM jobs WHERE reason_cycle IS NOT NULL"
    )
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("reason_cycle")
