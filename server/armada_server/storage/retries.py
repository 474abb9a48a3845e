"""Retry decisions for the server: the policies in force from the database, the engine from
armada_core.retry, and the per-job history kept beside each job."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, select, update

from armada_core.api import submit_pb2
from armada_core.jobs import Failure, Job
from armada_core.jobs.grace import grace_period_seconds
from armada_core.retry import (
    Condition,
    ContainerFailure,
    RetryDecision,
    RetryHistory,
    RetryPolicy,
    RetrySettings,
    RunFailure,
    Verdict,
    evaluate,
    policy_from_proto,
    resolve_policies,
)
from armada_server.storage import schema as t


@dataclass(frozen=True)
class Catalogue:
    """The retry policies and each queue's policy names, read once per transaction."""

    policies: dict[str, RetryPolicy]
    queue_policies: dict[str, tuple[str, ...]]

    @classmethod
    def load(cls, conn: Connection) -> Catalogue:
        policies = {}
        for row in conn.execute(select(t.retry_policies.c.name, t.retry_policies.c.spec)):
            try:
                policies[row.name] = policy_from_proto(submit_pb2.RetryPolicy.FromString(row.spec))
            except ValueError:
                continue  # stored before validation existed: never match it
        queues = {}
        for row in conn.execute(select(t.queues.c.name, t.queues.c.spec)):
            queues[row.name] = tuple(submit_pb2.Queue.FromString(row.spec).retry_policies)
        return cls(policies, queues)


def run_failure(
    job: Job, failure: Failure, *, node: str | None, returned_lease: bool = False
) -> RunFailure:
    """What the engine needs to know about a failed run."""
    try:
        condition = Condition(failure.condition) if failure.condition else None
    except ValueError:
        condition = None
    # A job without pod specs (never stored by a submission) has no grace period to wait.
    grace = grace_period_seconds(job.pod_spec) if job.spec.pod_specs else 0
    return RunFailure(
        containers=tuple(
            ContainerFailure(c.name, c.exit_code, c.message, c.reason, c.init_container)
            for c in failure.containers
        ),
        condition=condition,
        category=failure.category,
        subcategory=failure.subcategory,
        node=node,
        termination_grace_period=float(grace),
        returned_lease=returned_lease,
        message=failure.reason,
    )


class Retries:
    def __init__(self, settings: RetrySettings) -> None:
        self.settings = settings

    def decide(
        self, conn: Connection, catalogue: Catalogue, job: Job, failure: RunFailure, now: datetime
    ) -> RetryDecision:
        """Retry or fail, and record what the decision used."""
        # The job's runs are the truth about how many runs there were.
        stored = _stored(conn, job.id)
        history = replace(_history(stored), run_count=max(1, len(job.runs)))
        if job.at_most_once and not (
            failure.returned_lease
            and job.latest_run is not None
            and job.latest_run.started_at is None
        ):
            decision = RetryDecision(
                False,
                Verdict.FAIL_RULE,
                "the job runs at most once (armadaproject.io/atMostOnce)",
                history,
            )
        else:
            policies = resolve_policies(
                catalogue.queue_policies.get(job.queue, ()),
                job.spec.annotations,
                catalogue.policies,
                self.settings.default_policy_name,
            ).policies
            decision = evaluate(
                job.id, failure, policies=policies, settings=self.settings, history=history, now=now
            )
        if decision.retry:
            conn.execute(
                update(t.jobs)
                .where(t.jobs.c.id == job.id)
                .values(
                    retry_history=json.dumps({**stored, **_fields(decision.history)}),
                    avoid_node=_full_node(job, decision.avoid_node),
                )
            )
        return decision


def _full_node(job: Job, node: str | None) -> str | None:
    run = job.latest_run
    if node is None or run is None:
        return None
    return f"{run.cluster_id}/{node}"


def _stored(conn: Connection, job_id: str) -> dict[str, Any]:
    raw = conn.execute(select(t.jobs.c.retry_history).where(t.jobs.c.id == job_id)).scalar()
    stored: dict[str, Any] = json.loads(raw or "{}")
    return stored


def _history(data: Mapping[str, Any]) -> RetryHistory:
    return RetryHistory(
        rule_retries=data.get("rule_retries", {}),
        total_retries=data.get("total_retries", 0),
        run_count=data.get("run_count", 1),
        gang_generation=data.get("gang_generation", 0),
    )


def _fields(history: RetryHistory) -> dict[str, Any]:
    return {
        "rule_retries": dict(history.rule_retries),
        "total_retries": history.total_retries,
        "run_count": history.run_count,
        "gang_generation": history.gang_generation,
    }


# --- gang generations -------------------------------------------------------------------------


def start_gang_generation(conn: Connection, job_ids: Sequence[str]) -> int:
    """Record that `job_ids` form the next generation of their gang; returns its number.

    A retried gang is formed from the members still to run: members that ended (a sibling
    that already succeeded, or one failed or cancelled for good) never run again, so a
    generation waiting for them would wait forever. The generation's cardinality, the number
    of its members, is what the scheduler places together (see `gang_cardinalities`)."""
    ids = sorted(set(job_ids))
    stored = {
        r.id: json.loads(r.retry_history or "{}")
        for r in conn.execute(
            select(t.jobs.c.id, t.jobs.c.retry_history).where(t.jobs.c.id.in_(ids))
        )
    }
    generation = 1 + max((d.get("gang_generation", 0) for d in stored.values()), default=0)
    for job_id, data in stored.items():
        data.update(gang_generation=generation, gang_cardinality=len(ids))
        conn.execute(
            update(t.jobs).where(t.jobs.c.id == job_id).values(retry_history=json.dumps(data))
        )
    return generation


def gang_cardinalities(conn: Connection, where: ColumnElement[bool]) -> dict[str, int]:
    """Job id -> cardinality of its gang's current generation, for the gang members matched
    by `where` that are in a retried generation."""
    return gang_cardinalities_of(conn.execute(gang_cardinalities_select(where)))


def gang_cardinalities_select(where: ColumnElement[bool]) -> Select[tuple[str, str]]:
    """What `gang_cardinalities` reads (for a caller that builds it once)."""
    return select(t.jobs.c.id, t.jobs.c.retry_history).where(
        where, t.jobs.c.gang_id.is_not(None), t.jobs.c.retry_history != "{}"
    )


def gang_cardinalities_of(rows: Iterable[Sequence[Any]]) -> dict[str, int]:
    """`gang_cardinalities` of the rows its select read."""
    out: dict[str, int] = {}
    for job_id, raw in rows:
        cardinality = json.loads(raw).get("gang_cardinality")
        if cardinality:
            out[job_id] = int(cardinality)
    return out
