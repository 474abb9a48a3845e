"""Reasons reported for jobs left unscheduled or failed; both implementations use these strings."""

from __future__ import annotations

from collections.abc import Sequence

from .model import CPU

UNKNOWN_QUEUE = "job's queue does not exist"
UNKNOWN_PRIORITY_CLASS = "job's priority class does not exist"
QUEUE_CORDONED = "queue is cordoned"
GANG_TOO_MANY = "gang has more queued members than its cardinality"
NO_MATCHING_NODE = "no node matches the job's selector, tolerations, affinity and node avoidance"
TOO_LARGE = "job does not fit on any matching node even when the node is empty"
#: A gang's member that found no room (a single job says more: ``no_room``).
NO_CAPACITY = "insufficient free resources on matching nodes"
MAX_JOBS_PER_CYCLE = "maximum number of jobs scheduled per cycle reached"
MAX_RESOURCES_PER_CYCLE = "maximum resources scheduled per cycle reached"
GLOBAL_RATE_LIMIT = "global scheduling rate limit reached (scheduling_rate)"
QUEUE_RATE_LIMIT = "queue's scheduling rate limit reached (queue_scheduling_rate)"
NON_PREEMPTIBLE_OVERSHOOT = (
    "queue's non-preemptible jobs would exceed its fair share by more than "
    "non_preemptible_overshoot"
)
EXCESS_FLOW_BUDGET = (
    "queue's excess-flow budget for jobs above its fair share is used up (excess_flow_budget)"
)
GANG_ELASTIC_REST = "gang minimum cardinality met; member could not be scheduled"


def elastic_waits(gang_id: str, role: str) -> str:
    """An elastic member (above its role's minimum) that found no room this cycle."""
    return f"elastic member of gang {gang_id} (role {role}) waits for capacity"


def role_below_minimum(gang_id: str, role: str, kept: int, minimum: int) -> str:
    """A queued member of a running group that a role fell below its minimum (its members
    running or succeeded, ``kept``): the group's running members are preempted and it starts
    again as a whole."""
    return (
        f"gang {gang_id}: role {role} has {kept} of its minimum {minimum} members "
        "running or succeeded; the group is preempted and starts again as a whole"
    )


def role_short(gang_id: str, role: str, members: int, minimum: int) -> str:
    """A group that can never be placed: a role has fewer members than its minimum."""
    return f"gang {gang_id}: role {role} has {members} members, fewer than its minimum {minimum}"


def gang_incomplete(have: int, cardinality: int) -> str:
    return f"gang incomplete: {have} of {cardinality} members queued"


def queue_class_limit(priority_class: str) -> str:
    return f"queue's resource limit for priority class {priority_class!r} reached"


def gang_failed(member_reason: str) -> str:
    return f"gang could not be scheduled: {member_reason}"


def gang_uniformity_failed(label: str) -> str:
    return f"gang could not be scheduled on nodes sharing one value of label {label!r}"


def gang_hops(size: int, max_hops: int, label: str | None) -> str:
    """A gang whose maximum hops no domain it may use can meet: ``label`` is the widest
    level within them (None: no level is that narrow)."""
    return _hops_unmet(f"gang of {size} needs members within {max_hops} hops", label)


def role_hops(gang_id: str, role: str, size: int, max_hops: int, label: str | None) -> str:
    """A pod group whose role's minimum (``size`` members) no domain within the role's
    maximum hops holds: ``label`` is the widest level within them."""
    wanted = f"gang {gang_id}: role {role} needs {size} members within {max_hops} hops"
    return _hops_unmet(wanted, label)


def _hops_unmet(wanted: str, label: str | None) -> str:
    if label is None:
        return f"{wanted}; no topology level is that narrow"
    if label == "kubernetes.io/hostname":
        return f"{wanted} (one node); no node has room"
    return f"{wanted} (one {label}); no {label.rsplit('/', 1)[-1]} has room"


def queue_lookback(lookback: int) -> str:
    return f"beyond the queue's lookback of {lookback} jobs this cycle"


#: Resources counted in bytes: rendered with a binary suffix when one divides them exactly.
_BYTES = frozenset({"memory", "ephemeral-storage", "storage"})
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity(resource: str, amount: int) -> str:
    """An amount of ``resource`` as Kubernetes writes it: cpu in cores, or millicores when
    not whole ("500m"); bytes with the largest binary suffix that divides them exactly
    ("32Gi", "1536Mi", else plain bytes); anything else as the integer it is."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and (resource in _BYTES or resource.startswith("hugepages-")):
        for suffix, size in _BINARY:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)


def no_room(matching: int, dims: Sequence[str], request: Sequence[int]) -> str:
    """A single job that fits on some matching node when it is empty, but on none now:
    how many nodes match it (node selector, tolerations, affinity, node avoidance; not
    cordoned) and what it requests, in the cycle's dimension order (zeros left out). It
    depends on nothing else, so it stays the same from cycle to cycle while they do."""
    asked = ", ".join(f"{quantity(d, int(v))} {d}" for d, v in zip(dims, request, strict=True) if v)
    if matching == 1:
        counted = "0 of 1 matching node has"
    else:
        counted = f"0 of {matching} matching nodes have"
    if not asked:
        return f"{counted} room for a job that requests nothing"
    return f"{counted} {asked} free"
