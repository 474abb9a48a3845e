"""Realistic messages for the wire-compatibility tests, as protobuf JSON dicts.

Field names are the proto names (json_format's preserving_proto_field_name form), so a dict
reads the same on both sides of the comparison.
"""

from __future__ import annotations

from typing import Any

GANG = {
    "armadaproject.io/gangId": "train-7f3a",
    "armadaproject.io/gangCardinality": "4",
    "armadaproject.io/gangMinimumCardinality": "2",
    "armadaproject.io/gangNodeUniformityLabel": "rack",
}

POD_SPEC: dict[str, Any] = {
    "priorityClassName": "armada-preemptible",
    "restartPolicy": "Never",
    "terminationGracePeriodSeconds": "30",
    "activeDeadlineSeconds": "3600",
    "serviceAccountName": "trainer",
    "nodeSelector": {"node.kubernetes.io/instance-type": "gpu-a100", "zone": "eu-1a"},
    "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "dedicated",
            "operator": "Equal",
            "value": "ml",
            "effect": "NoExecute",
            "tolerationSeconds": "600",
        },
    ],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "rack", "operator": "In", "values": ["r1", "r2"]},
                            {
                                "key": "armadaproject.io/node-name",
                                "operator": "NotIn",
                                "values": ["node-17"],
                            },
                        ],
                    }
                ],
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]
                    },
                },
            ],
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "trainer"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ],
        },
    },
    "securityContext": {
        "runAsUser": "1000",
        "runAsGroup": "1000",
        "fsGroup": "2000",
        "runAsNonRoot": True,
    },
    "initContainers": [
        {
            "name": "fetch-data",
            "image": "busybox:1.36",
            "command": ["sh", "-c"],
            "args": ["cp -r /src/. /data/"],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "resources": {
                "requests": {"cpu": {"string": "500m"}, "memory": {"string": "256Mi"}},
                "limits": {"cpu": {"string": "500m"}, "memory": {"string": "256Mi"}},
            },
        }
    ],
    "containers": [
        {
            "name": "train",
            "image": "registry.example/ml/train:2.4",
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-m", "train"],
            "args": ["--epochs", "10", "--lr=3e-4"],
            "workingDir": "/workspace",
            "env": [
                {"name": "MASTER_PORT", "value": "29500"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {
                    "name": "TOKEN",
                    "valueFrom": {
                        "secretKeyRef": {
                            "localObjectReference": {"name": "hf-token"},
                            "key": "token",
                        }
                    },
                },
                {
                    "name": "MEM_LIMIT",
                    "valueFrom": {
                        "resourceFieldRef": {"containerName": "train", "resource": "limits.memory"}
                    },
                },
            ],
            "envFrom": [{"configMapRef": {"localObjectReference": {"name": "train-config"}}}],
            "ports": [{"name": "dist", "containerPort": 29500, "protocol": "TCP"}],
            "resources": {
                "requests": {
                    "cpu": {"string": "8"},
                    "memory": {"string": "64Gi"},
                    "nvidia.com/gpu": {"string": "1"},
                    "ephemeral-storage": {"string": "20Gi"},
                },
                "limits": {
                    "cpu": {"string": "8"},
                    "memory": {"string": "64Gi"},
                    "nvidia.com/gpu": {"string": "1"},
                },
            },
            "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": True},
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "ckpt", "mountPath": "/ckpt", "subPath": "run-42"},
            ],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "readinessProbe": {
                "handler": {"exec": {"command": ["cat", "/tmp/ready"]}},
                "periodSeconds": 5,
            },
        }
    ],
    "volumes": [
        {"name": "data", "volumeSource": {"emptyDir": {"sizeLimit": {"string": "50Gi"}}}},
        {"name": "dshm", "volumeSource": {"emptyDir": {"medium": "Memory"}}},
        {"name": "ckpt", "volumeSource": {"persistentVolumeClaim": {"claimName": "ckpt-pvc"}}},
        {
            "name": "cfg",
            "volumeSource": {
                "configMap": {
                    "localObjectReference": {"name": "train-config"},
                    "items": [{"key": "config.yaml", "path": "config.yaml"}],
                    "defaultMode": 420,
                }
            },
        },
        {"name": "creds", "volumeSource": {"secret": {"secretName": "s3-creds"}}},
    ],
}

