"""Server configuration: embedded defaults, a YAML file, and command-line overrides."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from armada_core.client.connection import MAX_MESSAGE_BYTES
from armada_core.jobs import SubmissionConfig
from armada_core.jobs.podspec import QUALIFIED_NAME
from armada_core.retry import RetryConfigError, RetrySettings, settings_from_mapping
from armada_core.scheduling.model import SchedulingConfig, parse_quantity
from armada_core.scheduling.topology import HOSTNAME
from armada_server.auth import AuthConfig
from armada_server.executors.kinds import EXECUTOR_KINDS, NO_EXECUTOR
from armada_server.retention_period import retention_seconds

EXECUTORS = (*EXECUTOR_KINDS, NO_EXECUTOR)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names it."""


@dataclass(frozen=True)
class PriorityClassConfig:
    name: str
    priority: int
    preemptible: bool = False


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NODE_GROUP_FIELDS = ("count", "cpu", "memory", "gpus", "labels", "taints")
TAINT_FIELDS = ("key", "value", "effect")


def _at(key: str, name: str) -> str:
    """The dotted path of field `name` under `key` (`key` may be empty: the field alone)."""
    return f"{key}.{name}" if key else name


def _known_fields(data: Mapping[Any, Any], known: tuple[str, ...], key: str) -> None:
    for name in data:
        if name not in known:
            raise ConfigError(f"{_at(key, str(name))}: unknown field (known: {', '.join(known)})")


@dataclass(frozen=True)
class TaintConfig:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    @classmethod
    def from_mapping(cls, data: object, key: str) -> TaintConfig:
        """`{key: K, value: V, effect: E}` (value optional, effect default NoSchedule);
        errors name `key` (e.g. `nodes[0].taints[1]`) and the field."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{key}: must be a mapping with key, value and effect, got {data!r}")
        _known_fields(data, TAINT_FIELDS, key)
        name = data.get("key")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{_at(key, 'key')}: must be a non-empty string, got {name!r}")
        value = data.get("value")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ConfigError(f"{_at(key, 'value')}: must be a string (quote it), got {value!r}")
        effect = data.get("effect", "NoSchedule")
        if effect not in TAINT_EFFECTS:
            raise ConfigError(
                f"{_at(key, 'effect')}: must be one of {', '.join(TAINT_EFFECTS)}, got {effect!r}"
            )
        return cls(name, value, effect)


@dataclass(frozen=True)
class NodeGroup:
    """`count` identical virtual nodes for the local and simulated executors."""

    count: int
    cpu: str
    memory: str
    gpus: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[TaintConfig, ...] = ()

    @classmethod
    def from_mapping(cls, data: object, key: str = "nodes") -> NodeGroup:
        """`{count, cpu, memory[, gpus][, labels][, taints]}`, checked; a ConfigError names
        the field under `key` (e.g. `nodes[1].count`; with an empty `key`, the field alone)."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"{key + ': ' if key else ''}must be a mapping with count, cpu "
                f"and memory (and optionally gpus, labels, taints), got {data!r}"
            )
        _known_fields(data, NODE_GROUP_FIELDS, key)
        if "count" not in data:
            raise ConfigError(f"{_at(key, 'count')}: is required (how many nodes)")
        count = data["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(
                f"{_at(key, 'count')}: must be a whole number at least 1, got {count!r}"
            )
        cpu = _node_quantity(data, "cpu", key, milli=True)
        memory = _node_quantity(data, "memory", key, milli=False)
        gpus = data.get("gpus", 0)
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
            raise ConfigError(
                f"{_at(key, 'gpus')}: must be a whole number at least 0, got {gpus!r}"
            )
        labels = data.get("labels")
        if labels is None:
            labels = {}
        if not isinstance(labels, Mapping):
            raise ConfigError(
                f"{_at(key, 'labels')}: must be a mapping of label names to values, got {labels!r}"
            )
        for name, value in labels.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(
                    f"{_at(key, 'labels')}: label names must be non-empty strings, got {name!r}"
                )
            if not isinstance(value, str):
                raise ConfigError(
                    f"{_at(key, 'labels.' + name)}: must be a string (quote it), got {value!r}"
                )
        taints = data.get("taints")
        if taints is None:
            taints = []
        if not isinstance(taints, list | tuple):
            raise ConfigError(
                f"{_at(key, 'taints')}: must be a list of {{key, value, "
                f"effect}} mappings, got {taints!r}"
            )
        return cls(
            count,
            cpu,
            memory,
            gpus,
            dict(labels),
            tuple(
                TaintConfig.from_mapping(t, _at(key, f"taints[{i}]")) for i, t in enumerate(taints)
            ),
        )


