"""Validation of every field that reaches an executor or the scheduler.

Each rejection names the item and the field, and never echoes more than a bounded part of the
value: the message travels back in gRPC trailing metadata, which clients cap at a few KB.
"""

from __future__ import annotations

from typing import Any

import pytest

from armada_core.jobs import SubmissionConfig, SubmissionError, validate_request
from armada_core.jobs import annotations as ann

from .factories import container, item, request

CONFIG = SubmissionConfig()


def pod(**fields: Any) -> dict[str, Any]:
    return {"containers": [container(**fields.pop("main", {}))], **fields}


def rejected(req, path: str, problem: str = "") -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SubmissionError) as raised:
        validate_request(req, CONFIG)
    message = str(raised.value)
    assert message.startswith(path), message
    assert problem in message, message
    assert len(message) < 1500, len(message)
    return message


def accepted(req) -> None:  # type: ignore[no-untyped-def]
    validate_request(req, CONFIG)


P = "job_request_items[0].pod_specs[0]"
C = f"{P}.containers[0]"

CONTROL_CHARACTERS = [
    ("image", pod(main={"image": "busy\x00box"}), f"{C}.image", "NUL"),
    ("command", pod(main={"command": ["sh\x00"]}), f"{C}.command[0]", "NUL"),
    ("args", pod(main={"args": ["a", "b\x00"]}), f"{C}.args[1]", "NUL"),
    ("env value", pod(main={"env": [{"name": "A", "value": "x\x00"}]}), f"{C}.env[0].value", "NUL"),
    (
        "env name",
        pod(main={"env": [{"name": "A\x01", "value": "x"}]}),
        f"{C}.env[0].name",
        "control",
    ),
    ("workingDir NUL", pod(main={"workingDir": "/tmp\x00"}), f"{C}.workingDir", "NUL"),
    ("workingDir newline", pod(main={"workingDir": "/tmp\n"}), f"{C}.workingDir", "control"),
    (
        "node selector key",
        pod(nodeSelector={"zone\x00": "a"}),
        f"{P}.nodeSelector[zone\\x00]",
        "NUL",
    ),
    ("node selector value", pod(nodeSelector={"zone": "a\x00"}), f"{P}.nodeSelector[zone]", "NUL"),
    (
        "toleration key",
        pod(tolerations=[{"key": "g\x00", "operator": "Exists"}]),
        f"{P}.tolerations[0].key",
        "NUL",
    ),
    (
        "toleration value",
        pod(tolerations=[{"key": "g", "value": "v\x00"}]),
        f"{P}.tolerations[0].value",
        "NUL",
    ),
    ("C1 in image", pod(main={"image": "busy\x85box"}), f"{C}.image", "control"),
    (
        "port name",
        pod(main={"ports": [{"containerPort": 80, "name": "h\x1b"}]}),
        f"{C}.ports[0].name",
        "control",
    ),
]


@pytest.mark.parametrize(
    ("spec", "path", "problem"),
    [c[1:] for c in CONTROL_CHARACTERS],
    ids=[c[0] for c in CONTROL_CHARACTERS],
)
def test_nul_and_control_characters_are_refused(spec: dict, path: str, problem: str) -> None:
    rejected(request(item(spec)), path, problem)


def test_free_text_may_hold_tabs_and_line_breaks() -> None:
    accepted(
        request(
            item(
                pod(
                    main={
                        "command": ["sh", "-c", "echo a\n\techo b\r\n"],
                        "args": ["x\ty"],
                        "env": [{"name": "SCRIPT", "value": "line 1\nline 2"}],
                    }
                ),
                annotations={"note": "several\nlines\there"},
            )
        )
    )
    rejected(
        request(item(pod(), annotations={"note": "bell\x07"})),
        "job_request_items[0].annotations[note]",
        "control",
    )
    rejected(request(item(pod(main={"args": ["esc\x1b[31m"]}))), f"{C}.args[0]", "control")


def test_labels_and_annotation_keys_follow_kubernetes_syntax() -> None:
    rejected(
        request(item(pod(), labels={"app": "a\nb"})),
        "job_request_items[0].labels[app]",
        "not a valid label value",
    )
    rejected(request(item(pod(), labels={"app": "x" * 64})), "job_request_items[0].labels[app]")
    rejected(
        request(item(pod(), labels={"bad key": "a"})),
        "job_request_items[0].labels[bad key]",
        "not a valid key",
    )
    rejected(
        request(item(pod(), annotations={"a\nb": "x"})),
        "job_request_items[0].annotations[a\\nb]",
        "not a valid key",
    )
    accepted(request(item(pod(), labels={"example.com/app": "a-b_c.d"})))


