"""Bad input: property-based fuzzing of the public API with hypothesis.

Every request is answered with OK or a client error naming the problem, never INTERNAL or
UNKNOWN, and the server keeps serving. Submissions:

- generated JobSubmitRequests with arbitrary and junk fields (names, quantities, gang
  annotations, priorities, grace periods, several or no pod specs): invalid ones fail with
  INVALID_ARGUMENT naming the field, exactly as validation words it; valid ones are stored;
- one mutation of a known-good request (full pod spec, gang): INVALID_ARGUMENT naming the
  mutated field, and nothing stored;
- raw bytes through a generic channel method: bytes that decode are treated as the message
  they decode to; bytes that do not decode are answered INVALID_ARGUMENT (pending, see below).

The other calls that take names and ids get arbitrary text and numbers too. Deterministic
(`derandomize=True`) and bounded, on SQLite and on PostgreSQL (which refuses NUL characters and
over-long text where SQLite would store them).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from armada_core.api import (
    event_pb2,
    event_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_core.api.k8s import core_v1_pb2 as core
from armada_core.api.k8s import resource_pb2
from armada_core.jobs import SubmissionError
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import ServerConfig
from armada_server.errors import InvalidArgument
from armada_server.services.submit import validate_submission

from .conftest import Stubs

QUEUE = "fuzz"
CONFIG = ServerConfig().submission()
FUZZ = settings(
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=150,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
CLIENT_ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
}
# "field.path[key]: problem": how every submission error starts.
NAMES_A_FIELD = re.compile(r"^(queue|job_set_id|job_request_items)\b.*?: \S", re.S)

# --- strategies -------------------------------------------------------------------------------

JUNK = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
LONG = st.sampled_from(["x" * 1025, "y" * 3000])
NAMEISH = st.one_of(
    st.text(alphabet=string.ascii_lowercase + string.digits + "-._", min_size=1, max_size=20),
    st.sampled_from(["", "a b", "-lead", "trail-", "UPPER", "x" * 64, "a\x00b", "ümlaut"]),
    JUNK,
)
TEXT = st.one_of(NAMEISH, LONG)
QUANTITY = st.one_of(
    st.builds(
        lambda n, s: f"{n}{s}",
        st.one_of(st.integers(0, 10**6), st.decimals(0, 1000, places=3).map(str)),
        st.sampled_from(
            [
                "",
                "m",
                "k",
                "M",
                "G",
                "Ki",
                "Mi",
                "Gi",
                "Ti",
                "n",
                "u",
                "E",
                "e3",
                "e-2",
                "e40",
                "e99999999",
            ]
        ),
    ),
    st.sampled_from(
        [
            "",
            "-1",
            "1.5.5",
            "lots",
            "0x10",
            "1 Gi",
            "9" * 40,
            "1e-99999999",
            "NaN",
            "inf",
            "+1",
            ".5",
            "1e",
            "e3",
        ]
    ),
    JUNK,
)
RESOURCE = st.one_of(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"]), JUNK
)
FLOAT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, -1.0, 1e308])
)
GANG_VALUE = st.one_of(
    st.integers(-2, 5).map(str), st.sampled_from(["", "two", "1.5", "9" * 30]), JUNK
)


def quantities() -> st.SearchStrategy[dict[str, resource_pb2.Quantity]]:
    return st.dictionaries(
        RESOURCE, QUANTITY.map(lambda q: resource_pb2.Quantity(string=q)), max_size=3
    )


@st.composite
def containers(draw: st.DrawFn) -> core.Container:
    requests = draw(
        st.one_of(
            st.just({"cpu": "1", "memory": "1Gi"}).map(
                lambda d: {k: resource_pb2.Quantity(string=v) for k, v in d.items()}
            ),
            quantities(),
        )
    )
    return core.Container(
        name=draw(st.one_of(st.sampled_from(["main", "side", "main"]), NAMEISH)),
        image="busybox",
        resources=core.ResourceRequirements(requests=requests, limits=draw(quantities())),
    )


@st.composite
def pod_specs(draw: st.DrawFn) -> core.PodSpec:
    spec = core.PodSpec(
        containers=draw(st.lists(containers(), max_size=3)),
        initContainers=draw(st.lists(containers(), max_size=1)),
        priorityClassName=draw(
            st.one_of(st.sampled_from(["", "armada-default", "armada-preemptible", "gold"]), JUNK)
        ),
        restartPolicy=draw(st.sampled_from(["", "Never", "Always", "OnFailure"])),
        nodeSelector=draw(st.dictionaries(JUNK, JUNK, max_size=2)),
    )
    grace = draw(st.one_of(st.none(), st.integers(-5, 1000), st.just(2**62)))
    if grace is not None:
        spec.terminationGracePeriodSeconds = grace
    deadline = draw(st.one_of(st.none(), st.integers(-5, 10**9)))
    if deadline is not None:
        spec.activeDeadlineSeconds = deadline
    return spec


@st.composite
def annotations(draw: st.DrawFn) -> dict[str, str]:
    out = draw(
        st.dictionaries(
            st.one_of(st.sampled_from(["team", "example.com/owner"]), JUNK), TEXT, max_size=2
        )
    )
    keys = draw(
        st.lists(
            st.sampled_from(
                [
                    ann.GANG_ID,
                    ann.GANG_CARDINALITY,
                    ann.GANG_MINIMUM_CARDINALITY,
                    ann.GANG_NODE_UNIFORMITY_LABEL,
                    ann.EXTERNAL_JOB_URI,
                    ann.PREEMPTIBLE,
                    ann.LIFETIME,
                    ann.AT_MOST_ONCE,
                ]
            ),
            max_size=4,
            unique=True,
        )
    )
    for key in keys:
        out[key] = draw(st.one_of(st.sampled_from(["g1", "g2", "true"]), GANG_VALUE, TEXT))
    return out


@st.composite
def items(draw: st.DrawFn) -> submit_pb2.JobSubmitRequestItem:
    item = submit_pb2.JobSubmitRequestItem(
        priority=draw(FLOAT),
        namespace=draw(st.one_of(st.sampled_from(["", "default", "team-a"]), NAMEISH)),
        labels=draw(st.dictionaries(st.one_of(st.just("app"), JUNK), NAMEISH, max_size=2)),
        annotations=draw(annotations()),
        pod_specs=draw(st.lists(pod_specs(), max_size=2)),
        client_id=draw(st.one_of(st.just(""), TEXT)),
        external_job_uri=draw(st.one_of(st.just(""), TEXT)),
        required_node_labels=draw(st.dictionaries(JUNK, JUNK, max_size=1)),
    )
    if draw(st.booleans()) and not draw(st.booleans()):
        item.pod_spec.CopyFrom(draw(pod_specs()))
    return item


requests = st.builds(
    lambda queue, job_set, its: submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id=job_set, job_request_items=its
    ),
    st.one_of(st.just(QUEUE), st.just("missing"), NAMEISH),
    st.one_of(st.sampled_from(["s", "t"]), TEXT),
    st.lists(items(), max_size=4),
)


# --- the oracle -------------------------------------------------------------------------------


def answer(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """(code, details, response) of a call; the response is None unless it succeeded."""
    try:
        return grpc.StatusCode.OK, "", call(*args, timeout=30, **kwargs)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


def expected_failure(request: submit_pb2.JobSubmitRequest) -> str | None:
    """The server's own rules, run here: None when the request is acceptable."""
    try:
        validate_submission(request, CONFIG)
    except (SubmissionError, InvalidArgument) as e:
        return str(e)
    return None


