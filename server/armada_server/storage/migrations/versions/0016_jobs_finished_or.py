"""ix_jobs_finished: its WHERE spelled as equalities joined by OR, not `state IN (...)`.

SQLite checks every job row it writes against a partial index's WHERE, for the row before
and after the write, and for an IN list it builds the list's lookup table afresh each time:
that made every UPDATE of a job about four times as costly as with the same test spelled
with OR. The index holds the same rows; the retention's queries spell its WHERE the same
way, so SQLite still finds it usable for them.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# SUCCEEDED, FAILED, PREEMPTED, CANCELLED, REJECTED
ENDED = "(state = 3 OR state = 4 OR state = 8 OR state = 9 OR state = 10)"
ENDED_BEFORE = "state IN (3, 4, 8, 9, 10)"


def _finished(where: str) -> None:
    op.drop_index("ix_jobs_finished", table_name="jobs")
    op.create_index(
        "ix_jobs_finished",
        "jobs",
        ["last_transition_at"],
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    _finished(ENDED)


def downgrade() -> None:
    _finished(ENDED_BEFORE)