@pytest.mark.parametrize("namespace", ["default\n", "Default", "a_b", "x" * 64, "-a", "a\x00"])
def test_namespaces_are_dns_labels(namespace: str) -> None:
    rejected(
        request(item(pod(), namespace=namespace)),
        "job_request_items[0].namespace",
        "not a valid Kubernetes namespace",
    )


def test_trailing_newlines_are_not_names() -> None:
    rejected(request(item(pod(main={"name": "main\n"}))), f"{C}.name")
    rejected(request(item(pod()), queue="q\n"), "queue")


def requirement(
    operator: str, values: list[str] | None = None, key: str = "zone"
) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expression["values"] = values
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }
    }


EXPRESSION = (
    f"{P}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0]"
)


@pytest.mark.parametrize(
    ("operator", "values", "field", "problem"),
    [
        ("Maybe", ["a"], "operator", "'Maybe' is not one of In, NotIn, Exists"),
        ("", ["a"], "operator", "not one of"),
        ("In", [], "values", "In needs at least one value"),
        ("NotIn", None, "values", "NotIn needs at least one value"),
        ("Exists", ["a"], "values", "Exists takes no values"),
        ("DoesNotExist", ["a"], "values", "takes no values"),
        ("Gt", ["1", "2"], "values", "Gt takes exactly one integer"),
        ("Lt", ["ten"], "values", "Lt takes exactly one integer"),
        ("In", ["a b"], "values[0]", "not a valid label value"),
    ],
)
def test_node_affinity_operators_and_values(
    operator: str, values: list[str] | None, field: str, problem: str
) -> None:
    rejected(request(item(pod(**requirement(operator, values)))), f"{EXPRESSION}.{field}", problem)


@pytest.mark.parametrize(
    ("operator", "values"),
    [
        ("In", ["a", "b"]),
        ("NotIn", ["a"]),
        ("Exists", None),
        ("DoesNotExist", None),
        ("Gt", ["3"]),
        ("Lt", ["-1"]),
    ],
)
def test_valid_node_affinity_is_accepted(operator: str, values: list[str] | None) -> None:
    accepted(request(item(pod(**requirement(operator, values)))))


def test_affinity_key_and_pod_affinity_operators() -> None:
    rejected(request(item(pod(**requirement("Exists", key="bad key")))), f"{EXPRESSION}.key")
    spec = pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]
                        },
                    }
                ]
            }
        }
    )
    rejected(
        request(item(spec)),
        f"{P}.affinity.podAntiAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector."
        "matchExpressions[0].operator",
        "'Gt' is not one of In, NotIn, Exists, DoesNotExist",
    )


TOLERATIONS = [
    ({"key": "gpu", "operator": "Maybe"}, "operator", "'Maybe' is not one of Equal, Exists"),
    ({"key": "gpu", "operator": "Exists", "value": "x"}, "value", "must be empty"),
    ({"key": "gpu", "effect": "Sometimes"}, "effect", "not one of NoSchedule"),
    ({"operator": "Equal", "value": "x"}, "operator", "must be Exists when the key is empty"),
    (
        {"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": "5"},
        "tolerationSeconds",
        "NoExecute",
    ),
    ({"key": "bad key", "operator": "Exists"}, "key", "not a valid taint key"),
]


@pytest.mark.parametrize(("toleration", "field", "problem"), TOLERATIONS)
def test_tolerations(toleration: dict, field: str, problem: str) -> None:
    rejected(request(item(pod(tolerations=[toleration]))), f"{P}.tolerations[0].{field}", problem)


def test_valid_tolerations_are_accepted() -> None:
    accepted(
        request(
            item(
                pod(
                    tolerations=[
                        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "gpu", "value": "true"},
                        {"operator": "Exists"},
                        {
                            "key": "x",
                            "operator": "Equal",
                            "value": "y",
                            "effect": "NoExecute",
                            "tolerationSeconds": "30",
                        },
                    ]
                )
            )
        )
    )