JOB_SUBMIT_REQUEST = {
    "queue": "ml-research",
    "job_set_id": "nightly-2026-11-22",
    "job_request_items": [
        {
            "priority": 2.0,
            "namespace": "ml",
            "client_id": f"dag.train.run-1.{i}",
            "labels": {"team": "vision", "member": str(i)},
            "annotations": {
                **GANG,
                "armadaproject.io/retry-policy": "gpu-flaky",
                "armadaproject.io/externalJobUri": f"airflow://dag/train/{i}",
            },
            "pod_specs": [POD_SPEC],
            "ingress": [
                {
                    "ports": [8080],
                    "annotations": {"nginx": "x"},
                    "tls_enabled": True,
                    "cert_name": "tls",
                    "use_clusterIP": True,
                }
            ],
            "services": [{"type": "Headless", "ports": [29500], "name": "dist"}],
            "scheduler": "armada",
            "external_job_uri": f"airflow://dag/train/{i}",
        }
        for i in range(2)
    ],
}

QUEUE = {
    "name": "ml-research",
    "priority_factor": 2.0,
    "user_owners": ["alice"],
    "group_owners": ["ml-team"],
    "permissions": [
        {
            "subjects": [{"kind": "Group", "name": "ml-team"}, {"kind": "User", "name": "bob"}],
            "verbs": ["submit", "cancel", "reprioritize", "watch"],
        },
        {"subjects": [{"kind": "Group", "name": "auditors"}], "verbs": ["watch"]},
    ],
    "resource_limits_by_priority_class_name": {
        "armada-preemptible": {
            "maximum_resource_fraction": {"cpu": 0.5, "nvidia.com/gpu": 0.25},
            "maximum_resource_fraction_by_pool": {
                "gpu": {"maximum_resource_fraction": {"nvidia.com/gpu": 0.5}}
            },
        },
    },
    "cordoned": True,
    "labels": {"cost-centre": "r-and-d"},
    "retry_policies": ["gpu-flaky", "default"],
}

RETRY_POLICY = {
    "name": "gpu-flaky",
    "retry_limit": 5,
    "default_action": "RETRY_ACTION_FAIL",
    "rules": [
        {
            "action": "RETRY_ACTION_RETRY",
            "on_category": "gpu",
            "on_subcategory": "xid-79",
            "mutate": {"affinity": {"avoid_same_node": True}},
        },
        {
            "action": "RETRY_ACTION_RETRY",
            "on_category": "oom",
            "mutate": {"resources": {"memory": {"static": "2Gi", "factor": 1.5}}},
        },
    ],
}

_BASE = {
    "job_id": "01JD7Y8Z9ABCDEFGHJKMNPQRST",
    "job_set_id": "nightly-2026-11-22",
    "queue": "ml-research",
    "created": "2026-11-22T01:02:03.456789Z",
}
_POD = {
    "cluster_id": "gpu-eu-1",
    "kubernetes_id": "5b0e8c2c-1f1e-4a52-9f0c-1d2e3f4a5b6c",
    "pod_number": 1,
    "pod_name": "armada-01JD7Y8Z9ABCDEFGHJKMNPQRST-0",
    "pod_namespace": "ml",
}