def _node_quantity(data: Mapping[Any, Any], name: str, key: str, *, milli: bool) -> str:
    """A node group's cpu or memory: a valid quantity, kept as text."""
    example = "4 or 500m" if milli else "8Gi"
    if name not in data:
        raise ConfigError(f"{_at(key, name)}: is required (a quantity such as {example})")
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{_at(key, name)}: must be a quantity such as {example}, got {value!r}")
    try:
        parse_quantity(value, milli=milli)
    except ValueError as e:
        raise ConfigError(f"{_at(key, name)}: {e}") from None
    return str(value)


def _number(
    key: str, value: object, *, low: float = 0.0, high: float | None = None, low_open: bool = False
) -> float:
    """A finite number in range, or a ConfigError naming `key` and the value given."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key}: must be a number, got {value!r}")
    if high is not None and not low <= value <= high:
        raise ConfigError(f"{key}: must be between {low:g} and {high:g}, got {value!r}")
    if value < low or (low_open and value == low):
        raise ConfigError(
            f"{key}: must be {'above' if low_open else 'at least'} {low:g}, got {value!r}"
        )
    return float(value)


def _fractions(key: str, value: object, *, high: float | None = 1.0) -> dict[str, float]:
    """`{resource: number}`, each in range."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: must be a mapping of resource names to numbers, got {value!r}")
    out = {}
    for name, number in value.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{key}: resource names must be non-empty strings, got {name!r}")
        out[name] = _number(f"{key}.{name}", number, high=high)
    return out


# --- the scheduling: block ------------------------------------------------------------------

#: A check of one option's value: raises a ConfigError naming `key` (`scheduling.NAME`).
ValueCheck = Callable[[str, Any], object]


def _optional(check: ValueCheck) -> ValueCheck:
    """`check`, for an option that null turns off."""

    def checked(key: str, value: object) -> None:
        if value is not None:
            check(key, value)

    return checked