@pytest.mark.parametrize(
    ("port", "field", "problem"),
    [
        ({"containerPort": 0}, "containerPort", "between 1 and 65535, got 0"),
        ({"containerPort": 70000}, "containerPort", "got 70000"),
        ({"containerPort": -1}, "containerPort", "got -1"),
        ({"containerPort": 80, "hostPort": 65536}, "hostPort", "got 65536"),
        ({"containerPort": 80, "protocol": "ICMP"}, "protocol", "'ICMP' is not one of TCP, UDP"),
        ({"containerPort": 80, "name": "Web"}, "name", "not a valid port name"),
        ({"containerPort": 80, "name": "a-very-long-port-name"}, "name", "not a valid port name"),
    ],
)
def test_ports(port: dict, field: str, problem: str) -> None:
    rejected(request(item(pod(main={"ports": [port]}))), f"{C}.ports[0].{field}", problem)


def test_container_enums() -> None:
    rejected(
        request(item(pod(main={"imagePullPolicy": "Sometimes"}))),
        f"{C}.imagePullPolicy",
        "not one of Always, IfNotPresent, Never",
    )
    rejected(
        request(item(pod(main={"terminationMessagePolicy": "x"}))), f"{C}.terminationMessagePolicy"
    )
    rejected(request(item(pod(main={"restartPolicy": "Always"}))), f"{C}.restartPolicy")
    rejected(request(item(pod(restartPolicy="Always"))), f"{P}.restartPolicy")
    rejected(request(item(pod(dnsPolicy="Maybe"))), f"{P}.dnsPolicy")
    accepted(
        request(
            item(
                pod(
                    main={
                        "imagePullPolicy": "IfNotPresent",
                        "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
                    }
                )
            )
        )
    )


def resources(name: str, quantity: str) -> dict[str, Any]:
    c = container()
    c["resources"]["requests"][name] = c["resources"]["limits"][name] = {"string": quantity}
    return {"containers": [c]}


@pytest.mark.parametrize(
    ("name", "quantity", "field", "problem"),
    [
        ("cpu!", "1", "requests[cpu!]", "not a valid resource name"),
        ("a b", "1", "requests[a b]", "not a valid resource name"),
        ("nvidia.com/gpu", "0.5", "requests[nvidia.com/gpu]", "counted in whole units"),
        ("nvidia.com/gpu", "1500m", "requests[nvidia.com/gpu]", "counted in whole units"),
        ("example.com/dongle", "1e-3", "requests[example.com/dongle]", "whole units"),
        ("cpu", "1e9", "requests[cpu]", "above the maximum of 100000 cores"),
        ("memory", "2Pi", "requests[memory]", "above the maximum of 1Pi"),
        ("nvidia.com/gpu", "2000000", "requests[nvidia.com/gpu]", "above the maximum"),
    ],
)
def test_resource_names_units_and_bounds(
    name: str, quantity: str, field: str, problem: str
) -> None:
    rejected(request(item(resources(name, quantity))), f"{C}.resources.{field}", problem)


@pytest.mark.parametrize(
    ("name", "quantity"),
    [
        ("nvidia.com/gpu", "2"),
        ("nvidia.com/gpu", "1000m"),
        ("cpu", "0.5"),
        ("cpu", "100000"),
        ("memory", "1.5Gi"),
        ("ephemeral-storage", "10Gi"),
        ("hugepages-2Mi", "1.5Gi"),
    ],
)
def test_valid_resources_are_accepted(name: str, quantity: str) -> None:
    accepted(request(item(resources(name, quantity))))


@pytest.mark.parametrize("cardinality", ["1e20", "100000000000000000000", "10001", "+5", "٥"])
def test_gang_cardinality_is_a_bounded_decimal(cardinality: str) -> None:
    message = rejected(
        request(item(pod(), annotations={ann.GANG_ID: "g", ann.GANG_CARDINALITY: cardinality})),
        "job_request_items[0].annotations",
    )
    assert f"{ann.GANG_CARDINALITY}" in message and cardinality in message


def test_lifetime_is_an_ascii_number() -> None:
    rejected(
        request(item(pod(), annotations={ann.LIFETIME: "²"})),
        f"job_request_items[0].annotations[{ann.LIFETIME}]",
    )


def test_a_huge_annotation_is_refused_naming_it_without_echoing_it() -> None:
    message = rejected(
        request(item(pod(), annotations={"big": "x" * 10_000_000})),
        "job_request_items[0].annotations[big]",
        "above the limit",
    )
    assert "xxxxxxxxxx" not in message


