"""The scheduling cycle as a pure function: a snapshot in, decisions out (seed 000).

``schedule`` is the fast implementation the server uses; ``reference_schedule`` is the plain
transcription of the seed's pseudocode that the fast one is tested against.
"""

from .fast import fast_schedule
from .model import (
    Job,
    KnownSerials,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PriorityClass,
    Queue,
    Reasons,
    Resources,
    SchedulingConfig,
    SchedulingResult,
    Snapshot,
    Taint,
    Toleration,
    parse_quantity,
    resources,
)
from .reference import reference_schedule

#: The implementation the server uses.
schedule = fast_schedule

__all__ = [
    "Job",
    "KnownSerials",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PriorityClass",
    "Queue",
    "Reasons",
    "Resources",
    "SchedulingConfig",
    "SchedulingResult",
    "Snapshot",
    "Taint",
    "Toleration",
    "fast_schedule",
    "parse_quantity",
    "reference_schedule",
    "resources",
    "schedule",
]
