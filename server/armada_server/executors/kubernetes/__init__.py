"""The Kubernetes executor: one per cluster, running leases as pods (see docs/kubernetes.md)."""

from armada_server.executors.kubernetes.api import load_api_client
from armada_server.executors.kubernetes.backend import KubernetesBackend
from armada_server.executors.kubernetes.settings import KubernetesSettings

__all__ = ["KubernetesBackend", "KubernetesSettings", "load_api_client"]
