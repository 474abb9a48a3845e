"""A workload to simulate: queues with their priority factors, nodes, and job arrivals.

From YAML (`load_workload`):

    duration: 6h                 # how long to simulate (default: until every job ended)
    queues:
      - {name: a, priority_factor: 1}
    nodes:                       # as the server's `nodes:` (default: the config's)
      - 10x32x128Gi
    jobs:                        # each entry: `count` jobs, one every `every` seconds
      - {queue: a, at: 0, count: 100, every: 5, runtime: 30m, cpu: "4", memory: 8Gi}
      - {queue: a, at: 1h, gang: {cardinality: 4, uniformity_label: rack}, runtime: 1h}
      - {queue: a, at: 2h, roles: [{name: driver}, {name: worker, minimum: 2, maximum: 8}]}

A job entry may also give `job_set`, `gpus`, `priority_class` and `lifetime`. Durations are
seconds or text with a unit (`90s`, `30m`, `2h`, `7d`). Errors name the entry and field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from armada_server.config import ConfigError, NodeGroup, node_groups

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*$")
JOB_FIELDS = frozenset(
    {
        "queue",
        "job_set",
        "at",
        "count",
        "every",
        "runtime",
        "cpu",
        "memory",
        "gpus",
        "priority_class",
        "lifetime",
        "gang",
        "roles",
    }
)
GANG_FIELDS = frozenset({"cardinality", "minimum", "uniformity_label", "max_hops"})
ROLE_FIELDS = frozenset({"name", "minimum", "maximum"})


class WorkloadError(ValueError):
    """A workload that cannot be simulated; the message names the field."""


def seconds(value: object, where: str) -> float:
    """A duration: a number of seconds or text such as `30m`."""
    if isinstance(value, bool):
        raise WorkloadError(f"{where}: expected a duration such as 600 or 10m, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _DURATION.match(str(value))
        if match is None:
            raise WorkloadError(f"{where}: expected a duration such as 600 or 10m, got {value!r}")
        number = float(match.group(1)) * UNITS[match.group(2) or "s"]
    if number < 0:
        raise WorkloadError(f"{where}: must not be negative, got {value!r}")
    return number


@dataclass(frozen=True)
class QueueSpec:
    name: str
    priority_factor: float = 1.0


@dataclass(frozen=True)
class Gang:
    cardinality: int
    minimum: int | None = None
    uniformity_label: str | None = None
    max_hops: int | None = None


@dataclass(frozen=True)
class RoleSpec:
    name: str
    minimum: int = 1
    maximum: int | None = None


@dataclass(frozen=True)
class Arrival:
    """One job (or one gang or pod group) submitted `at` seconds into the simulation; each
    member runs `runtime` seconds once started. `name` is its client id, unique."""

    name: str
    at: float
    queue: str
    runtime: float
    job_set: str = "simulated"
    cpu: str = "1"
    memory: str = "1Gi"
    gpus: int = 0
    priority_class: str | None = None
    lifetime: float | None = None
    gang: Gang | None = None
    roles: tuple[RoleSpec, ...] = ()


@dataclass(frozen=True)
class Workload:
    queues: tuple[QueueSpec, ...]
    arrivals: tuple[Arrival, ...]  # by time, then as given
    nodes: tuple[NodeGroup, ...] = ()  # none: the server configuration's
    duration: float | None = None  # None: until every job has ended
    source: str = ""  # where it came from, for the report

    def __post_init__(self) -> None:
        names = {q.name for q in self.queues}
        for a in self.arrivals:
            if a.queue not in names:
                raise WorkloadError(f"job {a.name}: queue {a.queue!r} is not in queues")


def _mapping(value: object, where: str, known: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise WorkloadError(f"{where}: expected a mapping, got {value!r}")
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise WorkloadError(
            f"{where}.{unknown[0]}: unknown field (expected {', '.join(sorted(known))})"
        )
    return value


def _whole(value: object, where: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise WorkloadError(f"{where}: expected a whole number at least {low}, got {value!r}")
    return value


def _gang(value: object, where: str) -> Gang:
    data = _mapping(value, where, GANG_FIELDS)
    if "cardinality" not in data:
        raise WorkloadError(f"{where}.cardinality: is required")
    return Gang(
        _whole(data["cardinality"], f"{where}.cardinality"),
        _whole(data["minimum"], f"{where}.minimum") if "minimum" in data else None,
        str(data["uniformity_label"]) if "uniformity_label" in data else None,
        _whole(data["max_hops"], f"{where}.max_hops", 0) if "max_hops" in data else None,
    )


def _roles(value: object, where: str) -> tuple[RoleSpec, ...]:
    if not isinstance(value, list) or not value:
        raise WorkloadError(f"{where}: expected a non-empty list of roles")
    roles = []
    for i, item in enumerate(value):
        data = _mapping(item, f"{where}[{i}]", ROLE_FIELDS)
        if not data.get("name"):
            raise WorkloadError(f"{where}[{i}].name: is required")
        minimum = _whole(data.get("minimum", 1), f"{where}[{i}].minimum")
        maximum = data.get("maximum")
        if maximum is not None and _whole(maximum, f"{where}[{i}].maximum") < minimum:
            raise WorkloadError(f"{where}[{i}].maximum: must be at least the minimum {minimum}")
        roles.append(RoleSpec(str(data["name"]), minimum, maximum))
    return tuple(roles)


def _entry(value: object, i: int, first: int) -> list[Arrival]:
    """The arrivals of job entry `i`, named from `first` on."""
    where = f"jobs[{i}]"
    data = _mapping(value, where, JOB_FIELDS)
    for required in ("queue", "runtime"):
        if required not in data:
            raise WorkloadError(f"{where}.{required}: is required")
    count = _whole(data.get("count", 1), f"{where}.count")
    start = seconds(data.get("at", 0), f"{where}.at")
    every = seconds(data.get("every", 0), f"{where}.every")
    if "gang" in data and "roles" in data:
        raise WorkloadError(f"{where}: give gang or roles, not both")
    lifetime = data.get("lifetime")
    base = Arrival(
        name="",
        at=start,
        queue=str(data["queue"]),
        runtime=seconds(data["runtime"], f"{where}.runtime"),
        job_set=str(data.get("job_set", "simulated")),
        cpu=str(data.get("cpu", "1")),
        memory=str(data.get("memory", "1Gi")),
        gpus=_whole(data.get("gpus", 0), f"{where}.gpus", 0),
        priority_class=str(data["priority_class"]) if "priority_class" in data else None,
        lifetime=seconds(lifetime, f"{where}.lifetime") if lifetime is not None else None,
        gang=_gang(data["gang"], f"{where}.gang") if "gang" in data else None,
        roles=_roles(data["roles"], f"{where}.roles") if "roles" in data else (),
    )
    return [_named(base, f"job-{first + k}", start + k * every) for k in range(count)]


def _named(arrival: Arrival, name: str, at: float) -> Arrival:
    return Arrival(**{**arrival.__dict__, "name": name, "at": at})


def parse_workload(data: object, source: str = "") -> Workload:
    """A workload from the YAML document's content (see the module's docstring)."""
    top = _mapping(data, "workload", frozenset({"duration", "queues", "nodes", "jobs"}))
    queues_value = top.get("queues")
    if not isinstance(queues_value, list) or not queues_value:
        raise WorkloadError("queues: expected a non-empty list of {name, priority_factor}")
    queues = []
    for i, q in enumerate(queues_value):
        entry = _mapping(q, f"queues[{i}]", frozenset({"name", "priority_factor"}))
        if not entry.get("name"):
            raise WorkloadError(f"queues[{i}].name: is required")
        factor = entry.get("priority_factor", 1.0)
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 0:
            raise WorkloadError(f"queues[{i}].priority_factor: must be positive, got {factor!r}")
        queues.append(QueueSpec(str(entry["name"]), float(factor)))
    jobs_value = top.get("jobs")
    if not isinstance(jobs_value, list) or not jobs_value:
        raise WorkloadError("jobs: expected a non-empty list of job entries")
    arrivals: list[Arrival] = []
    for i, entry in enumerate(jobs_value):
        arrivals += _entry(entry, i, len(arrivals))
    try:
        nodes = node_groups(top["nodes"]) if "nodes" in top else ()
    except ConfigError as e:
        raise WorkloadError(str(e)) from None
    duration = top.get("duration")
    return Workload(
        tuple(queues),
        tuple(sorted(arrivals, key=lambda a: a.at)),
        nodes,
        seconds(duration, "duration") if duration is not None else None,
        source,
    )


def load_workload(path: Path) -> Workload:
    """The workload in a YAML file."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise WorkloadError(f"{path}: {e}") from None
    try:
        return parse_workload(data, str(path))
    except WorkloadError as e:
        raise WorkloadError(f"{path}: {e}") from None
