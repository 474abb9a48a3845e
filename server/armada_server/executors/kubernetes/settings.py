"""What an operator can tune about a Kubernetes executor."""

from __future__ import annotations

from dataclasses import dataclass, field

from armada_core.retry import ClassificationConfig


@dataclass(frozen=True)
class KubernetesSettings:
    """Defaults suit a production cluster; tests shorten the timings."""

    #: Where jobs that name no namespace run.
    default_namespace: str = "default"
    #: Confine the executor to one namespace: every pod goes there and only there is watched
    #: (a namespaced Role then suffices for pods). None: the job's namespace, cluster-wide.
    namespace: str | None = None
    #: A pod whose image cannot be pulled for this long fails (category `image-pull`).
    image_pull_timeout: float = 120.0
    #: A pod the cluster cannot schedule for this long is given back: the lease is returned.
    unschedulable_timeout: float = 120.0
    #: Finished pods are kept this long (for `kubectl logs` and `describe`), then deleted.
    finished_pod_retention: float = 60.0
    #: Nodes are re-listed this often (seconds).
    node_refresh_interval: float = 10.0
    #: Subtract what pods not run by this executor request from each node's allocatable.
    subtract_foreign_pods: bool = True
    #: Keep the job's priorityClassName on the pod: the cluster must then define
    #: PriorityClass objects named like the server's priority classes.
    use_priority_classes: bool = True
    #: Ingress hosts are `<port>-<pod>.<namespace>.<ingress_domain>`.
    ingress_domain: str = "armada.local"
    ingress_class: str | None = None
    #: Each watch request lasts at most this long before it is renewed (seconds).
    watch_timeout: int = 300
    #: How often timeouts and clean-ups are checked (seconds).
    tick: float = 1.0
    #: Threads for API calls (the `kubernetes` client is synchronous).
    api_threads: int = 8
    #: Operator-defined failure categories (armada_core.retry.load_classification).
    classification: ClassificationConfig = field(default_factory=ClassificationConfig)
    #: Where the logs of finished pods are kept after the pods are deleted (one file per
    #: container); None: in memory, lost when the executor stops.
    log_dir: str | None = None
    #: How many finished runs' logs are kept (the oldest are dropped first).
    log_retention: int = 1000
    #: At most this much of each container's log is kept (its end).
    log_max_bytes: int = 10 * 1024 * 1024
