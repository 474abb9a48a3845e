"""Server configuration: embedded defaults, a YAML file, and command-line overrides."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from armada_core.jobs import SubmissionConfig
from armada_core.jobs.podspec import QUALIFIED_NAME
from armada_core.retry import RetryConfigError, RetrySettings, settings_from_mapping
from armada_core.scheduling.model import SchedulingConfig, parse_quantity
from armada_core.scheduling.topology import HOSTNAME
from armada_server.auth import AuthConfig

EXECUTORS = ("local", "simulated", "kubernetes", "none")


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


@dataclass(frozen=True)
class SchedulingSettings:
    """The scheduler's options (`armada_core.scheduling.SchedulingConfig`, plus per-class caps).

    This is the part of the configuration that the server reloads while it runs: each cycle
    reads it afresh."""

    #: Queues at or below this fraction of their fair share keep their running jobs;
    #: None: every queue's preemptible jobs are evicted and re-placed each cycle.
    protected_fraction: float | None = 1.0
    #: Newly leased jobs per cycle (re-placed evicted jobs are exempt); None: no cap.
    max_jobs_per_cycle: int | None = None
    #: Per resource, the fraction of the cluster that new jobs may take in one cycle.
    max_fraction_per_cycle: Mapping[str, float] = field(default_factory=dict)
    #: Per priority class, per resource: the fraction of the cluster each queue may hold
    #: with jobs of that class.
    max_fraction_per_queue: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: Fair-share cost multiplier per resource (default 1).
    resource_multipliers: Mapping[str, float] = field(default_factory=dict)
    #: Seconds; queues carry their past usage, halved every this many seconds. None: off.
    usage_half_life: float | None = None
    #: Resource order for best fit (and fairness dimensions); None: cpu, memory,
    #: nvidia.com/gpu, ephemeral-storage, then the others by name.
    resource_names: tuple[str, ...] | None = None
    #: Queued jobs of each queue considered per cycle, in the queue's order; None: all.
    max_queue_lookback: int | None = None
    #: New jobs leased per second, all queues together (a token bucket); None: no limit.
    scheduling_rate: float | None = None
    #: The global bucket's size; None: the rate rounded up.
    scheduling_burst: int | None = None
    #: New jobs leased per second by each queue (one bucket per queue); None: no limit.
    queue_scheduling_rate: float | None = None
    #: Each queue's bucket size; None: the rate rounded up.
    queue_scheduling_burst: int | None = None
    #: Node labels naming the network's topology, widest first (e.g. topology/block,
    #: topology/rack; kubernetes.io/hostname may come last for the node itself). Gangs are
    #: placed in the narrowest domain that holds them, within their gangMaxHops. Empty: off.
    topology_levels: tuple[str, ...] = ()
    #: A queue's jobs of infinite lifetime (never preempted) may exceed its fair share by this
    #: fraction (0.2: 20% above it); None: no limit.
    non_preemptible_overshoot: float | None = None
    #: Resource-minutes each queue may run above its fair share with jobs of finite lifetime
    #: (lifetime x weighted requests, given back as they leave); None: no limit.
    excess_flow_budget: float | None = None
    #: What one unit of each resource (core, GiB, device) weighs in the budget, relative to
    #: one CPU core; cpu 1, every other resource 0 unless given.
    excess_flow_weights: Mapping[str, float] = field(default_factory=dict)

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
        names = values.get("resource_names")
        if names is not None:
            if not isinstance(names, list | tuple):
                raise ConfigError(
                    f"{key}.resource_names: must be a list of resource names, got {names!r}"
                )
            values["resource_names"] = tuple(names)
        levels = values.get("topology_levels")
        if levels is not None:
            if not isinstance(levels, list | tuple):
                raise ConfigError(
                    f"{key}.topology_levels: must be a list of node labels, "
                    f"widest first, got {levels!r}"
                )
            values["topology_levels"] = tuple(levels)
        else:
            values.pop("topology_levels", None)
        return cls(**values).check(key)

    def check(self, key: str = "scheduling") -> SchedulingSettings:
        """Every value in range (a ConfigError naming the key otherwise); returns self."""
        if self.protected_fraction is not None:
            _number(f"{key}.protected_fraction", self.protected_fraction)
        if self.max_jobs_per_cycle is not None and (
            isinstance(self.max_jobs_per_cycle, bool)
            or not isinstance(self.max_jobs_per_cycle, int)
            or self.max_jobs_per_cycle < 0
        ):
            raise ConfigError(
                f"{key}.max_jobs_per_cycle: must be a whole number at least 0, "
                f"got {self.max_jobs_per_cycle!r}"
            )
        for name in ("max_queue_lookback", "scheduling_burst", "queue_scheduling_burst"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{key}.{name}: must be a whole number at least 1, got {value!r}")
        for name in ("scheduling_rate", "queue_scheduling_rate"):
            if getattr(self, name) is not None:
                _number(f"{key}.{name}", getattr(self, name), low_open=True)
        _fractions(f"{key}.max_fraction_per_cycle", self.max_fraction_per_cycle)
        _fractions(f"{key}.resource_multipliers", self.resource_multipliers, high=None)
        caps = self.max_fraction_per_queue
        if not isinstance(caps, Mapping):
            raise ConfigError(
                f"{key}.max_fraction_per_queue: must map priority classes to "
                f"{{resource: fraction}}, got {caps!r}"
            )
        for name, limits in caps.items():
            _fractions(f"{key}.max_fraction_per_queue.{name}", limits)
        if self.usage_half_life is not None:
            _number(f"{key}.usage_half_life", self.usage_half_life, low_open=True)
        for name in ("non_preemptible_overshoot", "excess_flow_budget"):
            if getattr(self, name) is not None:
                _number(f"{key}.{name}", getattr(self, name))
        _fractions(f"{key}.excess_flow_weights", self.excess_flow_weights, high=None)
        if self.resource_names is not None:
            names = self.resource_names
            if not all(isinstance(n, str) and n for n in names):
                raise ConfigError(
                    f"{key}.resource_names: must be non-empty strings, got {list(names)!r}"
                )
            if len(set(names)) != len(names):
                raise ConfigError(
                    f"{key}.resource_names: names must be unique, got {list(names)!r}"
                )
        self._check_topology(key)
        return self

    def _check_topology(self, key: str) -> None:
        levels = self.topology_levels
        where = f"{key}.topology_levels"
        if not isinstance(levels, tuple):
            raise ConfigError(
                f"{where}: must be a list of node labels, widest first, got {levels!r}"
            )
        for level in levels:
            if not isinstance(level, str) or not level:
                raise ConfigError(
                    f"{where}: must be non-empty node label names, got {list(levels)!r}"
                )
            if not QUALIFIED_NAME.fullmatch(level):
                raise ConfigError(
                    f"{where}: {level!r} is not a valid node label name (an "
                    f"optional DNS prefix and '/', then a name of at most 63 "
                    f"letters, digits, '-', '_' and '.')"
                )
        if len(set(levels)) != len(levels):
            raise ConfigError(f"{where}: levels must be unique, got {list(levels)!r}")
        if HOSTNAME in levels[:-1]:
            raise ConfigError(
                f"{where}: {HOSTNAME} is the node itself, so it can only be the "
                f"last (narrowest) level, got {list(levels)!r}"
            )

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
        return SchedulingConfig(
            resource_names=self.resource_names,
            resource_multipliers=dict(self.resource_multipliers),
            protected_fraction=self.protected_fraction,
            max_jobs_per_cycle=self.max_jobs_per_cycle,
            max_fraction_per_cycle=dict(self.max_fraction_per_cycle),
            usage_half_life=self.usage_half_life,
            max_queue_lookback=self.max_queue_lookback,
            scheduling_rate=self.scheduling_rate,
            scheduling_burst=self.scheduling_burst,
            queue_scheduling_rate=self.queue_scheduling_rate,
            queue_scheduling_burst=self.queue_scheduling_burst,
            topology_levels=self.topology_levels,
            non_preemptible_overshoot=self.non_preemptible_overshoot,
            excess_flow_budget=self.excess_flow_budget,
            excess_flow_weights=dict(self.excess_flow_weights),
        )


DEFAULT_PRIORITY_CLASSES = (
    PriorityClassConfig("armada-default", 1000, preemptible=False),
    PriorityClassConfig("armada-preemptible", 1000, preemptible=True),
)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    http_port: int | None = 8080  # metrics (and later the web UI); None: no HTTP
    database_url: str | None = None  # None: SQLite in the user's data directory
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