def test_too_many_annotations_in_total_are_refused() -> None:
    notes = {f"n{i}": "x" * 50_000 for i in range(6)}
    rejected(
        request(item(pod(), annotations=notes)), "job_request_items[0].annotations[n", "256 KiB"
    )


def test_a_huge_argument_is_refused_naming_it() -> None:
    message = rejected(
        request(item(pod(main={"args": ["small", "y" * 10_000_000]}))),
        f"{C}.args[1]",
        "above the limit of 1048576",
    )
    assert "yyyyyyyyyy" not in message


def test_a_job_of_many_small_values_is_refused_when_too_large() -> None:
    args = [f"a{i}" * 100 for i in range(5000)]
    rejected(request(item(pod(main={"args": args}))), f"{C}.args: ", "above the limit")


def test_values_in_messages_are_shortened() -> None:
    message = rejected(request(item(pod(), namespace="n" * 5000)), "job_request_items[0].namespace")
    assert "5000 characters" in message and len(message) < 300


def test_ingress_and_service_ports() -> None:
    rejected(
        request(item(pod(), ingress=[{"ports": [0]}])),
        "job_request_items[0].ingress[0].ports[0]",
        "between 1 and 65535",
    )
    rejected(
        request(item(pod(), services=[{"ports": [70000], "name": "x"}])),
        "job_request_items[0].services[0].ports[0]",
    )
    rejected(
        request(item(pod(), services=[{"ports": [80], "name": "x\x00"}])),
        "job_request_items[0].services[0].name",
        "NUL",
    )
    accepted(request(item(pod(), ingress=[{"ports": [8080]}])))


# --- as strict as a Kubernetes API server ----------------------------------------------------


