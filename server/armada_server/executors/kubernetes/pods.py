"""The pod a lease becomes: the job's PodSpec, pinned to the leased node and labelled.

The server has already validated and defaulted the spec (restartPolicy Never, grace period,
deadline); here it is translated to Kubernetes JSON, pinned with a node selector on the node's
hostname label (so kube-scheduler still checks resources, taints and affinity), and marked with
the labels the executor finds its pods by. The grace period is the one the executor deletes the
pod with (armada_core.jobs.grace), so that the pod and its deletion agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from armada_core.api import executor_pb2
from armada_core.jobs.grace import grace_period_seconds
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.convert import to_kubernetes
from armada_server.executors.kubernetes.settings import KubernetesSettings


def namespace_of(lease: executor_pb2.Lease, settings: KubernetesSettings) -> str:
    return settings.namespace or lease.job.namespace or settings.default_namespace


def run_labels(lease: executor_pb2.Lease, executor_id: str) -> dict[str, str]:
    """The labels on everything created for the run."""
    job = lease.job
    out = {lb.JOB_ID: job.id, lb.RUN_ID: lease.run_id, lb.EXECUTOR: executor_id}
    if lb.is_label_value(job.queue):
        out[lb.QUEUE] = job.queue
    if lb.is_label_value(job.job_set_id):
        out[lb.JOB_SET] = job.job_set_id
    return out


def run_annotations(lease: executor_pb2.Lease) -> dict[str, str]:
    job = lease.job
    return {**job.annotations, lb.JOB_SET_ANNOTATION: job.job_set_id, lb.LEASED_NODE: lease.node}


def pod_manifest(
    lease: executor_pb2.Lease,
    executor_id: str,
    settings: KubernetesSettings,
    node_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Pod to create for a lease. `node_labels` are the leased node's labels, for its
    hostname label (which may differ from the node's name); the name is the fallback."""
    job = lease.job
    spec = to_kubernetes(job.pod_specs[0])
    spec["restartPolicy"] = "Never"
    spec["terminationGracePeriodSeconds"] = grace_period_seconds(job.pod_specs[0])
    hostname = (node_labels or {}).get(lb.HOSTNAME, lease.node)
    spec["nodeSelector"] = {**spec.get("nodeSelector", {}), lb.HOSTNAME: hostname}
    if not settings.use_priority_classes:
        spec.pop("priorityClassName", None)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": lease.pod_name,
            "namespace": namespace_of(lease, settings),
            "labels": {**job.labels, **run_labels(lease, executor_id)},
            "annotations": run_annotations(lease),
        },
        "spec": spec,
    }
