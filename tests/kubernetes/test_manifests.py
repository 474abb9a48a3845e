"""What the executor sends to Kubernetes: the pod of a lease, its services and ingresses."""

from __future__ import annotations

from google.protobuf import json_format

from armada_core.api import executor_pb2, submit_pb2
from armada_core.client import job_item
from armada_server.executors.kubernetes import KubernetesSettings
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.exposure import exposure
from armada_server.executors.kubernetes.pods import pod_manifest


def lease(spec: dict, **job: object) -> executor_pb2.Lease:
    item = job_item(spec, check=False, **job)  # type: ignore[arg-type]
    built = submit_pb2.Job(
        id="01abc",
        queue="q",
        job_set_id="my set/1",
        namespace="team",
        pod_specs=item.pod_specs,
        ingress=item.ingress,
        services=item.services,
    )
    built.labels.update(item.labels)
    built.annotations.update(item.annotations)
    return executor_pb2.Lease(
        run_id="r-1", run_index=0, node="node-7", pod_name="armada-01abc-0", job=built
    )


SPEC = {
    "containers": [
        {
            "name": "main",
            "image": "trainer:2",
            "resources": {
                "requests": {"cpu": "500m", "memory": "4Gi"},
                "limits": {"nvidia.com/gpu": "1"},
            },
            "ports": [{"containerPort": 8080, "name": "http"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        }
    ],
    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "10Gi"}}],
    "nodeSelector": {"disk": "ssd"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "terminationGracePeriodSeconds": 30,
    "activeDeadlineSeconds": 3600,
    "priorityClassName": "armada-default",
}


def test_the_pod_spec_is_kubernetes_json() -> None:
    pod = pod_manifest(
        lease(SPEC, labels={"team": "a"}, annotations={"a/b": "c"}),
        "ex-1",
        KubernetesSettings(),
        {lb.HOSTNAME: "host-7"},
    )
    spec = pod["spec"]
    main = spec["containers"][0]
    assert main["resources"] == {
        "requests": {"cpu": "500m", "memory": "4Gi"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    assert main["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 10,
    }  # inline handler, int-or-string
    assert main["ports"] == [{"containerPort": 8080, "name": "http"}]
    assert spec["volumes"] == [{"name": "scratch", "emptyDir": {"sizeLimit": "10Gi"}}]
    assert spec["activeDeadlineSeconds"] == 3600  # int64 as a JSON number
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"disk": "ssd", lb.HOSTNAME: "host-7"}
    assert spec["priorityClassName"] == "armada-default"
    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"]) == ("armada-01abc-0", "team")
    assert meta["labels"] == {
        "team": "a",
        lb.JOB_ID: "01abc",
        lb.RUN_ID: "r-1",
        lb.EXECUTOR: "ex-1",
        lb.QUEUE: "q",
    }  # "my set/1": no label
    assert meta["annotations"] == {
        "a/b": "c",
        lb.JOB_SET_ANNOTATION: "my set/1",
        lb.LEASED_NODE: "node-7",
    }


def test_settings_confine_the_namespace_and_drop_priority_classes() -> None:
    settings = KubernetesSettings(namespace="armada", use_priority_classes=False)
    pod = pod_manifest(lease(SPEC), "ex-1", settings)
    assert pod["metadata"]["namespace"] == "armada"
    assert "priorityClassName" not in pod["spec"]
    assert pod["spec"]["nodeSelector"][lb.HOSTNAME] == "node-7"  # no labels: the node name


def test_services_and_ingresses() -> None:
    job = lease(
        SPEC,
        services=[
            {"type": "NodePort", "ports": [8080, 9090]},
            {"type": "Headless", "ports": [5432], "name": "db"},
        ],
        ingress=[{"ports": [8080], "use_clusterIP": True}],
    )
    out = exposure(job, "ex-1", KubernetesSettings(ingress_domain="d.io"), "uid-1")
    names = [s["metadata"]["name"] for s in out.services]
    assert names == ["armada-01abc-0-nodeport-0", "db", "armada-01abc-0-ingress-0"]
    nodeport, headless, for_ingress = out.services
    assert nodeport["spec"]["type"] == "NodePort"
    assert [p["port"] for p in nodeport["spec"]["ports"]] == [8080, 9090]
    assert headless["spec"]["clusterIP"] == "None"
    assert "clusterIP" not in for_ingress["spec"]  # use_clusterIP: a real ClusterIP
    assert all(s["metadata"]["labels"][lb.AUXILIARY] == "true" for s in out.services)
    [ingress] = out.ingresses
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "8080-armada-01abc-0.team.d.io"
    assert rule["http"]["paths"][0]["backend"]["service"] == {
        "name": "armada-01abc-0-ingress-0",
        "port": {"number": 8080},
    }
    assert "tls" not in ingress["spec"]
    assert out.addresses == {8080: "8080-armada-01abc-0.team.d.io"}


def test_no_services_no_objects() -> None:
    out = exposure(lease(SPEC), "ex-1", KubernetesSettings())
    assert (out.services, out.ingresses, out.addresses) == ([], [], {})
    assert json_format.MessageToDict(lease(SPEC).job)["namespace"] == "team"