def quantities(requests: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    """The main container asking cpu 1 and memory 1Gi, plus `requests` and `limits`."""
    c = container()
    for kind, values in (("requests", requests), ("limits", limits or {})):
        c["resources"][kind].update({k: {"string": v} for k, v in values.items()})
    return {"containers": [c]}


def volume(name: str, **source: Any) -> dict[str, Any]:
    return {"name": name, "volumeSource": source or {"emptyDir": {}}}


def mounts(*mounted: dict[str, str], volumes: tuple[str, ...] = ("data",)) -> dict[str, Any]:
    return pod(main={"volumeMounts": list(mounted)}, volumes=[volume(v) for v in volumes])


GANG_LABEL = ann.GANG_NODE_UNIFORMITY_LABEL
MB10 = 10 * 1024 * 1024
R = f"{C}.resources"
# (name, item, the field the refusal names, what it says)
KUBERNETES_RULES = [
    ("cpu ' 1'", item(quantities({"cpu": " 1"})), f"{R}.requests[cpu]", "spaces"),
    ("memory limit '1Gi '", item(quantities({}, {"memory": "1Gi "})), f"{R}.limits[memory]", ""),
    (
        "gpu ' 1'",
        item(quantities({"nvidia.com/gpu": " 1"}, {"nvidia.com/gpu": " 1"})),
        f"{R}.requests[nvidia.com/gpu]",
        "spaces",
    ),
    (
        "ephemeral-storage '10Gi '",
        item(quantities({"ephemeral-storage": "10Gi "})),
        f"{R}.requests[ephemeral-storage]",
        "spaces",
    ),
    (
        "gpu request 1, limit 2",
        item(quantities({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"})),
        f"{R}.requests[nvidia.com/gpu]",
        "must equal its limit of '2' (nvidia.com/gpu cannot be overcommitted)",
    ),
    (
        "extended resource request 1, limit 3",
        item(quantities({"example.com/fpga": "1"}, {"example.com/fpga": "3"})),
        f"{R}.requests[example.com/fpga]",
        "cannot be overcommitted",
    ),
    (
        "gpu request without a limit",
        item(quantities({"nvidia.com/gpu": "1"})),
        f"{R}.requests[nvidia.com/gpu]",
        "set its limit too",
    ),
    (
        "hugepages request below limit",
        item(quantities({"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "4Mi"})),
        f"{R}.requests[hugepages-2Mi]",
        "cannot be overcommitted",
    ),
    (
        "a resource without a domain",
        item(quantities({"gpu": "1"})),
        f"{R}.requests[gpu]",
        "not a standard resource",
    ),
    (
        "pod-level resources",
        item(pod(resources={"limits": {"cpu": {"string": "1"}}})),
        f"{P}.resources",
        "pod-level resources are not supported",
    ),
    ("overhead", item(pod(overhead={"cpu": {"string": "1"}})), f"{P}.overhead", "RuntimeClass"),
    (
        "ephemeral containers",
        item(pod(ephemeralContainers=[{"ephemeralContainerCommon": {"name": "debug"}}])),
        f"{P}.ephemeralContainers",
        "",
    ),
    (
        "gang uniformity label 'bad label!'",
        item(
            pod(),
            annotations={ann.GANG_ID: "g", ann.GANG_CARDINALITY: "1", GANG_LABEL: "bad label!"},
        ),
        f"job_request_items[0].annotations[{GANG_LABEL}]",
        "'bad label!' is not a valid label key",
    ),
    (
        "volume name Bad_Name",
        item(pod(volumes=[volume("Bad_Name")])),
        f"{P}.volumes[0].name",
        "'Bad_Name' is not a valid volume name",
    ),
    (
        "volume name used twice",
        item(pod(volumes=[volume("data"), volume("data")])),
        f"{P}.volumes[1].name",
        "used twice",
    ),
    (
        "volume of no type",
        item(pod(volumes=[{"name": "data"}])),
        f"{P}.volumes[0].volumeSource",
        "exactly one volume type",
    ),
    (
        "volume of two types",
        item(pod(volumes=[volume("data", emptyDir={}, hostPath={"path": "/tmp"})])),
        f"{P}.volumes[0].volumeSource",
        "got hostPath, emptyDir",
    ),
    (
        "mount of no volume",
        item(mounts({"name": "other", "mountPath": "/d"})),
        f"{C}.volumeMounts[0].name",
        "not the name of a volume",
    ),
    (
        "two mounts at one path",
        item(mounts({"name": "data", "mountPath": "/d"}, {"name": "data", "mountPath": "/d"})),
        f"{C}.volumeMounts[1].mountPath",
        "mounted twice",
    ),
    (
        "mount without a path",
        item(mounts({"name": "data"})),
        f"{C}.volumeMounts[0].mountPath",
        "must not be empty",
    ),
    (
        "sub-path out of the volume",
        item(mounts({"name": "data", "mountPath": "/d", "subPath": "a/../../etc"})),
        f"{C}.volumeMounts[0].subPath",
        "without '..'",
    ),
    (
        "a 10 MB annotation key",
        item(pod(), annotations={"k" * MB10: "v"}),
        "job_request_items[0].annotations[kkkk",
        "its name is 10485760 characters, above 63",
    ),
    (
        "annotations above 256 KiB as UTF-8",
        item(pod(), annotations={f"n{i}": "é" * 35_000 for i in range(4)}),
        "job_request_items[0].annotations[n0]",
        "hold 280008 bytes, above the limit of 262144",
    ),
    (
        "annotation key prefix a..b",
        item(pod(), annotations={"a..b/note": "x"}),
        "job_request_items[0].annotations[a..b/note]",
        "not a valid key",
    ),
    (
        "label key prefix a.-b.io",
        item(pod(), labels={"a.-b.io/team": "x"}),
        "job_request_items[0].labels[a.-b.io/team]",
        "not a valid key",
    ),
    (
        "env name é",
        item(pod(main={"env": [{"name": "é", "value": "x"}]})),
        f"{C}.env[0].name",
        "printable ASCII",
    ),
    ("image ' busybox'", item(pod(main={"image": " busybox"})), f"{C}.image", "whitespace"),
    ("hostname Bad_Host", item(pod(hostname="Bad_Host")), f"{P}.hostname", "not a DNS label"),
    (
        "service account name",
        item(pod(serviceAccountName="Robot")),
        f"{P}.serviceAccountName",
        "not a DNS subdomain",
    ),
    ("node name", item(pod(nodeName="node_1")), f"{P}.nodeName", "not a DNS subdomain"),
    (
        "deadline above 2^31-1 s",
        item(pod(activeDeadlineSeconds=2**31)),
        f"{P}.activeDeadlineSeconds",
        "at most 2147483647",
    ),
    (
        "dnsPolicy None without dnsConfig",
        item(pod(dnsPolicy="None")),
        f"{P}.dnsConfig",
        "required when dnsPolicy is None",
    ),
    (
        "negative pod user id",
        item(pod(securityContext={"runAsUser": -1})),
        f"{P}.securityContext.runAsUser",
        "between 0 and 2147483647",
    ),
    (
        "supplemental group above 2^31-1",
        item(pod(securityContext={"supplementalGroups": [5, 2**31]})),
        f"{P}.securityContext.supplementalGroups[1]",
        "",
    ),
    (
        "container group id above 2^31-1",
        item(pod(main={"securityContext": {"runAsGroup": 2**32}})),
        f"{C}.securityContext.runAsGroup",
        "",
    ),
    (
        "container name Main",
        item(pod(main={"name": "Main"})),
        f"{C}.name",
        "at most 63 lower-case letters",
    ),
]


@pytest.mark.parametrize(
    ("job", "path", "problem"),
    [c[1:] for c in KUBERNETES_RULES],
    ids=[c[0] for c in KUBERNETES_RULES],
)
def test_what_kubernetes_refuses_is_refused_naming_the_field(
    job: Any, path: str, problem: str
) -> None:
    rejected(request(job), path, problem)


def test_a_billion_gpus_are_refused_wherever_asked() -> None:
    """Every resource has a maximum (cpu 100,000 cores, other units a million), in a
    container and in total; the pod-level resources the scheduler would not count are
    refused whatever they hold."""
    for name, job, path in [
        ("limit", item(quantities({}, {"nvidia.com/gpu": "1G"})), f"{R}.limits[nvidia.com/gpu]"),
        ("request", item(quantities({"nvidia.com/gpu": "1e9"})), f"{R}.requests[nvidia.com/gpu]"),
        (
            "pod-level",
            item(pod(resources={"limits": {"nvidia.com/gpu": {"string": "1000000000"}}})),
            f"{P}.resources",
        ),
    ]:
        message = rejected(request(job), path)
        assert name != "pod-level" or "not supported" in message, message
        assert name == "pod-level" or "above the maximum of 1000000" in message, message
    two = {"containers": [container("a"), container("b")]}
    for c in two["containers"]:
        c["resources"]["limits"]["nvidia.com/gpu"] = {"string": "600000"}
    rejected(request(item(two)), f"{P}.containers", "more nvidia.com/gpu than the maximum")


@pytest.mark.parametrize(
    "job",
    [
        item(quantities({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"})),
        item(quantities({}, {"nvidia.com/gpu": "2"})),  # the limit stands for the request
        item(quantities({"cpu": "500m", "memory": "1Gi"}, {"cpu": "2", "memory": "2Gi"})),
        item(quantities({"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": "4Mi"})),
        item(quantities({"kubernetes.io/batch-slots": "1"}, {"kubernetes.io/batch-slots": "2"})),
        item(pod(), annotations={"Example.COM/Note": "checked in lower case, as Kubernetes does"}),
        item(pod(), ingress=[{"ports": [8080], "annotations": {"Example.COM/Note": "also"}}]),
        item(
            pod(),
            annotations={ann.GANG_ID: "g", ann.GANG_CARDINALITY: "1", GANG_LABEL: "a.io/rack"},
        ),
        item(pod(main={"env": [{"name": "MY VAR.1-x", "value": "printable ASCII"}]})),
        item(mounts({"name": "data", "mountPath": "/d", "subPath": "a/b..c"})),
        item(pod(hostname="worker-0", subdomain="jobs", serviceAccountName="batch.robot")),
        item(
            pod(
                dnsPolicy="None",
                dnsConfig={"nameservers": ["10.0.0.1"]},
                securityContext={"runAsUser": 0, "fsGroup": 2**31 - 1},
            )
        ),
    ],
    ids=[
        "gpu request equals limit",
        "gpu limit alone",
        "cpu and memory overcommitted",
        "hugepages request equals limit",
        "kubernetes.io resource overcommitted",
        "upper-case annotation key",
        "upper-case ingress annotation key",
        "gang uniformity label with a prefix",
        "env name with a space and a dot",
        "sub-path with dots in a name",
        "host name, subdomain, service account",
        "dnsConfig and ids at their bounds",
    ],
)
def test_what_kubernetes_accepts_is_accepted(job: Any) -> None:
    accepted(request(job))
