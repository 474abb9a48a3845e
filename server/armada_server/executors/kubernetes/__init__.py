"""The Kubernetes executor: one per cluster, running leases as pods (see docs/kubernetes.md)."""

from armada_server.executors.kubernetes.backend import KubernetesBackend
from armada_server.executors.kubernetes.settings import KubernetesSettings, load_api_client

__all__ = ["KubernetesBackend", "KubernetesSettings", "load_api_client"]
