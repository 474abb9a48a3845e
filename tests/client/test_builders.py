"""Job items and gangs from V1PodSpec, dicts, YAML and protobuf; checked before sending."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest
from google.protobuf import json_format
from kubernetes import client as k8s

from armada_core.api import submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.client import (
    Role,
    SpecError,
    check_items,
    gang_items,
    job_item,
    load_job_file,
    pod_group_items,
    pod_spec,
    to_message,
)
from armada_core.jobs import annotations as ann

from .conftest import pod


def v1_pod() -> k8s.V1PodSpec:
    return k8s.V1PodSpec(
        containers=[
            k8s.V1Container(
                name="main",
                image="python:3.11",
                command=["python", "-c", "print(1)"],
                env=[k8s.V1EnvVar(name="A", value="1")],
                resources=k8s.V1ResourceRequirements(
                    requests={"cpu": "500m", "memory": "1Gi"},
                    limits={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                ),
                liveness_probe=k8s.V1Probe(http_get=k8s.V1HTTPGetAction(port="http", path="/")),
                ports=[k8s.V1ContainerPort(container_port=8080, name="http")],
                volume_mounts=[k8s.V1VolumeMount(name="scratch", mount_path="/scratch")],
            )
        ],
        volumes=[
            k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource(size_limit="2Gi"))
        ],
        tolerations=[
            k8s.V1Toleration(
                key="gpu", operator="Exists", effect="NoExecute", toleration_seconds=30
            )
        ],
        node_selector={"pool": "gpu"},
        host_ipc=True,
        termination_grace_period_seconds=10,
        affinity=k8s.V1Affinity(
            node_affinity=k8s.V1NodeAffinity(
                required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                    node_selector_terms=[
                        k8s.V1NodeSelectorTerm(
                            match_expressions=[
                                k8s.V1NodeSelectorRequirement(
                                    key="zone", operator="In", values=["a", "b"]
                                )
                            ]
                        )
                    ]
                )
            )
        ),
        security_context=k8s.V1PodSecurityContext(run_as_user=1000, fs_group=2000),
    )


def test_v1_pod_spec_converts_field_by_field() -> None:
    spec = pod_spec(v1_pod())
    c = spec.containers[0]
    assert c.resources.requests["cpu"].string == "500m"
    assert c.resources.limits["nvidia.com/gpu"].string == "1"
    # IntOrString and inlined Go structs (Probe.handler, Volume.volumeSource).
    assert c.livenessProbe.handler.httpGet.port.strVal == "http"
    assert c.livenessProbe.handler.httpGet.port.type == 1
    assert spec.volumes[0].volumeSource.emptyDir.sizeLimit.string == "2Gi"
    assert spec.tolerations[0].tolerationSeconds == 30
    assert spec.hostIPC and spec.terminationGracePeriodSeconds == 10
    term = spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    assert list(term.nodeSelectorTerms[0].matchExpressions[0].values) == ["a", "b"]
    assert spec.securityContext.runAsUser == 1000
    # to_dict() (snake_case) and the API client's JSON form give the same message.
    assert pod_spec(v1_pod().to_dict()) == spec
    assert pod_spec(k8s.ApiClient().sanitize_for_serialization(v1_pod())) == spec


def test_dict_yaml_and_proto_forms_agree() -> None:
    text = textwrap.dedent("""\
        containers:
          - name: main
            image: busybox
            command: [sleep, "1"]
            resources:
              requests: {cpu: 100m, memory: 64Mi}
              limits: {cpu: 100m, memory: 64Mi}
        """)
    from_yaml = pod_spec(text)
    assert from_yaml == pod_spec(pod())
    assert pod_spec(from_yaml) == from_yaml
    # Numbers are accepted as quantities and stored as Kubernetes strings.
    numeric = pod_spec(pod(cpu=2, memory=1024))  # type: ignore[arg-type]
    assert numeric.containers[0].resources.requests["cpu"].string == "2"


def test_times_and_bytes() -> None:
    opts = to_message(
        {"sinceTime": "2026-01-02T03:04:05Z", "tailLines": 10}, core_v1_pb2.PodLogOptions
    )
    assert opts.sinceTime.seconds == int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp())
    ks = to_message(
        {"items": [{"key": "a", "path": "b", "mode": 0o644}]}, core_v1_pb2.SecretVolumeSource
    )
    assert ks.items[0].mode == 0o644


@pytest.mark.parametrize(
    ("spec", "path", "problem"),
    [
        (
            {"containers": [{"name": "main", "imag": "x"}]},
            "pod_spec.containers[0].imag",
            "did you mean image?",
        ),
        ({"containers": {"name": "main"}}, "pod_spec.containers", "expected a list"),
        ({"containers": [{"name": 3}]}, "pod_spec.containers[0].name", "expected a string"),
        ({"hostIPC": "yes"}, "pod_spec.hostIPC", "expected true or false"),
        (
            {"terminationGracePeriodSeconds": "10"},
            "pod_spec.terminationGracePeriodSeconds",
            "expected an integer",
        ),
        (
            {"containers": [{"name": "m", "resources": {"requests": {"cpu": [1]}}}]},
            "pod_spec.containers[0].resources.requests[cpu]",
            "expected a quantity",
        ),
        ("containers: [", "pod_spec", "not valid YAML"),
        ([1, 2], "pod_spec", "expected a mapping"),
    ],
)
def test_invalid_specs_name_the_field(spec, path: str, problem: str) -> None:
    with pytest.raises(SpecError) as raised:
        pod_spec(spec)
    assert raised.value.path == path
    assert problem in str(raised.value)


def test_job_item_sets_everything_and_checks_like_the_server() -> None:
    item = job_item(
        v1_pod(),
        priority=3,
        namespace="team",
        priority_class="armada-preemptible",
        client_id="run-1",
        labels={"app": "x"},
        annotations={"note": "hi"},
        retry_policy=["a", "b"],
        external_job_uri="airflow://dag/task/1",
        services=[{"type": "NodePort", "ports": [8080]}],
        ingress=[{"ports": [8080], "tlsEnabled": True}],
    )
    assert item.priority == 3 and item.namespace == "team" and item.client_id == "run-1"
    assert item.pod_specs[0].priorityClassName == "armada-preemptible"
    assert dict(item.labels) == {"app": "x"}
    assert item.annotations[ann.RETRY_POLICY] == "a,b"
    assert item.annotations[ann.EXTERNAL_JOB_URI] == "airflow://dag/task/1"
    assert item.external_job_uri == "airflow://dag/task/1"
    assert item.services[0].type == submit_pb2.NodePort
    assert item.ingress[0].tls_enabled
    # Server rules are checked before anything is sent, naming the field.
    no_memory = {
        "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
    }
    with pytest.raises(SpecError) as raised:
        job_item(no_memory)
    assert raised.value.path == "pod_specs[0].containers[0].resources.requests"
    with pytest.raises(SpecError, match=r"^labels\[bad key!\]"):
        job_item(pod(), labels={"bad key!": "v"})
    with pytest.raises(SpecError, match="restartPolicy"):
        job_item(pod(restartPolicy="Always"))
    # Any priority class and grace period: those are the server's configuration.
    job_item(pod(terminationGracePeriodSeconds=3600), priority_class="site-special")
    job_item(no_memory, check=False)


def test_gang_of_replicas() -> None:
    items = gang_items(
        pod(),
        replicas=3,
        gang_id="g1",
        minimum_cardinality=2,
        node_uniformity_label="rack",
        max_hops=4,
        client_id="train",
        labels={"a": "b"},
    )
    assert len(items) == 3
    for i, item in enumerate(items):
        assert item.annotations[ann.GANG_ID] == "g1"
        assert item.annotations[ann.GANG_CARDINALITY] == "3"
        assert item.annotations[ann.GANG_MINIMUM_CARDINALITY] == "2"
        assert item.annotations[ann.GANG_NODE_UNIFORMITY_LABEL] == "rack"
        assert item.annotations[ann.GANG_MAX_HOPS] == "4"
        assert item.client_id == f"train-{i}"
        assert dict(item.labels) == {"a": "b"}


def test_gang_of_different_specs() -> None:
    driver, worker = pod(cpu="1"), v1_pod()
    items = gang_items([driver, worker], client_id="job")
    assert [i.annotations[ann.GANG_ID] for i in items] == ["job", "job"]
    assert items[0].annotations[ann.GANG_CARDINALITY] == "2"
    assert ann.GANG_MINIMUM_CARDINALITY not in items[0].annotations
    assert ann.GANG_MAX_HOPS not in items[0].annotations
    assert items[1].pod_specs[0] == pod_spec(worker)
    anonymous = gang_items(pod(), replicas=2)
    assert anonymous[0].annotations[ann.GANG_ID] == anonymous[1].annotations[ann.GANG_ID] != ""
    assert anonymous[0].client_id == ""


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"specs": [pod()], "replicas": 2}, "replicas: give either"),
        ({"specs": pod()}, "replicas: a gang of one pod spec needs replicas"),
        ({"specs": pod(), "replicas": 2, "minimum_cardinality": 3}, "minimum_cardinality"),
        ({"specs": []}, "pod_specs: a gang needs at least one member"),
        ({"specs": pod(), "replicas": 2, "max_hops": -1}, "max_hops: must be 0 (one node) or more"),
        (
            {"specs": [pod(), {"containers": [{"name": "x", "bogus": 1}]}]},
            "members[1].pod_spec.containers[0].bogus",
        ),
        (
            {
                "specs": [pod(), pod()],
                "priority_class": None,
                "annotations": {ann.GANG_CARDINALITY: "x"},
            },
            "gangCardinality",
        ),
    ],
)
def test_gang_errors(kwargs, message: str) -> None:
    specs = kwargs.pop("specs")
    with pytest.raises(SpecError) as raised:
        gang_items(specs, **kwargs)
    assert message in str(raised.value)


def test_pod_group_members_name_their_role_and_its_minimum() -> None:
    coordinator, worker = pod(cpu="1"), pod(cpu="2")
    items = pod_group_items(
        [
            Role("coordinator", coordinator),
            {"name": "worker", "minimum": 2, "maximum": 4, "podSpec": worker},
        ],
        client_id="train",
        node_uniformity_label="rack",
        max_hops=2,
        labels={"a": "b"},
        annotations={"note": "hi"},
    )
    assert len(items) == 5
    assert [i.annotations[ann.GANG_ROLE] for i in items] == ["coordinator"] + ["worker"] * 4
    assert [i.annotations[ann.GANG_ROLE_MINIMUM] for i in items] == ["1"] + ["2"] * 4
    assert [i.client_id for i in items] == [f"train-{n}" for n in range(5)]
    for item in items:
        assert item.annotations[ann.GANG_ID] == "train"
        assert item.annotations[ann.GANG_CARDINALITY] == "5"
        assert item.annotations[ann.GANG_NODE_UNIFORMITY_LABEL] == "rack"
        assert item.annotations[ann.GANG_MAX_HOPS] == "2"
        assert item.annotations["note"] == "hi" and dict(item.labels) == {"a": "b"}
        assert ann.GANG_MINIMUM_CARDINALITY not in item.annotations
    assert items[0].pod_specs[0] == pod_spec(coordinator)
    assert all(i.pod_specs[0] == pod_spec(worker) for i in items[1:])


@pytest.mark.parametrize(
    ("role", "minimum", "maximum"),
    [
        (Role("w", pod()), 1, 1),  # one fixed member
        (Role("w", pod(), minimum=3), 3, 3),  # maximum defaults to the minimum
        (Role("w", pod(), maximum=4), 1, 4),  # minimum defaults to 1
        ({"name": "w", "pod_spec": pod(), "minimum": "2", "maximum": "3"}, 2, 3),  # templated
    ],
)
def test_pod_group_role_sizes(role, minimum: int, maximum: int) -> None:
    items = pod_group_items([role])
    assert len(items) == maximum
    assert {i.annotations[ann.GANG_ROLE_MINIMUM] for i in items} == {str(minimum)}
    assert items[0].annotations[ann.GANG_ID] != ""  # a random gang id without a client id


def test_role_mapping_round_trip() -> None:
    role = Role("w", pod(), minimum=2, maximum=4)
    assert Role.parse(role.as_dict()) == role
    assert Role.parse(role) is role
    bounded = Role("w", pod(), minimum=2, maximum=4, max_hops=2)
    assert Role.parse(bounded.as_dict()) == bounded


def test_role_max_hops_bound_the_role() -> None:
    """A role's max_hops (maxHops in a mapping) is its members' gangRoleMaxHops; a role
    without one carries none (the group's max_hops then bounds it)."""
    items = pod_group_items(
        [
            Role("coordinator", pod()),
            {"name": "worker", "minimum": 2, "podSpec": pod(), "maxHops": "2"},
        ],
        max_hops=4,
    )
    assert [i.annotations.get(ann.GANG_ROLE_MAX_HOPS) for i in items] == [None, "2", "2"]
    assert {i.annotations[ann.GANG_MAX_HOPS] for i in items} == {"4"}


@pytest.mark.parametrize(
    ("roles", "kwargs", "message"),
    [
        ([], {}, "roles: a pod group needs at least one role"),
        (Role("w", pod()), {}, "roles: expected a list of roles"),
        (
            [Role("w", pod()), Role("w", pod())],
            {},
            "roles[1].name: 'w' is already the name of roles[0]",
        ),
        ([Role("", pod())], {}, "roles[0].name: must be a non-empty string"),
        (
            [Role("w", pod(), minimum=0, maximum=2)],
            {},
            "roles[0].minimum: must be between 1 and the role's maximum 2, got 0",
        ),
        (
            [Role("w", pod(), minimum=3, maximum=2)],
            {},
            "roles[0].minimum: must be between 1 and the role's maximum 2, got 3",
        ),
        ([Role("w", pod(), maximum=0)], {}, "roles[0].maximum: must be at least 1, got 0"),
        ([Role("w", pod(), minimum=True)], {}, "roles[0].minimum: expected a whole number"),  # type: ignore[arg-type]
        ([{"name": "w"}], {}, "roles[0].podSpec: is required"),
        ([{"name": "w", "podSpec": pod(), "replicas": 2}], {}, "roles[0].replicas: unknown field"),
        (["w"], {}, "roles[0]: expected a mapping"),
        (
            [Role("a", pod()), Role("b", {"containers": [{"name": "m", "bogus": 1}]})],
            {},
            "roles[1].pod_spec.containers[0].bogus",
        ),
        ([Role("w", pod())], {"max_hops": -1}, "max_hops: must be 0 (one node) or more"),
        ([Role("w", pod(), max_hops=-1)], {}, "roles[0].max_hops: must be 0 (one node) or more"),
        ([{"name": "w", "podSpec": pod(), "maxHops": "x"}], {}, "roles[0].max_hops: expected"),
        (
            [{"name": "w", "podSpec": pod(), "maxHops": 1, "max_hops": 2}],
            {},
            "roles[0].max_hops: max_hops is given twice",
        ),
        (
            [Role("w", pod())],
            {"annotations": {ann.GANG_ROLE: "other"}},
            "annotations[armadaproject.io/gangRole]: 'other' contradicts",
        ),
        (
            [Role("w", pod())],
            {"annotations": {ann.GANG_MINIMUM_CARDINALITY: "1"}},
            "a pod group's minimums are its roles'",
        ),
    ],
)
def test_pod_group_errors(roles, kwargs, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        pod_group_items(roles, **kwargs)
    assert message in str(raised.value)


def test_gang_members_must_agree_on_priority_class() -> None:
    a = job_item(pod(), annotations={ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2"})
    b = job_item(
        pod(),
        priority_class="armada-preemptible",
        annotations={ann.GANG_ID: "g", ann.GANG_CARDINALITY: "2"},
    )
    with pytest.raises(SpecError) as raised:
        check_items([a, b])
    assert raised.value.path == "job_request_items[1].pod_specs[0].priorityClassName"


JOB_FILE = """\
queue: team-a
jobSetId: nightly
jobs:
  - priority: 1
    namespace: default
    clientId: single
    labels: {app: report}
    podSpec:
      containers:
        - name: main
          image: busybox
          command: [sh, -c, "echo hi"]
          resources:
            requests: {cpu: 100m, memory: 64Mi}
            limits: {cpu: 100m, memory: 64Mi}
  - annotations:
      armadaproject.io/gangId: pair
      armadaproject.io/gangCardinality: "2"
    podSpecs:
      - containers:
          - name: main
            image: busybox
            resources: {requests: {cpu: "1", memory: 1Gi}}
---
queue: team-b
jobSetId: other
jobs:
  - podSpec:
      priorityClassName: armada-preemptible
      containers: [{name: main, image: busybox, resources: {limits: {cpu: 1, memory: 1Gi}}}]
"""


def test_job_file() -> None:
    first, second = load_job_file(JOB_FILE)
    assert (first.queue, first.job_set_id, len(first.items)) == ("team-a", "nightly", 2)
    single, member = first.items
    assert single.client_id == "single" and single.priority == 1
    assert single.pod_spec.containers[0].command == ["sh", "-c", "echo hi"]
    assert member.annotations[ann.GANG_ID] == "pair"
    assert member.pod_specs[0].containers[0].resources.requests["memory"].string == "1Gi"
    assert second.queue == "team-b"
    assert second.to_proto().job_request_items[0].pod_spec.priorityClassName == "armada-preemptible"
    assert json_format.MessageToDict(first.to_proto())["jobSetId"] == "nightly"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the job file is empty"),
        ("queue: q\njobs: []\n", "jobSetId: is required"),
        ("queue: q\njobSetId: s\njobs: []\n", "jobs: is required"),
        ("queue: q\njobSetId: s\nextra: 1\njobs: [{}]\n", "extra: unknown field"),
        (
            "queue: q\njobSetId: s\njobs: [{podSpec: {containers: [{name: m, image: b}]}}]\n",
            "jobs[0].pod_specs[0].containers[0].resources.requests: must request cpu",
        ),
        ("queue: q\njobSetId: s\njobs: [{prority: 1}]\n", "jobs[0].prority: unknown field"),
        ("- 1\n---\nqueue: q\n", "document 1: expected a mapping"),
        ("queue: q\njobSetId: s\njobs: [{podSpec: {}}]\n", "a pod needs at least one container"),
        ("queue: [\n", "not valid YAML"),
    ],
)
def test_bad_job_files(text: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        load_job_file(text)
    assert message in str(raised.value)
