"""A job's services and ingresses (seed 002's auxiliary objects), and its ingress addresses.

`services` become Services selecting the run's pod: NodePort, or headless. Each `ingress`
becomes a Service (a ClusterIP one with `use_clusterIP`, otherwise headless) plus an Ingress
with one host per port, `<port>-<pod>.<namespace>.<domain>`, optionally with TLS. All of them
carry the run's labels (so they can be found and deleted with the run) and an owner reference
to the pod (so Kubernetes' garbage collector removes them should the executor not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from armada_core.api import executor_pb2, submit_pb2
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.pods import namespace_of, run_annotations, run_labels
from armada_server.executors.kubernetes.settings import KubernetesSettings


@dataclass(frozen=True)
class Exposure:
    services: list[dict[str, Any]] = field(default_factory=list)
    ingresses: list[dict[str, Any]] = field(default_factory=list)
    #: What upstream Armada reports as `ingress_info`: port -> address.
    addresses: dict[int, str] = field(default_factory=dict)


def _metadata(
    name: str,
    lease: executor_pb2.Lease,
    executor_id: str,
    settings: KubernetesSettings,
    owner_uid: str,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace_of(lease, settings),
        "labels": {**lease.job.labels, **run_labels(lease, executor_id), lb.AUXILIARY: "true"},
        "annotations": {**run_annotations(lease), **(annotations or {})},
    }
    if owner_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": lease.pod_name,
                "uid": owner_uid,
                "blockOwnerDeletion": False,
            }
        ]
    return meta


def _service(
    name: str,
    lease: executor_pb2.Lease,
    executor_id: str,
    settings: KubernetesSettings,
    owner_uid: str,
    ports: list[int],
    *,
    kind: str,
    headless: bool,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": kind,
        "selector": {lb.RUN_ID: lease.run_id, lb.EXECUTOR: executor_id},
        "ports": [
            {"name": f"port-{p}", "port": p, "targetPort": p, "protocol": "TCP"} for p in ports
        ],
    }
    if headless:
        spec["clusterIP"] = "None"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, lease, executor_id, settings, owner_uid),
        "spec": spec,
    }


def exposure(
    lease: executor_pb2.Lease, executor_id: str, settings: KubernetesSettings, owner_uid: str = ""
) -> Exposure:
    """The services, ingresses and addresses of a run; empty when the job asks for none."""
    job = lease.job
    out = Exposure()
    pod = lease.pod_name
    namespace = namespace_of(lease, settings)
    for i, service in enumerate(job.services):
        headless = service.type == submit_pb2.Headless
        name = service.name or f"{pod}-{'headless' if headless else 'nodeport'}-{i}"
        out.services.append(
            _service(
                name,
                lease,
                executor_id,
                settings,
                owner_uid,
                list(service.ports),
                kind="ClusterIP" if headless else "NodePort",
                headless=headless,
            )
        )
    for i, ingress in enumerate(job.ingress):
        name = f"{pod}-ingress-{i}"
        ports = list(ingress.ports)
        out.services.append(
            _service(
                name,
                lease,
                executor_id,
                settings,
                owner_uid,
                ports,
                kind="ClusterIP",
                headless=not ingress.use_clusterIP,
            )
        )
        hosts = {p: f"{p}-{pod}.{namespace}.{settings.ingress_domain}" for p in ports}
        spec: dict[str, Any] = {
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": name, "port": {"number": port}}},
                            }
                        ]
                    },
                }
                for port, host in hosts.items()
            ]
        }
        if settings.ingress_class:
            spec["ingressClassName"] = settings.ingress_class
        if ingress.tls_enabled:
            tls: dict[str, Any] = {"hosts": list(hosts.values())}
            if ingress.cert_name:
                tls["secretName"] = ingress.cert_name
            spec["tls"] = [tls]
        out.ingresses.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": _metadata(
                    name, lease, executor_id, settings, owner_uid, dict(ingress.annotations)
                ),
                "spec": spec,
            }
        )
        out.addresses.update(hosts)
    return out
