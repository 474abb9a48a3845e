"""Server configuration: embedded defaults, a YAML file, and command-line overrides."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from armada_core.jobs import SubmissionConfig
from armada_core.retry import RetryConfigError, RetrySettings, settings_from_mapping
from armada_core.scheduling.model import parse_quantity
from armada_server.auth import AuthConfig

EXECUTORS = ("local", "simulated", "kubernetes", "none")


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names it."""


@dataclass(frozen=True)
class PriorityClassConfig:
    name: str
    priority: int
    preemptible: bool = False


@dataclass(frozen=True)
class TaintConfig:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


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
    def from_mapping(cls, data: Mapping[str, Any]) -> NodeGroup:
        return cls(int(data["count"]), str(data["cpu"]), str(data["memory"]),
                   int(data.get("gpus", 0)), dict(data.get("labels", {})),
                   tuple(TaintConfig(**t) for t in data.get("taints", ())))


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
            raise ConfigError(f"executor: {self.executor!r} is not one of "
                              f"{', '.join(EXECUTORS)}")
        for name in ("scheduling_period", "executor_sync_interval", "lease_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: must be positive")
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
            raise ConfigError(f"auth.oidc.jwks_file: {self.auth.oidc.jwks_file!r} does not "
                              "exist")
        if self.default_priority_class not in names:
            raise ConfigError(f"default_priority_class: {self.default_priority_class!r} is "
                              f"not one of the priority classes ({', '.join(names)})")
        return self


_NODES = re.compile(r"^(\d+)x([0-9.]+m?)x([0-9.]+[A-Za-z]*)(?:x(\d+))?$")


def parse_nodes(text: str) -> NodeGroup:
    """`COUNTxCPUxMEMORY[xGPUS]`, e.g. `2x4x8Gi` or `1x8x64Gix2`."""
    match = _NODES.match(text)
    if not match:
        raise ConfigError(f"--nodes {text!r}: expected COUNTxCPUxMEMORY[xGPUS], e.g. 2x4x8Gi")
    count, cpu, memory, gpus = match.groups()
    try:
        parse_quantity(cpu, milli=True)
        parse_quantity(memory)
    except ValueError as e:
        raise ConfigError(f"--nodes {text!r}: {e}") from None
    if int(count) < 1:
        raise ConfigError(f"--nodes {text!r}: the count must be at least 1")
    return NodeGroup(int(count), cpu, memory, int(gpus or 0))


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
                value = tuple(parse_nodes(v) if isinstance(v, str) else NodeGroup.from_mapping(v)
                              for v in value)
            except (KeyError, TypeError, ValueError) as e:
                raise ConfigError(f"{path}: nodes: {e}") from None
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
        elif name == "priority_classes":
            value = tuple(parse_priority_class(v) if isinstance(v, str)
                          else PriorityClassConfig(**v) for v in value)
        values[name] = value
    return values


def build(file: Path | None = None, **overrides: Any) -> ServerConfig:
    """Defaults, then the file, then explicit overrides (None means not given)."""
    config = ServerConfig()
    if file is not None:
        config = replace(config, **load_file(file))
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(config, **given).validate()