def _whole(low: int) -> ValueCheck:
    def check(key: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{key}: must be a whole number at least {low}, got {value!r}")

    return check


def _boolean(key: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: must be true or false, got {value!r}")


def _class_caps(key: str, caps: object) -> None:
    if not isinstance(caps, Mapping):
        raise ConfigError(
            f"{key}: must map priority classes to {{resource: fraction}}, got {caps!r}"
        )
    for name, limits in caps.items():
        _fractions(f"{key}.{name}", limits)


def _resource_names(key: str, names: Sequence[str]) -> None:
    if not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"{key}: must be non-empty strings, got {list(names)!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: names must be unique, got {list(names)!r}")


def _topology_levels(key: str, levels: object) -> None:
    if not isinstance(levels, tuple):
        raise ConfigError(f"{key}: must be a list of node labels, widest first, got {levels!r}")
    for level in levels:
        if not isinstance(level, str) or not level:
            raise ConfigError(f"{key}: must be non-empty node label names, got {list(levels)!r}")
        if not QUALIFIED_NAME.fullmatch(level):
            raise ConfigError(
                f"{key}: {level!r} is not a valid node label name (an "
                f"optional DNS prefix and '/', then a name of at most 63 "
                f"letters, digits, '-', '_' and '.')"
            )
    if len(set(levels)) != len(levels):
        raise ConfigError(f"{key}: levels must be unique, got {list(levels)!r}")
    if HOSTNAME in levels[:-1]:
        raise ConfigError(
            f"{key}: {HOSTNAME} is the node itself, so it can only be the "
            f"last (narrowest) level, got {list(levels)!r}"
        )


#: The options the file gives as lists (kept as tuples), with what the list holds; null in the
#: file is the option's default.
_LISTS = {"resource_names": "resource names", "topology_levels": "node labels, widest first"}


@dataclass(frozen=True, slots=True)
class SchedulingSettings(SchedulingConfig):
    """The `scheduling:` block: every option of `armada_core.scheduling.SchedulingConfig`,
    which declares and documents them (the YAML keys are its field names; docs/configuration.md
    is generated from them), plus the per-class caps, which reach the scheduler on the priority
    classes instead. A new option is a field of SchedulingConfig and its entry in
    `VALUE_CHECKS`.

    This is the part of the configuration that the server reloads while it runs: each cycle
    reads it afresh."""

    max_fraction_per_queue: Mapping[str, Mapping[str, float]] = field(
        default_factory=dict,
        metadata={
            "doc": "Per priority class and resource: the fraction of the cluster that each "
            "queue may hold with running jobs of that class, each between 0 and 1. Keys are "
            "configured priority classes. Empty: no cap."
        },
    )

    @classmethod
    def from_mapping(cls, data: object, key: str = "scheduling") -> SchedulingSettings:
        """Parse and check the `scheduling:` block; errors name the offending key."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{key}: must be a mapping, got {data!r}")
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            attr = str(name).replace("-", "_")
            if attr not in known:
                raise ConfigError(
                    f"{key}.{name}: unknown setting (known: {', '.join(sorted(known))})"
                )
            values[attr] = value
        for name, what in _LISTS.items():
            items = values.pop(name, None)
            if items is None:
                continue
            if not isinstance(items, list | tuple):
                raise ConfigError(f"{key}.{name}: must be a list of {what}, got {items!r}")
            values[name] = tuple(items)
        return cls(**values).check(key)

    def check(self, key: str = "scheduling") -> SchedulingSettings:
        """Every value in range (a ConfigError naming the key otherwise); returns self."""
        for name, check in VALUE_CHECKS.items():
            check(f"{key}.{name}", getattr(self, name))
        return self

    def check_classes(self, classes: tuple[str, ...], key: str = "scheduling") -> None:
        """Caps name only configured priority classes."""
        for name in self.max_fraction_per_queue:
            if name not in classes:
                raise ConfigError(
                    f"{key}.max_fraction_per_queue.{name}: {name!r} is not one "
                    f"of the priority classes ({', '.join(classes)})"
                )

    def model(self) -> SchedulingConfig:
        """The scheduler's own configuration (class caps travel on the priority classes)."""
        values: dict[str, Any] = {}
        for option in fields(SchedulingConfig):
            value = getattr(self, option.name)
            values[option.name] = dict(value) if isinstance(value, Mapping) else value
        return SchedulingConfig(**values)


#: Every option's value check, in the order they run (the first error is the one reported).
#: Each field of SchedulingSettings has one (tests/server/test_configuration_docs.py).
VALUE_CHECKS: dict[str, ValueCheck] = {
    "protected_fraction": _optional(_number),
    "max_jobs_per_cycle": _optional(_whole(0)),
    "max_queue_lookback": _optional(_whole(1)),
    "scheduling_burst": _optional(_whole(1)),
    "queue_scheduling_burst": _optional(_whole(1)),
    "scheduling_rate": _optional(partial(_number, low_open=True)),
    "queue_scheduling_rate": _optional(partial(_number, low_open=True)),
    "max_fraction_per_cycle": _fractions,
    "resource_multipliers": partial(_fractions, high=None),
    "max_fraction_per_queue": _class_caps,
    "usage_half_life": _optional(partial(_number, low_open=True)),
    "non_preemptible_overshoot": _optional(_number),
    "excess_flow_budget": _optional(_number),
    "excess_flow_weights": partial(_fractions, high=None),
    "lifetime_limits_count_all_queues": _boolean,
    "resource_names": _optional(_resource_names),
    "topology_levels": _topology_levels,
}


DEFAULT_PRIORITY_CLASSES = (
    PriorityClassConfig("armada-default", 1000, preemptible=False),
    PriorityClassConfig("armada-preemptible", 1000, preemptible=True),
)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    http_port: int | None = 8080  # web UI, REST gateway and metrics; None: no HTTP
    database_url: str | None = None  # None: SQLite in the data directory
    # Where the default database and pods live; None: $XDG_DATA_HOME/armada-server.
    data_dir: str | None = None
    executor: str = "local"
    nodes: tuple[NodeGroup, ...] = ()
    priority_classes: tuple[PriorityClassConfig, ...] = DEFAULT_PRIORITY_CLASSES
    default_priority_class: str = "armada-default"
    scheduling_period: float = 1.0
    # Executors sync this often; a run whose executor has not synced for lease_timeout
    # seconds has lost its lease.
    executor_sync_interval: float = 1.0
    lease_timeout: float = 15.0
    retry: RetrySettings = field(default_factory=lambda: RetrySettings(enabled=True))
    # The in-process executor's id, pool, and (local executor) where pods' files live;
    # None: beside the default database, in the user's data directory.
    executor_id: str = "local"
    pool: str = "default"
    sandbox_dir: str | None = None
    max_grace_period_seconds: int = 300
    default_active_deadline_seconds: int | None = 7 * 24 * 3600
    # Idle watch streams of clients that ask for heartbeats get one this often (seconds).
    heartbeat_seconds: float = 30.0
    auth: AuthConfig = field(default_factory=AuthConfig)
    tls_cert: str | None = None  # PEM files; both given: the gRPC port speaks TLS only
    tls_key: str | None = None
    # The scheduler's options; the only part reloaded from the file while the server runs.
    scheduling: SchedulingSettings = field(default_factory=SchedulingSettings)
    # Seconds between checks of the config file for changes; None: only on SIGHUP.
    config_reload_interval: float | None = 5.0
    # Accept jobs that fit no node the executors report, even an empty one (refused by
    # default, as upstream does): for clusters that add nodes when jobs wait.
    accept_jobs_that_fit_no_node: bool = False
    # Submission limits (docs/configuration.md, "Submission limits"), each refused with
    # RESOURCE_EXHAUSTED naming it: jobs waiting to be scheduled (submitted or queued) per
    # queue, and the items and serialised bytes of one SubmitJobs request. None: no limit.
    max_queued_jobs_per_queue: int | None = 1_000_000
    max_request_items: int | None = 100_000
    max_request_bytes: int | None = 64 * 1024 * 1024
    # Scheduling cycles the reports keep (docs/reports.md): older cycles, and the reasons
    # jobs waited for in them, are deleted by the leader as it goes. 0: no reports are kept.
    report_cycles: int = 100
    # Jobs that ended this long ago are deleted with their runs and events (docs/server.md,
    # "Retention"): seconds, or a number with a unit (s, m, h, d, w); 0 or "forever" keeps
    # everything. Pruned prune_batch jobs per transaction, prune_pause seconds apart.
    retention: str | float = "7d"
    prune_batch: int = 200
    prune_pause: float = 0.2

    def submission(self) -> SubmissionConfig:
        return SubmissionConfig(
            priority_classes=frozenset(p.name for p in self.priority_classes),
            default_priority_class=self.default_priority_class,
            max_grace_period_seconds=self.max_grace_period_seconds,
            default_active_deadline_seconds=self.default_active_deadline_seconds,
        )

    def validate(self) -> ServerConfig:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port: {self.port} is not a TCP port")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"executor: {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        for name in ("scheduling_period", "executor_sync_interval", "lease_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: must be positive")
        if self.config_reload_interval is not None:
            _number("config_reload_interval", self.config_reload_interval, low_open=True)
        if not isinstance(self.accept_jobs_that_fit_no_node, bool):
            raise ConfigError(
                "accept_jobs_that_fit_no_node: must be true or false, got "
                f"{self.accept_jobs_that_fit_no_node!r}"
            )
        if isinstance(self.report_cycles, bool) or not isinstance(self.report_cycles, int):
            raise ConfigError(f"report_cycles: must be a whole number, got {self.report_cycles!r}")
        if self.report_cycles < 0:
            raise ConfigError(f"report_cycles: must be at least 0, got {self.report_cycles}")
        _check_retention_of(self)
        _check_submission_limits_of(self)
        names = [p.name for p in self.priority_classes]
        if not names:
            raise ConfigError("priority_classes: at least one is needed")
        if len(set(names)) != len(names):
            raise ConfigError("priority_classes: names must be unique")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("tls_cert and tls_key: give both or neither")
        for path in (self.tls_cert, self.tls_key):
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"TLS file {path!r} does not exist")
        if self.auth.oidc is not None and not Path(self.auth.oidc.jwks_file).is_file():
            raise ConfigError(f"auth.oidc.jwks_file: {self.auth.oidc.jwks_file!r} does not exist")
        if self.default_priority_class not in names:
            raise ConfigError(
                f"default_priority_class: {self.default_priority_class!r} is "
                f"not one of the priority classes ({', '.join(names)})"
            )
        self.scheduling.check()
        self.scheduling.check_classes(tuple(names))
        return self


_NODES = re.compile(r"^(\d+)x([0-9.]+m?)x([0-9.]+[A-Za-z]*)(?:x(\d+))?$")


def _check_submission_limits_of(config: ServerConfig) -> None:
    for name in ("max_queued_jobs_per_queue", "max_request_items", "max_request_bytes"):
        value = getattr(config, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: must be a whole number or null, got {value!r}")
        if value < 1:
            raise ConfigError(f"{name}: must be at least 1 (null: no limit), got {value}")
    if config.max_request_bytes is not None and config.max_request_bytes > MAX_MESSAGE_BYTES:
        raise ConfigError(
            f"max_request_bytes: must be at most {MAX_MESSAGE_BYTES} (the largest message "
            f"the gRPC port takes), got {config.max_request_bytes}"
        )


def _check_retention_of(config: ServerConfig) -> None:
    try:
        retention_seconds(config.retention)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if isinstance(config.prune_batch, bool) or not isinstance(config.prune_batch, int):
        raise ConfigError(f"prune_batch: must be a whole number, got {config.prune_batch!r}")
    if config.prune_batch < 1:
        raise ConfigError(f"prune_batch: must be at least 1, got {config.prune_batch}")
    _number("prune_pause", config.prune_pause)


def parse_nodes(text: str, key: str = "--nodes") -> NodeGroup:
    """A node group from text: `COUNTxCPUxMEMORY[xGPUS]`, e.g. `2x4x8Gi` or `1x8x64Gix2`; or
    the mapping form of the config file as a YAML flow mapping, e.g. `{count: 2, cpu: "16",
    memory: 64Gi, labels: {topology/rack: r1}, taints: [{key: gpu, effect: NoSchedule}]}`.
    Errors name `key` and the text."""
    where = f"{key} {text!r}"
    if text.lstrip().startswith("{"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).replace("\n", " ")
            mark = getattr(e, "problem_mark", None)
            at = f" at character {mark.column + 1}" if mark is not None else ""
            raise ConfigError(f"{where}: not a valid YAML mapping: {problem}{at}") from None
        try:
            return NodeGroup.from_mapping(data, "")
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
    match = _NODES.match(text)
    if not match:
        raise ConfigError(
            f"{where}: expected COUNTxCPUxMEMORY[xGPUS], e.g. 2x4x8Gi, or a "
            f'mapping, e.g. \'{{count: 2, cpu: "4", memory: 8Gi, '
            f"labels: {{rack: r1}}}}'"
        )
    count, cpu, memory, gpus = match.groups()
    try:
        parse_quantity(cpu, milli=True)
        parse_quantity(memory)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    if int(count) < 1:
        raise ConfigError(f"{where}: the count must be at least 1")
    return NodeGroup(int(count), cpu, memory, int(gpus or 0))


def node_groups(value: object, key: str = "nodes") -> tuple[NodeGroup, ...]:
    """The config file's `nodes:` list: each entry a mapping or text (`parse_nodes`)."""
    if not isinstance(value, list | tuple):
        raise ConfigError(
            f"{key}: must be a list of node groups "
            f"(COUNTxCPUxMEMORY[xGPUS] or mappings), got {value!r}"
        )
    return tuple(
        parse_nodes(v, f"{key}[{i}]")
        if isinstance(v, str)
        else NodeGroup.from_mapping(v, f"{key}[{i}]")
        for i, v in enumerate(value)
    )


def parse_priority_class(text: str) -> PriorityClassConfig:
    """`NAME=PRIORITY[:preemptible]`."""
    match = re.match(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)=(-?\d+)(:preemptible)?$", text)
    if not match:
        raise ConfigError(f"--priority-class {text!r}: expected NAME=PRIORITY[:preemptible]")
    name, priority, preemptible = match.groups()
    return PriorityClassConfig(name, int(priority), preemptible is not None)


def load_file(path: Path) -> dict[str, Any]:
    """Read a YAML config file into ServerConfig field values."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    known = {f.name for f in fields(ServerConfig)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in known:
            raise ConfigError(f"{path}: unknown setting {key!r}")
        if name == "nodes":
            try:
                value = node_groups(value)
            except ConfigError as e:
                raise ConfigError(f"{path}: {e}") from None
        elif name == "auth":
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: auth must be a mapping")
            try:
                value = AuthConfig.from_mapping(value)
            except (KeyError, TypeError) as e:
                raise ConfigError(f"{path}: auth: missing or unexpected setting {e}") from None
        elif name == "retry":
            try:
                value = settings_from_mapping(value, "retry")
            except RetryConfigError as e:
                raise ConfigError(f"{path}: {e}") from None
        elif name == "scheduling":
            try:
                value = SchedulingSettings.from_mapping(value)
            except ConfigError as e:
                raise ConfigError(f"{path}: {e}") from None
            except TypeError as e:
                raise ConfigError(f"{path}: scheduling: {e}") from None
        elif name == "priority_classes":
            value = tuple(
                parse_priority_class(v) if isinstance(v, str) else PriorityClassConfig(**v)
                for v in value
            )
        values[name] = value
    return values


def reload_scheduling(
    path: Path, current: ServerConfig, before: Mapping[str, Any] | None = None
) -> tuple[SchedulingSettings, list[str]]:
    """The `scheduling:` block of `path`, checked as at start-up (the whole file must be
    valid) and against the running priority classes; and the other settings that differ
    from `before` (the file's values at start), which only a restart applies."""
    values = load_file(path)
    settings = values.get("scheduling", SchedulingSettings())
    try:
        settings.check_classes(tuple(p.name for p in current.priority_classes))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    before = {} if before is None else before
    changed = sorted(
        k
        for k in values.keys() | before.keys()
        if k != "scheduling" and values.get(k) != before.get(k)
    )
    return settings, changed


def build(file: Path | None = None, **overrides: Any) -> ServerConfig:
    """Defaults, then the file, then explicit overrides (None means not given)."""
    config = ServerConfig()
    if file is not None:
        config = replace(config, **load_file(file))
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(config, **given).validate()
