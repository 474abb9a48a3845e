"""What a local container sees: command line, environment, downward API, working directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from armada_core.api.k8s import core_v1_pb2 as k8s
from armada_server.executors.local import LocalPodRunner, PodPhase
from armada_server.executors.local.environment import expand

from .helpers import PYTHON, container, pod, py, start

pytestmark = pytest.mark.timeout(60)

DUMP_ENV = "import json, os; print(json.dumps(dict(os.environ)))"
DUMP_CWD = "import os; print(os.getcwd())"


def field_ref(name: str, path: str) -> k8s.EnvVar:
    return k8s.EnvVar(
        name=name, valueFrom=k8s.EnvVarSource(fieldRef=k8s.ObjectFieldSelector(fieldPath=path))
    )


def resource_ref(name: str, resource: str, divisor: str = "", container: str = "") -> k8s.EnvVar:
    selector = k8s.ResourceFieldSelector(resource=resource, containerName=container)
    if divisor:
        selector.divisor.string = divisor
    return k8s.EnvVar(name=name, valueFrom=k8s.EnvVarSource(resourceFieldRef=selector))


def plain(name: str, value: str) -> k8s.EnvVar:
    return k8s.EnvVar(name=name, value=value)


async def environment_of(
    runner: LocalPodRunner, c: k8s.Container, *others: k8s.Container, **kwargs: object
) -> tuple[dict[str, str], str]:
    """The environment `c` ran with, and its sandbox."""
    handle = start(runner, pod(c, *others), **kwargs)
    final = await handle.wait()
    assert final.phase is PodPhase.SUCCEEDED, final
    return json.loads(handle.read_logs(c.name)[0].text), str(handle.sandbox)


async def test_kubernetes_and_armada_variables(runner: LocalPodRunner) -> None:
    env, sandbox = await environment_of(runner, py("main", DUMP_ENV))
    pod_name = env["ARMADA_POD_NAME"]
    assert env["HOSTNAME"] == pod_name and pod_name.startswith("armada-job")
    assert env["ARMADA_NAMESPACE"] == "default" and env["ARMADA_NODE_NAME"] == "node-1"
    assert env["ARMADA_SANDBOX"] == sandbox
    assert env["HOME"] == f"{sandbox}/work" and env["TMPDIR"] == f"{sandbox}/tmp"
    assert env["ARMADA_TERMINATION_MESSAGE_PATH"] == f"{sandbox}/termination/main"
    assert "PATH" in env


async def test_server_environment_does_not_leak(
    runner: LocalPodRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVER_SECRET", "hunter2")
    env, _ = await environment_of(runner, py("main", DUMP_ENV))
    assert "SERVER_SECRET" not in env


async def test_downward_api_and_plain_values(runner: LocalPodRunner) -> None:
    resources = k8s.ResourceRequirements()
    resources.limits["memory"].string = "256Mi"
    resources.limits["cpu"].string = "1500m"
    resources.requests["cpu"].string = "250m"
    sidecar_resources = k8s.ResourceRequirements()
    sidecar_resources.limits["memory"].string = "1Gi"
    c = py(
        "main",
        DUMP_ENV,
        resources=resources,
        env=[
            plain("GREETING", "hello"),
            field_ref("POD_NAME", "metadata.name"),
            field_ref("POD_NAMESPACE", "metadata.namespace"),
            field_ref("NODE", "spec.nodeName"),
            field_ref("POD_IP", "status.podIP"),
            field_ref("POD_UID", "metadata.uid"),
            field_ref("TEAM", "metadata.labels['team']"),
            field_ref("NOTE", "metadata.annotations['note']"),
            resource_ref("MEMORY_MI", "limits.memory", "1Mi"),
            resource_ref("MEMORY_BYTES", "limits.memory"),
            resource_ref("CPU_LIMIT", "limits.cpu"),
            resource_ref("CPU_LIMIT_MILLI", "limits.cpu", "1m"),
            resource_ref("CPU_REQUEST_MILLI", "requests.cpu", "1m"),
            resource_ref("MEMORY_REQUEST", "requests.memory"),  # defaults to the limit
            resource_ref("SIDECAR_MEMORY_GI", "limits.memory", "1Gi", container="sidecar"),
            resource_ref("NODE_CPUS", "limits.cpu", container="sidecar"),  # unset: allocatable
            plain("MESSAGE", "$(GREETING) from $(POD_NAME), $$(GREETING), $(UNDEFINED)"),
            plain("GREETING", "overridden"),
        ],
    )
    env, _ = await environment_of(
        runner,
        c,
        container("sidecar", command=["true"], resources=sidecar_resources),
        labels={"team": "ml"},
        annotations={"note": "n1"},
        allocatable={"cpu": "7", "memory": "64Gi"},
    )
    pod_name = env["ARMADA_POD_NAME"]
    assert {
        k: env[k]
        for k in (
            "GREETING",
            "POD_NAME",
            "POD_NAMESPACE",
            "NODE",
            "POD_IP",
            "POD_UID",
            "TEAM",
            "NOTE",
            "MEMORY_MI",
            "MEMORY_BYTES",
            "CPU_LIMIT",
            "CPU_LIMIT_MILLI",
            "CPU_REQUEST_MILLI",
            "MEMORY_REQUEST",
            "SIDECAR_MEMORY_GI",
            "NODE_CPUS",
            "MESSAGE",
        )
    } == {
        "GREETING": "overridden",
        "POD_NAME": pod_name,
        "POD_NAMESPACE": "default",
        "NODE": "node-1",
        "POD_IP": "127.0.0.1",
        "POD_UID": env["ARMADA_RUN_ID"],
        "TEAM": "ml",
        "NOTE": "n1",
        "MEMORY_MI": "256",
        "MEMORY_BYTES": str(256 * 2**20),
        "CPU_LIMIT": "2",
        "CPU_LIMIT_MILLI": "1500",
        "CPU_REQUEST_MILLI": "250",
        "MEMORY_REQUEST": str(256 * 2**20),
        "SIDECAR_MEMORY_GI": "1",
        "NODE_CPUS": "7",
        "MESSAGE": f"hello from {pod_name}, $(GREETING), $(UNDEFINED)",
    }


async def test_executor_variables_cannot_be_overridden(runner: LocalPodRunner) -> None:
    env, sandbox = await environment_of(
        runner,
        py(
            "main",
            DUMP_ENV,
            env={"ARMADA_SANDBOX": "/elsewhere", "HOSTNAME": "custom", "PATH": "/usr/bin:/bin"},
        ),
    )
    assert env["ARMADA_SANDBOX"] == sandbox
    assert (env["HOSTNAME"], env["PATH"]) == ("custom", "/usr/bin:/bin")


async def test_optional_secret_is_left_unset(runner: LocalPodRunner) -> None:
    ref = k8s.SecretKeySelector(key="k", optional=True)
    ref.localObjectReference.name = "s"
    optional = k8s.EnvVar(name="OPTIONAL", valueFrom=k8s.EnvVarSource(secretKeyRef=ref))
    env, _ = await environment_of(runner, py("main", DUMP_ENV, env=[optional]))
    assert "OPTIONAL" not in env


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        (field_ref("X", "spec.containers[0].image"), "fieldRef 'spec.containers[0].image'"),
        (resource_ref("X", "limits.memory", container="nope"), "unknown container 'nope'"),
        (resource_ref("X", "usage.memory"), "'usage.memory' is not supported"),
        (
            k8s.EnvVar(
                name="X",
                valueFrom=k8s.EnvVarSource(configMapKeyRef=k8s.ConfigMapKeySelector(key="k")),
            ),
            "configMap",
        ),
    ],
)
async def test_unresolvable_variables_fail_the_pod(
    runner: LocalPodRunner, variable: k8s.EnvVar, expected: str
) -> None:
    final = await start(runner, pod(py("main", "pass", env=[variable]))).wait()
    assert (final.phase, final.reason) == (PodPhase.FAILED, "CreateContainerConfigError")
    assert expected in final.message and "env X" in final.message


async def test_env_from_a_config_map_fails_the_pod(runner: LocalPodRunner) -> None:
    source = k8s.EnvFromSource(configMapRef=k8s.ConfigMapEnvSource())
    source.configMapRef.localObjectReference.name = "settings"
    c = py("main", "pass")
    c.envFrom.append(source)
    final = await start(runner, pod(c)).wait()
    assert final.reason == "CreateContainerConfigError"
    assert "envFrom configMap 'settings'" in final.message


async def test_command_and_args_expand_variables(runner: LocalPodRunner) -> None:
    c = container(
        "main",
        command=[PYTHON, "-c", "import sys; print(sys.argv[1:])"],
        args=["$(WHO)", "$$(WHO)", "$(NOBODY)"],
        env={"WHO": "world"},
    )
    handle = start(runner, pod(c))
    assert (await handle.wait()).phase is PodPhase.SUCCEEDED
    assert handle.read_logs("main")[0].text == "['world', '$(WHO)', '$(NOBODY)']"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("$(A)", "1"),
        ("$(A)$(B)", "12"),
        ("x$(A)y", "x1y"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("$(MISSING)", "$(MISSING)"),
        ("$(A", "$(A"),
        ("cost: $5", "cost: $5"),
        ("trailing $", "trailing $"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, {"A": "1", "B": "2"}) == expected


@pytest.mark.parametrize(
    ("working_dir", "relative_to_work"),
    [
        ("", "."),
        ("sub/dir", "sub/dir"),
        ("./a/../b", "b"),
    ],
)
async def test_working_dir_in_the_sandbox(
    runner: LocalPodRunner, working_dir: str, relative_to_work: str
) -> None:
    handle = start(runner, pod(py("main", DUMP_CWD, workingDir=working_dir)))
    assert (await handle.wait()).phase is PodPhase.SUCCEEDED
    expected = (handle.sandbox / "work" / relative_to_work).resolve()
    assert Path(handle.read_logs("main")[0].text) == expected


async def test_absolute_working_dir_is_the_nodes(runner: LocalPodRunner, tmp_path: Path) -> None:
    handle = start(runner, pod(py("main", DUMP_CWD, workingDir=str(tmp_path))))
    assert (await handle.wait()).phase is PodPhase.SUCCEEDED
    assert handle.read_logs("main")[0].text == str(tmp_path)


@pytest.mark.parametrize(
    ("working_dir", "expected"),
    [
        ("/no/such/directory", "does not exist on this node"),
        ("../../../outside", "leaves the pod's sandbox"),
    ],
)
async def test_bad_working_dir_fails_the_pod(
    runner: LocalPodRunner, working_dir: str, expected: str
) -> None:
    final = await start(runner, pod(py("main", DUMP_CWD, workingDir=working_dir))).wait()
    assert (final.phase, final.reason) == (PodPhase.FAILED, "CreateContainerError")
    assert expected in final.message