EVENTS: dict[str, dict[str, Any]] = {
    "submitted": {
        **_BASE,
        "job": {
            "id": _BASE["job_id"],
            "client_id": "c-1",
            "job_set_id": _BASE["job_set_id"],
            "queue": "ml-research",
            "namespace": "ml",
            "owner": "alice",
            "priority": 1.0,
            "labels": {"a": "b"},
            "annotations": GANG,
            "pod_specs": [POD_SPEC],
            "queue_ownership_user_groups": ["ml-team"],
            "scheduling_resource_requirements": {"requests": {"cpu": {"string": "8"}}},
            "created": _BASE["created"],
            "scheduler": "armada",
        },
    },
    "queued": dict(_BASE),
    "leased": {**_BASE, "cluster_id": "gpu-eu-1", "pool": "gpu"},
    "lease_returned": {
        **_BASE,
        **{k: _POD[k] for k in ("cluster_id", "kubernetes_id", "pod_number")},
        "reason": "pod could not be created",
        "run_attempted": True,
    },
    "lease_expired": dict(_BASE),
    "pending": {**_BASE, **_POD, "pool": "gpu"},
    "running": {**_BASE, **_POD, "node_name": "node-17", "pool": "gpu"},
    "failed": {
        **_BASE,
        **_POD,
        "node_name": "node-17",
        "reason": "OOMKilled",
        "exit_codes": {"train": 137},
        "container_statuses": [
            {
                "name": "train",
                "exitCode": 137,
                "message": "out of memory",
                "reason": "OOMKilled",
                "cause": "OOM",
            },
            {
                "name": "sidecar",
                "exitCode": 3,
                "message": "bad input",
                "reason": "Error",
                "cause": "Error",
            },
        ],
        "cause": "OOM",
        "failure_category": "oom",
        "failure_subcategory": "container",
        "retryable": True,
    },
    "succeeded": {**_BASE, **_POD, "node_name": "node-17"},
    "reprioritized": {**_BASE, "new_priority": 5.0, "requestor": "alice"},
    "cancelling": {**_BASE, "requestor": "alice", "reason": "no longer needed"},
    "cancelled": {**_BASE, "requestor": "alice", "reason": "no longer needed"},
    "utilisation": {
        **_BASE,
        **_POD,
        "node_name": "node-17",
        "MaxResourcesForPeriod": {"cpu": {"string": "7500m"}},
        "AvgResourcesForPeriod": {"cpu": {"string": "6"}},
        "total_cumulative_usage": {"cpu": {"string": "3600"}},
    },
    "ingress_info": {
        **_BASE,
        **_POD,
        "node_name": "node-17",
        "ingress_addresses": {"8080": "10.0.0.7:8080"},
    },
    "reprioritizing": {**_BASE, "new_priority": 5.0, "requestor": "alice"},
    "preempted": {
        **_BASE,
        "cluster_id": "gpu-eu-1",
        "run_id": "run-1",
        "preemptive_run_id": "run-2",
        "reason": "preempted by urgent job",
        "preempting_job_id": "01JD7Y8Z9ABCDEFGHJKMNPQRSV",
        "requestor": "scheduler",
    },
    "preempting": {**_BASE, "requestor": "alice", "reason": "manual preemption"},
}

# (full type name, value) pairs sent across in both directions.
MESSAGES: list[tuple[str, dict[str, Any]]] = [
    ("api.JobSubmitRequest", JOB_SUBMIT_REQUEST),
    ("api.Queue", QUEUE),
    ("api.RetryPolicy", RETRY_POLICY),
    (
        "api.JobSetRequest",
        {
            "id": "nightly",
            "watch": True,
            "from_message_id": "42-7",
            "queue": "ml-research",
            "errorIfMissing": True,
        },
    ),
    ("api.JobSubmitResponse", {"job_response_items": [{"job_id": "a"}, {"error": "bad"}]}),
    ("api.JobStatusResponse", {"job_states": {"a": "RUNNING", "b": "UNKNOWN"}}),
    (
        "api.JobSetCancelRequest",
        {
            "job_set_id": "s",
            "queue": "q",
            "reason": "r",
            "filter": {"states": ["QUEUED", "PENDING"]},
        },
    ),
    (
        "binoculars.LogRequest",
        {
            "job_id": "a",
            "pod_number": 1,
            "pod_namespace": "ml",
            "since_time": "2026-11-22T00:00:00Z",
            "log_options": {"container": "train", "tailLines": "100", "timestamps": True},
        },
    ),
    *[
        ("api.EventStreamMessage", {"id": f"{n}", "message": {name: value}})
        for n, (name, value) in enumerate(EVENTS.items())
    ],
]
