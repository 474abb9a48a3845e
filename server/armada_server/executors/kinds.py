"""The kinds of executor, registered once: everything that names a kind looks it up here.

The server runs an executor of a kind in its own process (`armada-server --executor NAME`,
when the kind allows it), the `armada-executor --kind NAME` command runs one against a remote
server, submission checks what the server's own executor can honour before its first sync,
and both commands offer the kinds by name. Each entry says how to build the backend, what it
can do (its capabilities), whether its nodes are virtual ones from node groups, and which
options of its own `armada-executor` takes for it.

Adding a kind: write its backend (a `Backend`, executors/backend.py), state its capabilities
(executors/capabilities.py) and add an entry below. Backends are imported when built, so that
naming a kind costs nothing and the Kubernetes client stays an optional dependency.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from armada_server.executors import capabilities
from armada_server.executors.capabilities import Capabilities

if TYPE_CHECKING:
    from armada_server.config import NodeGroup
    from armada_server.executors.backend import Backend

#: `armada-server --executor none`: the server runs no executor of its own.
NO_EXECUTOR = "none"


@dataclass(frozen=True)
class ExecutorSetup:
    """What building a backend takes, from the server's settings or the command's options.

    `node_groups` are the virtual nodes of the kinds that have them; `sandbox_dir` is where
    the local executor keeps its pods; `options` are the command's parsed options, of which
    a kind reads those it added (`ExecutorKind.add_options`)."""

    executor_id: str
    node_groups: Sequence[NodeGroup] = ()
    sandbox_dir: Path = Path("armada-pods")
    options: argparse.Namespace = field(default_factory=argparse.Namespace)


def _no_options(parser: argparse.ArgumentParser) -> None:
    """A kind with no options of its own."""


@dataclass(frozen=True)
class ExecutorKind:
    """One kind of executor. `in_server`: the server can run it in its own process (every
    kind runs as `armada-executor`). `virtual_nodes`: its nodes come from node groups
    (`--nodes`); otherwise it reads them from its cluster. `sandbox`: it keeps its pods'
    files in `ExecutorSetup.sandbox_dir`."""

    name: str
    capabilities: Capabilities
    in_server: bool
    virtual_nodes: bool
    build: Callable[[ExecutorSetup], Backend]
    add_options: Callable[[argparse.ArgumentParser], None] = _no_options
    sandbox: bool = False


def _local(setup: ExecutorSetup) -> Backend:
    from armada_server.executors.local_backend import LocalBackend
    from armada_server.executors.nodes import virtual_nodes

    nodes = virtual_nodes(setup.node_groups, setup.executor_id)
    return LocalBackend(nodes, setup.sandbox_dir, owner=setup.executor_id)


def _simulated(setup: ExecutorSetup) -> Backend:
    from armada_server.executors.nodes import virtual_nodes
    from armada_server.executors.simulated import SimulatedBackend

    return SimulatedBackend(virtual_nodes(setup.node_groups, setup.executor_id))


def _kubernetes(setup: ExecutorSetup) -> Backend:
    """A ConfigError when the cluster cannot be reached or the id is no label value."""
    from armada_server.config import ConfigError
    from armada_server.executors.kubernetes import (
        KubernetesBackend,
        KubernetesSettings,
        load_api_client,
    )
    from armada_server.executors.kubernetes.api import ConfigException

    options = setup.options
    try:
        api = load_api_client(
            options.kubeconfig, context=options.context, in_cluster=options.in_cluster
        )
    except (ConfigException, OSError) as e:
        raise ConfigError(f"cannot reach the Kubernetes cluster: {e}") from None
    settings = KubernetesSettings(
        namespace=options.namespace,
        default_namespace=options.default_namespace,
        ingress_domain=options.ingress_domain,
        log_dir=str(options.log_dir) if options.log_dir else None,
        log_retention=options.log_retention,
    )
    try:
        return KubernetesBackend(api, setup.executor_id, settings)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _kubernetes_options(parser: argparse.ArgumentParser) -> None:
    k8s = parser.add_argument_group("kubernetes", "the cluster of a --kind kubernetes executor")
    k8s.add_argument(
        "--in-cluster",
        action="store_true",
        help="use the pod's service account (when running inside the cluster)",
    )
    k8s.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    k8s.add_argument("--context", help="kubeconfig context (default: the current one)")
    k8s.add_argument(
        "--namespace",
        help="confine the executor to this namespace (default: "
        "each job's own namespace, cluster-wide)",
    )
    k8s.add_argument(
        "--default-namespace", default="default", help="namespace of jobs that name none"
    )
    k8s.add_argument(
        "--ingress-domain",
        default="armada.local",
        help="ingress hosts are <port>-<pod>.<namespace>.<domain>",
    )
    k8s.add_argument(
        "--log-dir",
        type=Path,
        help="keep finished pods' logs in this directory (default: in memory)",
    )
    k8s.add_argument(
        "--log-retention",
        type=int,
        default=1000,
        metavar="RUNS",
        help="finished runs whose logs are kept after their pods are deleted "
        "(oldest dropped first; default 1000)",
    )


#: Every kind, by name, in the order the commands list them.
EXECUTOR_KINDS: Mapping[str, ExecutorKind] = {
    kind.name: kind
    for kind in (
        ExecutorKind(
            "local",
            capabilities.LOCAL,
            in_server=True,
            virtual_nodes=True,
            build=_local,
            sandbox=True,
        ),
        ExecutorKind(
            "simulated",
            capabilities.SIMULATED,
            in_server=True,
            virtual_nodes=True,
            build=_simulated,
        ),
        ExecutorKind(
            "kubernetes",
            capabilities.KUBERNETES,
            in_server=False,
            virtual_nodes=False,
            build=_kubernetes,
            add_options=_kubernetes_options,
        ),
    )
}


def server_kinds() -> list[ExecutorKind]:
    """The kinds the server can run in its own process."""
    return [kind for kind in EXECUTOR_KINDS.values() if kind.in_server]


def server_kind(name: str) -> ExecutorKind | None:
    """The kind of the server's own executor for `--executor NAME`; None when the server
    runs none of its own (`none`, or a kind that runs only as `armada-executor`)."""
    kind = EXECUTOR_KINDS.get(name)
    return kind if kind is not None and kind.in_server else None
