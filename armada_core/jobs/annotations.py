"""Annotation keys with a meaning to Armada.

Gangs and the seed-002 submission options travel as annotations so that every client of the
public API, the official ones included, can set them without new fields.
"""

from __future__ import annotations

PREFIX = "armadaproject.io/"

GANG_ID = PREFIX + "gangId"
GANG_CARDINALITY = PREFIX + "gangCardinality"
GANG_MINIMUM_CARDINALITY = PREFIX + "gangMinimumCardinality"
GANG_NODE_UNIFORMITY_LABEL = PREFIX + "gangNodeUniformityLabel"
# Most network hops between any two members (the scheduler's topology levels define hops).
GANG_MAX_HOPS = PREFIX + "gangMaxHops"
# Elastic pod groups (seed 002 `PodGroupSpec` subsets): each member names its role and the
# role's minimum; a role's maximum is the number of members submitted with that role.
GANG_ROLE = PREFIX + "gangRole"
GANG_ROLE_MINIMUM = PREFIX + "gangRoleMinimum"
# Most network hops between any two members of the member's role; without it a pod group's
# gangMaxHops bounds each role.
GANG_ROLE_MAX_HOPS = PREFIX + "gangRoleMaxHops"

# The task lifecycle's stamps (armada_core.client.lifecycle): the orchestrator's task, the same
# for all its attempts; the attempt; the generation within the attempt. The server keeps one
# live generation per task and queue (armada_core.jobs.tasks).
TASK = PREFIX + "task"
TASK_ATTEMPT = PREFIX + "task-attempt"
TASK_GENERATION = PREFIX + "task-generation"

RETRY_POLICY = PREFIX + "retry-policy"
EXTERNAL_JOB_URI = PREFIX + "externalJobUri"

# Seed 002: a job runs at most once (never retried), may opt out of preemption, and becomes
# fair-share preemptible once it has run for its lifetime (seconds).
AT_MOST_ONCE = PREFIX + "atMostOnce"
PREEMPTIBLE = PREFIX + "preemptible"
LIFETIME = PREFIX + "lifetimeSeconds"

# Run only on nodes of this pool (executors belong to pools; upstream selects pools per job).
POOL = PREFIX + "pool"

# Used by retries (seed 001): never run again on the node of the last failed run.
NODE_NAME_LABEL = PREFIX + "node-name"