def check_submission(
    api: Stubs, request: submit_pb2.JobSubmitRequest, code, details, response
) -> None:  # type: ignore[no-untyped-def]
    problem = expected_failure(request)
    if problem is not None:
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details, problem)
        assert details == problem
        assert NAMES_A_FIELD.match(details), details
        return
    if request.queue != QUEUE:
        assert code == grpc.StatusCode.NOT_FOUND, (code, details)
        assert request.queue in details
        return
    assert code == grpc.StatusCode.OK, (code, details)
    ids = [i.job_id for i in response.job_response_items]
    assert len(ids) == len(request.job_request_items)
    states = api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=ids), timeout=30)
    assert submit_pb2.UNKNOWN not in states.job_states.values()


def still_serving(api: Stubs) -> None:
    checker = health_pb2_grpc.HealthStub(api.channel)
    status = checker.Check(health_pb2.HealthCheckRequest(service="api.Submit"), timeout=10)
    assert status.status == health_pb2.HealthCheckResponse.SERVING
    assert (
        api.submit.Health(empty_pb2.Empty(), timeout=10).status
        == api.submit.Health(empty_pb2.Empty()).SERVING
    )
    # A normal submission still goes through.
    ok = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(
            queue=QUEUE, job_set_id="after", job_request_items=[good_item()]
        ),
        timeout=30,
    )
    assert len(ok.job_response_items) == 1


