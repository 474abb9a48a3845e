"""The fields a local pod would ignore, for callers that refuse them up front."""

from __future__ import annotations

from armada_core.api.k8s import core_v1_pb2 as k8s
from armada_server.executors.local import ignored_fields

from .helpers import memory_limit, pod, sh


def test_a_plain_batch_pod_loses_nothing() -> None:
    spec = pod(
        sh(
            "main",
            "true",
            resources=memory_limit("1Gi"),
            workingDir="out",
            terminationMessagePolicy="FallbackToLogsOnError",
            env={"A": "b"},
        ),
        init=[sh("setup", "true")],
        deadline=60,
    )
    spec.restartPolicy = "Never"
    spec.nodeSelector["zone"] = "a"
    spec.priorityClassName = "armada-default"
    spec.tolerations.append(k8s.Toleration(key="gpu"))
    assert ignored_fields(spec) == []


def test_fields_that_would_be_ignored_are_named() -> None:
    main = sh(
        "main",
        "true",
        volumeMounts=[k8s.VolumeMount(name="data", mountPath="/data")],
        lifecycle=k8s.Lifecycle(preStop=k8s.LifecycleHandler()),
        tty=False,
    )
    main.resources.limits["ephemeral-storage"].string = "1Gi"
    setup = sh("setup", "true", securityContext=k8s.SecurityContext(runAsUser=1000))
    spec = pod(main, init=[setup])
    spec.volumes.append(k8s.Volume(name="data"))
    spec.restartPolicy = "OnFailure"
    assert ignored_fields(spec) == [
        "volumes",
        "restartPolicy=OnFailure",
        "initContainers[0].securityContext",
        "containers[0].volumeMounts",
        "containers[0].lifecycle",
        "containers[0].resources.limits.ephemeral-storage",
    ]
