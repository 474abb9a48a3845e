"""Reasons reported for jobs left unscheduled or failed; both implementations use these strings."""

UNKNOWN_QUEUE = "job's queue does not exist"
UNKNOWN_PRIORITY_CLASS = "job's priority class does not exist"
QUEUE_CORDONED = "queue is cordoned"
GANG_TOO_MANY = "gang has more queued members than its cardinality"
NO_MATCHING_NODE = "no node matches the job's selector, tolerations, affinity and node avoidance"
TOO_LARGE = "job does not fit on any matching node even when the node is empty"
NO_CAPACITY = "insufficient free resources on matching nodes"
MAX_JOBS_PER_CYCLE = "maximum number of jobs scheduled per cycle reached"
MAX_RESOURCES_PER_CYCLE = "maximum resources scheduled per cycle reached"
GLOBAL_RATE_LIMIT = "global scheduling rate limit reached (scheduling_rate)"
QUEUE_RATE_LIMIT = "queue's scheduling rate limit reached (queue_scheduling_rate)"
GANG_ELASTIC_REST = "gang minimum cardinality met; member could not be scheduled"


def gang_incomplete(have: int, cardinality: int) -> str:
    return f"gang incomplete: {have} of {cardinality} members queued"


def queue_class_limit(priority_class: str) -> str:
    return f"queue's resource limit for priority class {priority_class!r} reached"


def gang_failed(member_reason: str) -> str:
    return f"gang could not be scheduled: {member_reason}"


def gang_uniformity_failed(label: str) -> str:
    return f"gang could not be scheduled on nodes sharing one value of label {label!r}"


def queue_lookback(lookback: int) -> str:
    return f"beyond the queue's lookback of {lookback} jobs this cycle"
