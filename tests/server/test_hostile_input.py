"""Hostile submissions over the wire, to a real server running jobs on its local executor.

Every submission is either refused (INVALID_ARGUMENT or RESOURCE_EXHAUSTED) with a bounded
message naming the field, or accepted and run to a terminal state; at the end a canary job
runs to success, proving that nothing accepted stopped scheduling. Explicit examples cover
each known way in (NUL in every field that reaches the executor, invalid ports and operators,
resource names and units, absurd quantities and gang sizes, a newline in a namespace, 10 MB
values, text that is not UTF-8); hypothesis generates combinations of them with benign values.
SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armada_core.api import job_pb2, job_pb2_grpc, submit_pb2, submit_pb2_grpc
from armada_core.api.k8s import core_v1_pb2 as core
from armada_core.api.k8s import resource_pb2
from armada_core.jobs import TERMINAL_STATES, JobState
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig
from armada_server.decoding import invalid_utf8

pytestmark = pytest.mark.slow

QUEUE = "hostile"
REFUSED = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
# "field.path[key]: problem", as every refusal starts; and never a huge message.
NAMES_A_FIELD = re.compile(r"^(job_request_items\[\d+\]|job_set_id)\S*( \S+)?\]?: \S", re.S)
MAX_DETAILS = 2100
TERMINAL = {int(s) for s in TERMINAL_STATES}
MB10 = 10 * 1024 * 1024


@dataclass
class Api:
    channel: grpc.Channel
    submit: submit_pb2_grpc.SubmitStub
    jobs: job_pb2_grpc.JobsStub


@pytest.fixture
def api(database_url: str, tmp_path: Path) -> Iterator[Api]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        database_url=database_url,
        sandbox_dir=str(tmp_path / "pods"),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
        nodes=(NodeGroup(1, "4", "4Gi", gpus=2, labels={"zone": "a", "rank": "5"}),),
    )
    with EmbeddedServer(config) as server, grpc.insecure_channel(server.address) as channel:
        stubs = Api(channel, submit_pb2_grpc.SubmitStub(channel), job_pb2_grpc.JobsStub(channel))
        submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(
            submit_pb2.Queue(name=QUEUE, priority_factor=1), timeout=30
        )
        yield stubs


def base_item() -> submit_pb2.JobSubmitRequestItem:
    """A job that runs at once and succeeds on the local executor."""
    q = resource_pb2.Quantity
    main = core.Container(
        name="main",
        image="busybox",
        command=["true"],
        resources=core.ResourceRequirements(
            requests={"cpu": q(string="100m"), "memory": q(string="32Mi")},
            limits={"cpu": q(string="100m"), "memory": q(string="32Mi")},
        ),
    )
    return submit_pb2.JobSubmitRequestItem(
        priority=1, namespace="default", pod_specs=[core.PodSpec(containers=[main])]
    )


def spec(item: submit_pb2.JobSubmitRequestItem) -> core.PodSpec:
    return item.pod_specs[0]


def main(item: submit_pb2.JobSubmitRequestItem) -> core.Container:
    return item.pod_specs[0].containers[0]


P = "job_request_items[0].pod_specs[0]"
C = f"{P}.containers[0]"


def term(operator: str, values: list[str], key: str = "zone") -> core.Affinity:
    return core.Affinity(
        nodeAffinity=core.NodeAffinity(
            requiredDuringSchedulingIgnoredDuringExecution=core.NodeSelector(
                nodeSelectorTerms=[
                    core.NodeSelectorTerm(
                        matchExpressions=[
                            core.NodeSelectorRequirement(key=key, operator=operator, values=values)
                        ]
                    )
                ]
            )
        )
    )


def set_quantity(
    kind: str, name: str, value: str
) -> Callable[[submit_pb2.JobSubmitRequestItem], None]:
    def mutate(item: submit_pb2.JobSubmitRequestItem) -> None:
        for which in ("requests", "limits"):
            getattr(main(item).resources, which)[name].string = value

    return mutate


# (name, how to break the base job, the field the refusal must name)
Mutation = tuple[str, Callable[[submit_pb2.JobSubmitRequestItem], None], str]
EXAMPLES: list[Mutation] = [
    ("NUL in image", lambda i: setattr(main(i), "image", "busy\x00box"), f"{C}.image"),
    ("NUL in command", lambda i: main(i).command.__setitem__(0, "tr\x00ue"), f"{C}.command[0]"),
    ("NUL in args", lambda i: main(i).args.append("a\x00"), f"{C}.args[0]"),
    (
        "NUL in env",
        lambda i: main(i).env.append(core.EnvVar(name="A", value="\x00")),
        f"{C}.env[0].value",
    ),
    ("NUL in workingDir", lambda i: setattr(main(i), "workingDir", "/tmp\x00x"), f"{C}.workingDir"),
    (
        "NUL in nodeSelector",
        lambda i: spec(i).nodeSelector.__setitem__("zone", "a\x00"),
        f"{P}.nodeSelector[zone]",
    ),
    (
        "NUL in toleration",
        lambda i: spec(i).tolerations.append(core.Toleration(key="gpu\x00", operator="Exists")),
        f"{P}.tolerations[0].key",
    ),
    (
        "container port 0",
        lambda i: main(i).ports.append(core.ContainerPort(containerPort=0)),
        f"{C}.ports[0].containerPort",
    ),
    (
        "container port 70000",
        lambda i: main(i).ports.append(core.ContainerPort(containerPort=70000)),
        f"{C}.ports[0].containerPort",
    ),
    (
        "toleration operator",
        lambda i: spec(i).tolerations.append(core.Toleration(key="gpu", operator="Sometimes")),
        f"{P}.tolerations[0].operator",
    ),
    ("resource cpu!", set_quantity("requests", "cpu!", "1"), f"{C}.resources.requests[cpu!]"),
    (
        "half a GPU",
        set_quantity("requests", "nvidia.com/gpu", "0.5"),
        f"{C}.resources.requests[nvidia.com/gpu]",
    ),
    ("10^9 CPUs", set_quantity("requests", "cpu", "1e9"), f"{C}.resources.requests[cpu]"),
    (
        "gang cardinality 1e20",
        lambda i: i.annotations.update({ann.GANG_ID: "g", ann.GANG_CARDINALITY: "1e20"}),
        "job_request_items[0].annotations",
    ),
    (
        "gang cardinality 10^20",
        lambda i: i.annotations.update({ann.GANG_ID: "g", ann.GANG_CARDINALITY: "1" + "0" * 20}),
        f"job_request_items[0].annotations[{ann.GANG_CARDINALITY}]",
    ),
    (
        "namespace default\\n",
        lambda i: setattr(i, "namespace", "default\n"),
        "job_request_items[0].namespace",
    ),
    (
        "10 MB annotation",
        lambda i: i.annotations.__setitem__("big", "x" * MB10),
        "job_request_items[0].annotations[big]",
    ),
    ("10 MB argument", lambda i: main(i).args.append("y" * MB10), f"{C}.args[0]"),
    (
        "affinity operator Maybe",
        lambda i: spec(i).affinity.CopyFrom(term("Maybe", ["a"])),
        f"{P}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        "nodeSelectorTerms[0].matchExpressions[0].operator",
    ),
    (
        "pull policy",
        lambda i: setattr(main(i), "imagePullPolicy", "Sometimes"),
        f"{C}.imagePullPolicy",
    ),
    (
        "port protocol",
        lambda i: main(i).ports.append(core.ContainerPort(containerPort=80, protocol="ICMP")),
        f"{C}.ports[0].protocol",
    ),
    (
        "label value",
        lambda i: i.labels.__setitem__("app", "a\nb"),
        "job_request_items[0].labels[app]",
    ),
    # What a Kubernetes API server refuses.
    *(
        (f"{name} ' 1'", set_quantity("requests", name, " 1"), f"{C}.resources.requests[{name}]")
        for name in ("cpu", "memory", "nvidia.com/gpu", "ephemeral-storage")
    ),
    (
        "GPU request 1, limit 2",
        lambda i: (
            set_quantity("requests", "nvidia.com/gpu", "1")(i),
            main(i).resources.limits["nvidia.com/gpu"].__setattr__("string", "2"),
        ),
        f"{C}.resources.requests[nvidia.com/gpu]",
    ),
    ("a billion GPUs", set_quantity("limits", "nvidia.com/gpu", "1e9"), f"{C}.resources."),
    (
        "a billion GPUs for the pod",
        lambda i: spec(i).resources.limits["nvidia.com/gpu"].__setattr__("string", "1e9"),
        f"{P}.resources",
    ),
    (
        "gang uniformity label 'bad label!'",
        lambda i: i.annotations.update(
            {
                ann.GANG_ID: "g",
                ann.GANG_CARDINALITY: "1",
                ann.GANG_NODE_UNIFORMITY_LABEL: "bad label!",
            }
        ),
        f"job_request_items[0].annotations[{ann.GANG_NODE_UNIFORMITY_LABEL}]",
    ),
    (
        "volume Bad_Name",
        lambda i: spec(i).volumes.append(
            core.Volume(
                name="Bad_Name",
                volumeSource=core.VolumeSource(emptyDir=core.EmptyDirVolumeSource()),
            )
        ),
        f"{P}.volumes[0].name",
    ),
    (
        "10 MB annotation key",
        lambda i: i.annotations.__setitem__("k" * MB10, "v"),
        "job_request_items[0].annotations[kkkk",
    ),
]


def check_refusal(error: grpc.RpcError, field: str) -> None:
    details = error.details() or ""
    assert error.code() in REFUSED, (error.code(), details[:500])
    assert len(details) <= MAX_DETAILS, len(details)
    assert details.startswith(field), (field, details[:500])
    assert NAMES_A_FIELD.match(details), details[:500]


def submit(api: Api, request: submit_pb2.JobSubmitRequest) -> list[str]:
    response = api.submit.SubmitJobs(request, timeout=60)
    return [i.job_id for i in response.job_response_items]


def wait_terminal(api: Api, ids: list[str], timeout: float = 120) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        states = dict(
            api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=ids), timeout=30).job_states
        )
        if all(s in TERMINAL for s in states.values()):
            return states
        assert time.monotonic() < deadline, {
            i: submit_pb2.JobState.Name(s) for i, s in states.items() if s not in TERMINAL
        }
        time.sleep(0.1)


def canary_runs(api: Api) -> None:
    [canary] = submit(
        api,
        submit_pb2.JobSubmitRequest(
            queue=QUEUE, job_set_id="canary", job_request_items=[base_item()]
        ),
    )
    assert wait_terminal(api, [canary]) == {canary: int(JobState.SUCCEEDED)}


def test_known_hostile_submissions_are_refused_naming_the_field(api: Api) -> None:
    for name, mutate, field in EXAMPLES:
        item = base_item()
        mutate(item)
        with pytest.raises(grpc.RpcError) as raised:
            submit(
                api,
                submit_pb2.JobSubmitRequest(
                    queue=QUEUE, job_set_id="known", job_request_items=[item]
                ),
            )
        try:
            check_refusal(raised.value, field)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
    canary_runs(api)


def raw_submit(api: Api) -> Callable[..., bytes]:
    return api.channel.unary_unary(
        "/api.Submit/SubmitJobs", request_serializer=None, response_deserializer=None
    )


def test_text_that_is_not_utf8_is_refused_naming_the_field(api: Api) -> None:
    item = base_item()
    item.annotations["team"] = "team-value"
    request = submit_pb2.JobSubmitRequest(
        queue=QUEUE, job_set_id="queue-set", job_request_items=[item]
    )
    for marker, field in [
        (b"team-value", "job_request_items[0].annotations[team]"),  # proto3: parse fails
        (b"busybox", f"{C}.image"),  # proto2 (Kubernetes types): found by validation
        (b"queue-set", "job_set_id"),
    ]:
        data = request.SerializeToString().replace(marker, marker[:2] + b"\xff" + marker[3:])
        with pytest.raises(grpc.RpcError) as raised:
            raw_submit(api)(data, timeout=30)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.details() == f"{field}: not valid UTF-8"
    canary_runs(api)


def test_invalid_utf8_is_found_in_nested_and_repeated_fields() -> None:
    request = submit_pb2.JobSubmitRequest(
        queue=QUEUE, job_set_id="s", job_request_items=[base_item(), base_item()]
    )
    request.job_request_items[1].labels["app"] = "label-value"
    data = request.SerializeToString()
    descriptor = submit_pb2.JobSubmitRequest.DESCRIPTOR
    assert invalid_utf8(descriptor, data) is None
    bad = data.replace(b"label-value", b"label\xc3value")
    assert invalid_utf8(descriptor, bad) == "job_request_items[1].labels[app]"
    bad = data.replace(b"app", b"a\xffp")
    assert invalid_utf8(descriptor, bad) == "job_request_items[1].labels[b'a\\xffp']"
    assert invalid_utf8(descriptor, data[:-3]) is None  # truncated: not a UTF-8 problem


# --- generated -------------------------------------------------------------------------------

HOSTILE_TEXT = st.one_of(
    st.sampled_from(["\x00", "a\x00b", "x\n", "\x1b[31m", "\x7f", "\x85", "é\x00", "\t"]),
    st.text(alphabet=st.characters(codec="utf-8", categories=["Cc"]), min_size=1, max_size=3),
)
BENIGN_TEXT = st.sampled_from(["a", "data", "x-1"])
TEXT = st.one_of(HOSTILE_TEXT, BENIGN_TEXT)


def _text_field(
    name: str, setter: Callable[[submit_pb2.JobSubmitRequestItem, str], None], field: str
) -> st.SearchStrategy[Mutation]:
    return st.builds(lambda v: (f"{name}={v!r}", lambda i: setter(i, v), field), TEXT)


GENERATED: list[st.SearchStrategy[Mutation]] = [
    _text_field("image", lambda i, v: setattr(main(i), "image", v), f"{C}.image"),
    _text_field("args", lambda i, v: main(i).args.append(v), f"{C}.args["),
    _text_field(
        "env", lambda i, v: main(i).env.append(core.EnvVar(name="V", value=v)), f"{C}.env["
    ),
    _text_field(
        "env name", lambda i, v: main(i).env.append(core.EnvVar(name=v, value="1")), f"{C}.env["
    ),
    # Benign values match the node's label: a valid job must be able to run.
    _text_field(
        "selector",
        lambda i, v: spec(i).nodeSelector.__setitem__(
            "zone", v if v not in ("data", "x-1") else "a"
        ),
        f"{P}.nodeSelector[zone]",
    ),
    _text_field(
        "toleration",
        lambda i, v: spec(i).tolerations.append(core.Toleration(key="k", value=v)),
        f"{P}.tolerations[",
    ),
    _text_field(
        "annotation",
        lambda i, v: i.annotations.__setitem__("note", v),
        "job_request_items[0].annotations[note]",
    ),
    _text_field(
        "label", lambda i, v: i.labels.__setitem__("app", v), "job_request_items[0].labels[app]"
    ),
    _text_field(
        "namespace",
        lambda i, v: setattr(i, "namespace", v if v != "data" else "ns"),
        "job_request_items[0].namespace",
    ),
    st.builds(
        lambda p: (
            f"port {p}",
            lambda i: main(i).ports.append(core.ContainerPort(containerPort=p)),
            f"{C}.ports[",
        ),
        st.one_of(st.integers(-(2**31), 0), st.integers(65536, 2**31 - 1), st.integers(1, 65535)),
    ),
    st.builds(
        lambda op: (
            f"toleration {op}",
            lambda i: spec(i).tolerations.append(core.Toleration(key="k", operator=op)),
            f"{P}.tolerations[",
        ),
        st.sampled_from(["Exists", "Equal", "", "Maybe", "exists", "Exists\n"]),
    ),
    # Valid requirements the node meets (it is labelled zone=a, rank=5), and invalid ones.
    st.builds(
        lambda r: (
            f"affinity {r}",
            lambda i: spec(i).affinity.CopyFrom(term(*r)),
            f"{P}.affinity.nodeAffinity",
        ),
        st.sampled_from(
            [
                ("In", ["a"]),
                ("In", ["b", "a"]),
                ("NotIn", ["b"]),
                ("Exists", []),
                ("DoesNotExist", [], "absent"),
                ("Gt", ["1"], "rank"),
                ("Lt", ["9"], "rank"),
                ("Maybe", ["a"]),
                ("in", ["a"]),
                ("In", []),
                ("Exists", ["a"]),
                ("Gt", ["x"], "rank"),
                ("Lt", ["1", "2"], "rank"),
                ("In", ["x y"]),
                ("In", ["a"], "bad key"),
                ("", ["a"]),
            ]
        ),
    ),
    st.builds(
        lambda name, q: (
            f"resource {name}={q}",
            set_quantity("requests", name, q),
            f"{C}.resources.requests[{name}]",
        ),
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "cpu!", "a b"]),
        st.sampled_from(["1", "0.5", "50m", "1e9", "2Pi", "1e20", "100Mi"]),
    ),
    st.builds(
        lambda c: (
            f"gang {c}",
            lambda i: i.annotations.update({ann.GANG_ID: "g", ann.GANG_CARDINALITY: c}),
            "job_request_items[0].annotations",
        ),
        st.sampled_from(["1e20", "0", "-1", "10001", "1" + "0" * 25, " 5", "five"]),
    ),
    st.builds(
        lambda size: (
            f"annotation of {size} bytes",
            lambda i: i.annotations.__setitem__("blob", "b" * size),
            "job_request_items[0].annotations[blob]",
        ),
        st.sampled_from([10, 300_000, 2_000_000]),
    ),
]


def test_generated_submissions_are_refused_naming_a_field_or_run(api: Api) -> None:
    @given(mutations=st.lists(st.one_of(GENERATED), min_size=1, max_size=3))
    @settings(
        max_examples=80,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    def property_(mutations: list[Mutation]) -> None:
        item = base_item()
        for _, mutate, _ in mutations:
            mutate(item)
        request = submit_pb2.JobSubmitRequest(
            queue=QUEUE, job_set_id="generated", job_request_items=[item]
        )
        names = [m[0] for m in mutations]
        try:
            ids = submit(api, request)
        except grpc.RpcError as e:
            details = e.details() or ""
            assert e.code() in REFUSED, (e.code(), details[:500], names)
            assert len(details) <= MAX_DETAILS
            assert NAMES_A_FIELD.match(details), details[:500]
            assert any(details.startswith(field) for _, _, field in mutations), (
                details[:500],
                names,
            )
            return
        states = wait_terminal(api, ids, timeout=60)
        assert set(states.values()) <= TERMINAL, (names, states)

    property_()
    canary_runs(api)