@pytest.fixture
def fuzz_api(database_url: str) -> Iterator[Stubs]:
    # No executor, so no scheduling is needed; a long period also keeps the scheduling loop
    # from racing the server's stop (see the report on ArmadaServer.stop).
    with (
        EmbeddedServer(database_url=database_url, scheduling_period=3600) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        api = Stubs(
            channel,
            submit_pb2_grpc.SubmitStub(channel),
            submit_pb2_grpc.QueueServiceStub(channel),
            submit_pb2_grpc.RetryPolicyServiceStub(channel),
            event_pb2_grpc.EventStub(channel),
            job_pb2_grpc.JobsStub(channel),
        )
        api.queues.CreateQueue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
        yield api


# --- typed requests ---------------------------------------------------------------------------


@pytest.mark.slow
def test_generated_submissions(fuzz_api: Stubs) -> None:
    @FUZZ
    @given(request=requests)
    def property_(request: submit_pb2.JobSubmitRequest) -> None:
        code, details, response = answer(fuzz_api.submit.SubmitJobs, request)
        check_submission(fuzz_api, request, code, details, response)

    property_()
    still_serving(fuzz_api)


def good_item() -> submit_pb2.JobSubmitRequestItem:
    q = resource_pb2.Quantity
    main = core.Container(
        name="main",
        image="busybox",
        command=["sh", "-c", "true"],
        resources=core.ResourceRequirements(
            requests={"cpu": q(string="500m"), "memory": q(string="1Gi")},
            limits={"cpu": q(string="1"), "memory": q(string="1Gi")},
        ),
    )
    spec = core.PodSpec(
        containers=[main],
        priorityClassName="armada-default",
        terminationGracePeriodSeconds=30,
        restartPolicy="Never",
    )
    return submit_pb2.JobSubmitRequestItem(
        priority=1,
        namespace="default",
        pod_specs=[spec],
        annotations={ann.GANG_ID: "gang", ann.GANG_CARDINALITY: "2"},
    )


# (what to break, how, the field the error must name)
MUTATIONS = [
    ("queue", lambda r, v: setattr(r, "queue", v), "queue"),
    ("job set", lambda r, v: setattr(r, "job_set_id", v), "job_set_id"),
    (
        "priority",
        lambda r, v: setattr(r.job_request_items[1], "priority", -1 - abs(v) if v == v else v),
        "job_request_items[1].priority",
    ),
    (
        "cpu",
        lambda r, v: (
            r.job_request_items[1]
            .pod_specs[0]
            .containers[0]
            .resources.requests["cpu"]
            .__setattr__("string", v)
        ),
        "job_request_items[1].pod_specs[0].containers[0].resources.requests[cpu]",
    ),
    (
        "memory limit",
        lambda r, v: (
            r.job_request_items[0]
            .pod_specs[0]
            .containers[0]
            .resources.limits["memory"]
            .__setattr__("string", v)
        ),
        "job_request_items[0].pod_specs[0].containers[0].resources.limits[memory]",
    ),
    (
        "gang cardinality",
        lambda r, v: r.job_request_items[1].annotations.__setitem__(ann.GANG_CARDINALITY, v),
        "job_request_items[1].annotations",
    ),
    (
        "gang minimum",
        lambda r, v: r.job_request_items[0].annotations.__setitem__(
            ann.GANG_MINIMUM_CARDINALITY, v
        ),
        "job_request_items[0].annotations",
    ),
    (
        "container name",
        lambda r, v: setattr(r.job_request_items[0].pod_specs[0].containers[0], "name", v),
        "job_request_items[0].pod_specs[0].containers[0].name",
    ),
    (
        "priority class",
        lambda r, v: setattr(r.job_request_items[1].pod_specs[0], "priorityClassName", v),
        "job_request_items[1].pod_specs[0].priorityClassName",
    ),
    (
        "grace period",
        lambda r, v: setattr(
            r.job_request_items[0].pod_specs[0], "terminationGracePeriodSeconds", v
        ),
        "job_request_items[0].pod_specs[0].terminationGracePeriodSeconds",
    ),
    (
        "namespace",
        lambda r, v: setattr(r.job_request_items[0], "namespace", v),
        "job_request_items[0].namespace",
    ),
    (
        "client id",
        lambda r, v: setattr(r.job_request_items[1], "client_id", v),
        "job_request_items[1].client_id",
    ),
]
BAD_VALUES = {
    "queue": st.sampled_from(["a b", "-x", "x" * 64, "a\x00", "é"]),
    "job set": st.sampled_from(["", "a\x00b", "x" * 1025]),
    "priority": st.one_of(
        st.floats(min_value=0.5, max_value=1e300), st.just(float("nan")), st.just(float("inf"))
    ),
    "cpu": st.sampled_from(["lots", "-1", "1e99999999", "9" * 40, "1.2.3", "", "1e40"]),
    "memory limit": st.sampled_from(["1Xi", "-5Gi", "1e-99999999", "99999999999Ei"]),
    "gang cardinality": st.sampled_from(["0", "-1", "two", "", "3"]),
    "gang minimum": st.sampled_from(["0", "3", "x"]),
    "container name": st.sampled_from(["", "Main", "a_b", "x" * 64, "-a"]),
    "priority class": st.sampled_from(["gold", "armada-preemptible", "x" * 300]),
    "grace period": st.sampled_from([-1, 301, 2**62]),
    "namespace": st.sampled_from(["Default", "a_b", "x" * 64, "-a"]),
    "client id": st.sampled_from(["c\x00", "c" * 1025]),
}


@st.composite
def mutated(draw: st.DrawFn) -> tuple[submit_pb2.JobSubmitRequest, str]:
    request = submit_pb2.JobSubmitRequest(
        queue=QUEUE, job_set_id="mutated", job_request_items=[good_item(), good_item()]
    )
    name, mutate, field = draw(st.sampled_from(MUTATIONS))
    mutate(request, draw(BAD_VALUES[name]))
    request.job_set_id = request.job_set_id and f"{request.job_set_id}-{draw(st.integers(0, 9))}"
    return request, field


def test_mutated_submissions(fuzz_api: Stubs) -> None:
    @settings(FUZZ, max_examples=60)
    @given(case=mutated())
    def property_(case: tuple[submit_pb2.JobSubmitRequest, str]) -> None:
        request, field = case
        code, details, _ = answer(fuzz_api.submit.SubmitJobs, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
        assert field in details, (field, details)
        assert NAMES_A_FIELD.match(details), details
        if (
            request.job_set_id
            and "\x00" not in request.job_set_id
            and len(request.job_set_id) <= 1024
            and request.queue == QUEUE
        ):
            code, _, _ = answer(
                lambda **kw: list(
                    fuzz_api.events.GetJobSetEvents(
                        event_pb2.JobSetRequest(
                            queue=QUEUE, id=request.job_set_id, errorIfMissing=True
                        ),
                        **kw,
                    )
                )
            )
            assert code == grpc.StatusCode.NOT_FOUND  # nothing of the request was stored

    property_()
    still_serving(fuzz_api)


# --- raw bytes --------------------------------------------------------------------------------


def _flip(data: bytes, positions: list[int], values: list[int]) -> bytes:
    out = bytearray(data)
    for p, v in zip(positions, values, strict=False):
        if out:
            out[p % len(out)] = v
    return bytes(out)


GOOD_BYTES = submit_pb2.JobSubmitRequest(
    queue=QUEUE, job_set_id="raw", job_request_items=[good_item()]
).SerializeToString()
RAW = st.one_of(
    st.binary(max_size=200),
    st.builds(
        _flip,
        st.just(GOOD_BYTES),
        st.lists(st.integers(0, 10**4), min_size=1, max_size=4),
        st.lists(st.integers(0, 255), min_size=1, max_size=4),
    ),
    st.builds(lambda n: GOOD_BYTES[:n], st.integers(0, len(GOOD_BYTES))),
)


def decodes(data: bytes) -> submit_pb2.JobSubmitRequest | None:
    try:
        return submit_pb2.JobSubmitRequest.FromString(data)
    except Exception:  # DecodeError, or a string field that is not UTF-8
        return None


def raw_submit(api: Stubs):  # type: ignore[no-untyped-def]
    return api.channel.unary_unary(
        "/api.Submit/SubmitJobs", request_serializer=None, response_deserializer=None
    )


def test_raw_bytes_that_decode(fuzz_api: Stubs) -> None:
    send = raw_submit(fuzz_api)

    @FUZZ
    @given(data=RAW)
    def property_(data: bytes) -> None:
        request = decodes(data)
        assume(request is not None)
        code, details, response = answer(send, data)
        if response is not None:
            response = submit_pb2.JobSubmitResponse.FromString(response)
        check_submission(fuzz_api, request, code, details, response)

    property_()
    still_serving(fuzz_api)


def test_raw_bytes_that_do_not_decode(fuzz_api: Stubs) -> None:
    send = raw_submit(fuzz_api)

    @settings(FUZZ, max_examples=40)
    @given(data=RAW)
    def property_(data: bytes) -> None:
        assume(decodes(data) is None)
        code, details, _ = answer(send, data)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)

    try:
        property_()
    finally:
        still_serving(fuzz_api)


# --- the other calls --------------------------------------------------------------------------

ID = st.one_of(st.sampled_from(["", "01m80c2ydmdr1qyavzn2rrab90", "a\x00b"]), TEXT)
IDS = st.lists(ID, max_size=3)


@st.composite
def other_calls(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    queue = draw(st.one_of(st.just(QUEUE), NAMEISH))
    job_set = draw(st.one_of(st.just("s"), TEXT))
    kind = draw(
        st.sampled_from(
            [
                "cancel",
                "cancel_set",
                "reprioritize",
                "preempt",
                "status",
                "details",
                "errors",
                "uri",
                "runs",
                "events",
                "queue",
                "get_queue",
                "policy",
                "get_policy",
                "cancel_on_queue",
            ]
        )
    )
    if kind == "cancel":
        return "CancelJobs", submit_pb2.JobCancelRequest(
            queue=queue, job_set_id=job_set, job_ids=draw(IDS), reason=draw(TEXT)
        )
    if kind == "cancel_set":
        return "CancelJobSet", submit_pb2.JobSetCancelRequest(
            queue=queue,
            job_set_id=job_set,
            filter=submit_pb2.JobSetFilter(states=draw(st.lists(st.integers(0, 12), max_size=3))),
        )
    if kind == "reprioritize":
        return "ReprioritizeJobs", submit_pb2.JobReprioritizeRequest(
            queue=queue, job_set_id=job_set, job_ids=draw(IDS), new_priority=draw(FLOAT)
        )
    if kind == "preempt":
        return "PreemptJobs", submit_pb2.JobPreemptRequest(
            queue=queue, job_set_id=job_set, job_ids=draw(IDS)
        )
    if kind == "status":
        return "GetJobStatus", job_pb2.JobStatusRequest(job_ids=draw(IDS))
    if kind == "details":
        return "GetJobDetails", job_pb2.JobDetailsRequest(
            job_ids=draw(IDS), expand_job_spec=True, expand_job_run=True
        )
    if kind == "errors":
        return "GetJobErrors", job_pb2.JobErrorsRequest(job_ids=draw(IDS))
    if kind == "uri":
        return "GetJobStatusUsingExternalJobUri", job_pb2.JobStatusUsingExternalJobUriRequest(
            queue=queue, jobset=job_set, external_job_uri=draw(TEXT)
        )
    if kind == "runs":
        return "GetJobRunDetails", job_pb2.JobRunDetailsRequest(run_ids=draw(IDS))
    if kind == "events":
        message_id = draw(st.one_of(st.integers(-5, 2**70).map(str), TEXT))
        return "GetJobSetEvents", event_pb2.JobSetRequest(
            queue=queue,
            id=job_set,
            from_message_id=message_id,
            watch=False,
            errorIfMissing=draw(st.booleans()),
        )
    if kind == "queue":
        return "CreateQueue", submit_pb2.Queue(
            name=draw(NAMEISH),
            priority_factor=draw(FLOAT),
            user_owners=draw(st.lists(TEXT, max_size=2)),
            resource_limits=draw(st.dictionaries(JUNK, FLOAT, max_size=2)),
            permissions=[
                submit_pb2.Queue.Permissions(
                    subjects=[
                        submit_pb2.Queue.Permissions.Subject(
                            kind=draw(st.sampled_from(["User", "Group", "Robot"])), name=draw(TEXT)
                        )
                    ],
                    verbs=draw(st.lists(st.sampled_from(["submit", "watch", "eat"]), max_size=2)),
                )
            ],
        )
    if kind == "get_queue":
        return "GetQueue", submit_pb2.QueueGetRequest(name=draw(TEXT))
    if kind == "policy":
        return "CreateRetryPolicy", submit_pb2.RetryPolicy(
            name=draw(TEXT), retry_limit=draw(st.integers(0, 2**32 - 1))
        )
    if kind == "get_policy":
        return "GetRetryPolicy", submit_pb2.RetryPolicyGetRequest(name=draw(TEXT))
    return "CancelOnQueue", submit_pb2.QueueCancelRequest(
        name=queue,
        priorityClasses=draw(st.lists(TEXT, max_size=2)),
        jobStates=draw(st.lists(st.integers(0, 12), max_size=2)),
    )


@pytest.mark.slow
def test_other_calls(fuzz_api: Stubs) -> None:
    stubs = {
        "CancelJobs": fuzz_api.submit,
        "CancelJobSet": fuzz_api.submit,
        "ReprioritizeJobs": fuzz_api.submit,
        "PreemptJobs": fuzz_api.submit,
        "GetJobStatus": fuzz_api.jobs,
        "GetJobDetails": fuzz_api.jobs,
        "GetJobErrors": fuzz_api.jobs,
        "GetJobStatusUsingExternalJobUri": fuzz_api.jobs,
        "GetJobRunDetails": fuzz_api.jobs,
        "GetJobSetEvents": fuzz_api.events,
        "CreateQueue": fuzz_api.queues,
        "GetQueue": fuzz_api.queues,
        "CreateRetryPolicy": fuzz_api.policies,
        "GetRetryPolicy": fuzz_api.policies,
        "CancelOnQueue": fuzz_api.queues,
    }

    @FUZZ
    @given(call=other_calls())
    def property_(call) -> None:  # type: ignore[no-untyped-def]
        method, request = call
        stub_method = getattr(stubs[method], method)
        if method == "GetJobSetEvents":
            code, details, _ = answer(lambda **kw: list(stub_method(request, **kw)))
        else:
            code, details, _ = answer(stub_method, request)
        assert code == grpc.StatusCode.OK or code in CLIENT_ERRORS, (method, code, details)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            assert details and "SQL" not in details, details

    property_()
    still_serving(fuzz_api)
