"""Submission validation: defaults, and a clear message for each rejection."""

from __future__ import annotations

import re

import pytest

from armada_core.api import submit_pb2
from armada_core.jobs import (
    SubmissionConfig,
    SubmissionError,
    job_from_item,
    submission,
    validate_request,
)
from armada_core.jobs import annotations as ann
from armada_core.jobs.submission import MAX_JOB_BYTES

from .factories import T0, container, item, request

CONFIG = SubmissionConfig(max_job_resources={"cpu": "16", "nvidia.com/gpu": "8"})


def gang(
    gang_id: str = "g", cardinality: int = 2, minimum: int | None = None, label: str = ""
) -> dict[str, str]:
    out = {ann.GANG_ID: gang_id, ann.GANG_CARDINALITY: str(cardinality)}
    if minimum is not None:
        out[ann.GANG_MINIMUM_CARDINALITY] = str(minimum)
    if label:
        out[ann.GANG_NODE_UNIFORMITY_LABEL] = label
    return out


def role(name: str, minimum: int | str) -> dict[str, str]:
    return {ann.GANG_ROLE: name, ann.GANG_ROLE_MINIMUM: str(minimum)}


def test_pod_group_members_are_accepted() -> None:
    members = [item(annotations={**gang(cardinality=3), **role("coord", 1)})] + [
        item(annotations={**gang(cardinality=3), **role("worker", 1)}) for _ in range(2)
    ]
    assert len(validate_request(request(*members), CONFIG)) == 3


def test_defaults_are_applied_to_copies() -> None:
    original = item({"containers": [container()]})
    req = request(original)
    [out] = validate_request(req, CONFIG)
    spec = out.pod_specs[0]
    assert spec.priorityClassName == "armada-default"
    assert spec.terminationGracePeriodSeconds == 1
    assert spec.activeDeadlineSeconds == 7 * 24 * 3600
    assert spec.restartPolicy == "Never"
    assert not original.pod_specs[0].HasField("terminationGracePeriodSeconds")


@pytest.mark.parametrize(("grace", "expected"), [(0, 1), (1, 1), (30, 30), (300, 300)])
def test_grace_period_zero_becomes_one_second(grace: int, expected: int) -> None:
    [out] = validate_request(
        request(item({"containers": [container()], "terminationGracePeriodSeconds": str(grace)})),
        CONFIG,
    )
    assert out.pod_specs[0].terminationGracePeriodSeconds == expected


def test_explicit_deadline_is_kept_and_default_can_be_disabled() -> None:
    [out] = validate_request(
        request(item({"containers": [container()], "activeDeadlineSeconds": "60"})), CONFIG
    )
    assert out.pod_specs[0].activeDeadlineSeconds == 60
    no_default = SubmissionConfig(default_active_deadline_seconds=None)
    [out] = validate_request(request(item()), no_default)
    assert not out.pod_specs[0].HasField("activeDeadlineSeconds")


def test_deprecated_pod_spec_and_required_node_labels_are_carried_over() -> None:
    old = item()
    old.pod_spec.CopyFrom(old.pod_specs[0])
    del old.pod_specs[:]
    old.required_node_labels["zone"] = "a"
    [out] = validate_request(request(old), CONFIG)
    assert len(out.pod_specs) == 1 and not out.HasField("pod_spec")
    assert out.pod_specs[0].nodeSelector["zone"] == "a"


def test_gang_members_that_agree_are_accepted() -> None:
    members = [item(annotations=gang(minimum=1, label="rack")) for _ in range(2)]
    assert len(validate_request(request(*members), CONFIG)) == 2


REJECTIONS = [
    ("empty queue", request(item(), queue=""), "queue: must not be empty"),
    ("bad queue", request(item(), queue="a b"), "queue: 'a b' is not a valid name"),
    ("empty job set", request(item(), job_set=""), "job_set_id: must not be empty"),
    (
        "no items",
        request(item()).__class__(queue="q", job_set_id="s"),
        "job_request_items: must contain at least one job",
    ),
    (
        "negative priority",
        request(item(priority=-1)),
        "job_request_items[0].priority: must be a non-negative number",
    ),
    (
        "two pod specs",
        request(item(pod_specs=[{"containers": [container()]}] * 2)),
        "job_request_items[0].pod_specs: exactly one pod spec is supported, got 2",
    ),
    (
        "bad namespace",
        request(item(namespace="Bad_NS")),
        "job_request_items[0].namespace: 'Bad_NS' is not a valid Kubernetes namespace",
    ),
    (
        "bad label value",
        request(item(labels={"team": "a b"})),
        "job_request_items[0].labels[team]: 'a b' is not a valid label value",
    ),
    (
        "bad annotation key",
        request(item(annotations={"bad key": "x"})),
        "job_request_items[0].annotations[bad key]: is not a valid key",
    ),
    (
        "unknown priority class",
        request(item({"containers": [container()], "priorityClassName": "urgent"})),
        "job_request_items[0].pod_specs[0].priorityClassName: unknown priority class 'urgent'",
    ),
    (
        "grace period too long",
        request(item({"containers": [container()], "terminationGracePeriodSeconds": "301"})),
        "terminationGracePeriodSeconds: 301 s is above the maximum of 300 s",
    ),
    (
        "negative grace period",
        request(item({"containers": [container()], "terminationGracePeriodSeconds": "-1"})),
        "terminationGracePeriodSeconds: must be between 1 and 300 seconds, got -1",
    ),
    (
        "zero deadline",
        request(item({"containers": [container()], "activeDeadlineSeconds": "0"})),
        "job_request_items[0].pod_specs[0].activeDeadlineSeconds: must be positive",
    ),
    (
        "restart policy",
        request(item({"containers": [container()], "restartPolicy": "Always"})),
        "restartPolicy: Armada jobs never restart in place; use Never, got 'Always'",
    ),
    (
        "no containers",
        request(item({"containers": []})),
        "job_request_items[0].pod_specs[0].containers: a pod needs at least one container",
    ),
    (
        "bad container name",
        request(item({"containers": [container("Main")]})),
        "job_request_items[0].pod_specs[0].containers[0].name: 'Main' is not a valid",
    ),
    (
        "duplicate container",
        request(item({"containers": [container(), container()]})),
        "containers[1].name: container name 'main' is used twice",
    ),
    (
        "duplicate with init",
        request(item({"containers": [container()], "initContainers": [container()]})),
        "pod_specs[0].containers[0].name: container name 'main' is used twice",
    ),
    (
        "bad quantity",
        request(item({"containers": [container(cpu="lots")]})),
        "containers[0].resources.requests[cpu]: 'lots' is not a valid quantity",
    ),
    (
        "no memory",
        request(
            item(
                {
                    "containers": [
                        {"name": "main", "resources": {"requests": {"cpu": {"string": "1"}}}}
                    ]
                }
            )
        ),
        "containers[0].resources.requests: must request memory",
    ),
    (
        "request above limit",
        request(
            item(
                {
                    "containers": [
                        {
                            "name": "main",
                            "resources": {
                                "requests": {"cpu": {"string": "2"}, "memory": {"string": "1Gi"}},
                                "limits": {"cpu": {"string": "1"}},
                            },
                        }
                    ]
                }
            )
        ),
        "containers[0].resources.requests[cpu]: is greater than its limit",
    ),
    (
        "over max resources",
        request(item({"containers": [container(cpu="10"), container("b", cpu="7")]})),
        "the job requests more cpu than the maximum of 16 per job",
    ),
    (
        "bad lifetime",
        request(item(annotations={ann.LIFETIME: "soon"})),
        "annotations[armadaproject.io/lifetimeSeconds]: must be a positive number of seconds",
    ),
    (
        "bad at-most-once",
        request(item(annotations={ann.AT_MOST_ONCE: "yes"})),
        "annotations[armadaproject.io/atMostOnce]: must be true or false, got 'yes'",
    ),
    (
        "gang without cardinality",
        request(item(annotations={ann.GANG_ID: "g"})),
        "armadaproject.io/gangCardinality is required when armadaproject.io/gangId is set",
    ),
    (
        "cardinality not a number",
        request(item(annotations={**gang(), ann.GANG_CARDINALITY: "x"})),
        "armadaproject.io/gangCardinality must be a positive integer, got 'x'",
    ),
    (
        "minimum above cardinality",
        request(item(annotations=gang(cardinality=2, minimum=3))),
        "gangMinimumCardinality (3) is greater than armadaproject.io/gangCardinality (2)",
    ),
    (
        "cardinality without gang",
        request(item(annotations={ann.GANG_CARDINALITY: "2"})),
        "armadaproject.io/gangCardinality is set but armadaproject.io/gangId is not",
    ),
    (
        "members disagree on cardinality",
        request(item(annotations=gang(cardinality=2)), item(annotations=gang(cardinality=3))),
        "job_request_items[1].annotations[armadaproject.io/gangCardinality]: 3 differs from "
        "job_request_items[0] (2) in gang 'g'",
    ),
    (
        "members disagree on uniformity",
        request(item(annotations=gang(label="rack")), item(annotations=gang(label="zone"))),
        "gangNodeUniformityLabel]: 'zone' differs from job_request_items[0] ('rack')",
    ),
    (
        "max hops not a number",
        request(item(annotations={**gang(), ann.GANG_MAX_HOPS: "two"})),
        "armadaproject.io/gangMaxHops must be a whole number of hops (0 or more), got 'two'",
    ),
    (
        "negative max hops",
        request(item(annotations={**gang(), ann.GANG_MAX_HOPS: "-2"})),
        "armadaproject.io/gangMaxHops must be a whole number of hops (0 or more), got '-2'",
    ),
    (
        "max hops as an exponent",
        request(item(annotations={**gang(), ann.GANG_MAX_HOPS: "2e3"})),
        "armadaproject.io/gangMaxHops must be a whole number of hops (0 or more), got '2e3'",
    ),
    (
        "huge max hops",
        request(item(annotations={**gang(), ann.GANG_MAX_HOPS: "100000"})),
        "annotations[armadaproject.io/gangMaxHops]: must be a whole number of network hops "
        "between 0 (one node) and 1000, got '100000'",
    ),
    (
        "max hops without gang",
        request(item(annotations={ann.GANG_MAX_HOPS: "2"})),
        "armadaproject.io/gangMaxHops is set but armadaproject.io/gangId is not",
    ),
    (
        "members disagree on max hops",
        request(
            item(annotations={**gang(), ann.GANG_MAX_HOPS: "2"}),
            item(annotations={**gang(), ann.GANG_MAX_HOPS: "4"}),
        ),
        "job_request_items[1].annotations[armadaproject.io/gangMaxHops]: 4 differs from "
        "job_request_items[0] (2) in gang 'g'",
    ),
    (
        "members disagree on priority class",
        request(
            item(annotations=gang()),
            item(
                {"containers": [container()], "priorityClassName": "armada-preemptible"},
                annotations=gang(),
            ),
        ),
        "job_request_items[1].pod_specs[0].priorityClassName: 'armada-preemptible' differs",
    ),
    (
        "role without its minimum",
        request(item(annotations={**gang(), ann.GANG_ROLE: "worker"})),
        "armadaproject.io/gangRoleMinimum is required when armadaproject.io/gangRole is set",
    ),
    (
        "role minimum without role",
        request(item(annotations={**gang(), ann.GANG_ROLE_MINIMUM: "1"})),
        "armadaproject.io/gangRoleMinimum is set but armadaproject.io/gangRole is not",
    ),
    (
        "role with the gang's minimum cardinality",
        request(item(annotations={**gang(minimum=1), **role("worker", 1)})),
        "armadaproject.io/gangMinimumCardinality cannot be combined with armadaproject.io/gangRole",
    ),
    (
        "role minimum not a number",
        request(item(annotations={**gang(), **role("w", "x")})),
        "armadaproject.io/gangRoleMinimum must be a positive integer, got 'x'",
    ),
    (
        "role max hops not a number",
        request(item(annotations={**gang(), **role("w", 1), ann.GANG_ROLE_MAX_HOPS: "near"})),
        "armadaproject.io/gangRoleMaxHops must be a whole number of hops (0 or more), got 'near'",
    ),
    (
        "negative role max hops",
        request(item(annotations={**gang(), **role("w", 1), ann.GANG_ROLE_MAX_HOPS: "-2"})),
        "armadaproject.io/gangRoleMaxHops must be a whole number of hops (0 or more), got '-2'",
    ),
    (
        "huge role max hops",
        request(item(annotations={**gang(), **role("w", 1), ann.GANG_ROLE_MAX_HOPS: "100000"})),
        "annotations[armadaproject.io/gangRoleMaxHops]: must be a whole number of network hops "
        "between 0 (one node) and 1000, got '100000'",
    ),
    (
        "role max hops without a role",
        request(item(annotations={**gang(), ann.GANG_ROLE_MAX_HOPS: "2"})),
        "armadaproject.io/gangRoleMaxHops is set but armadaproject.io/gangRole is not",
    ),
    (
        "role max hops without gang",
        request(item(annotations={ann.GANG_ROLE_MAX_HOPS: "2"})),
        "armadaproject.io/gangRoleMaxHops is set but armadaproject.io/gangId is not",
    ),
    (
        "members of a role disagree on its max hops",
        request(
            item(annotations={**gang(cardinality=2), **role("w", 1), ann.GANG_ROLE_MAX_HOPS: "2"}),
            item(annotations={**gang(cardinality=2), **role("w", 1)}),
        ),
        "job_request_items[1].annotations[armadaproject.io/gangRoleMaxHops]: None differs from "
        "job_request_items[0] (2) for role 'w' of gang 'g'",
    ),
    (
        "members of a role disagree on its minimum",
        request(
            item(annotations={**gang(cardinality=3), **role("w", 1)}),
            item(annotations={**gang(cardinality=3), **role("w", 2)}),
        ),
        "job_request_items[1].annotations[armadaproject.io/gangRoleMinimum]: 2 differs from "
        "job_request_items[0] (1) for role 'w' of gang 'g'",
    ),
    (
        "pod group member without a role",
        request(item(annotations={**gang(), **role("w", 1)}), item(annotations=gang())),
        "job_request_items[1].annotations[armadaproject.io/gangRole]: missing: every member of "
        "pod group 'g' names its role",
    ),
    (
        "role with fewer members than its minimum",
        request(
            item(annotations={**gang(cardinality=3), **role("c", 1)}),
            item(annotations={**gang(cardinality=3), **role("w", 2)}),
            item(annotations={**gang(cardinality=3), **role("c", 1)}),
        ),
        "role 'w' of gang 'g' has 1 members, fewer than its minimum 2",
    ),
    (
        "too many members",
        request(*[item(annotations=gang(cardinality=2)) for _ in range(3)]),
        "gang 'g' has 3 members but armadaproject.io/gangCardinality is 2",
    ),
    # What storage needs: both backends refuse the same requests.
    (
        "NUL in job set",
        request(item(), job_set="a\x00b"),
        "job_set_id: must not contain NUL characters",
    ),
    (
        "long job set",
        request(item(), job_set="s" * 1025),
        "job_set_id: must be at most 1024 characters, got 1025",
    ),
    (
        "long client id",
        request(item(), item(client_id="c" * 1025)),
        "job_request_items[1].client_id: must be at most 1024 characters",
    ),
    (
        "NUL in external uri",
        request(item(external_job_uri="x\x00")),
        "job_request_items[0].external_job_uri: must not contain NUL characters",
    ),
    (
        "long gang id",
        request(item(annotations=gang(gang_id="g" * 1025, cardinality=1))),
        "annotations[armadaproject.io/gangId]: must be at most 1024 characters",
    ),
    (
        "long quantity",
        request(item({"containers": [container(memory="1" * 65)]})),
        "requests[memory]: '" + "1" * 65 + "' is not a quantity this server accepts",
    ),
    (
        "huge exponent",
        request(item({"containers": [container(memory="1e99999999")]})),
        "requests[memory]: '1e99999999' is not a quantity this server accepts (at most 64 "
        "characters, exponents up to 30)",
    ),
    (
        "quantity out of range",
        request(item({"containers": [container(memory="1e19")]})),
        "requests[memory]: '1e19' is out of range (a quantity is at most 2^63-1)",
    ),
    (
        "total out of range",
        request(item({"containers": [container(memory="600Ti"), container("b", memory="600Ti")]})),
        "job_request_items[0].pod_specs[0].containers: the pod requests more memory than the "
        "maximum of 1Pi in total",
    ),
    (
        "second item with a shared spec",
        request(item(), item(priority=-2)),
        "job_request_items[1].priority: must be a non-negative number",
    ),
]


@pytest.mark.parametrize(
    ("req", "message"), [(r, m) for _, r, m in REJECTIONS], ids=[name for name, _, _ in REJECTIONS]
)
def test_rejections_name_the_item_and_field(req, message: str) -> None:
    with pytest.raises(SubmissionError) as raised:
        validate_request(req, CONFIG)
    assert message in str(raised.value)


def test_stored_job_carries_requests_and_external_uri() -> None:
    it = item(
        {
            "containers": [container(cpu="500m", memory="1Gi"), container("b", cpu="2")],
            "initContainers": [container("init", cpu="4", memory="512Mi")],
        },
        external_job_uri="airflow://x",
        client_id="c1",
    )
    [valid] = validate_request(request(it), CONFIG)
    job = job_from_item(valid, job_id="01abc", queue="q", job_set_id="s", owner="alice", now=T0)
    requests = {k: v.string for k, v in job.scheduling_resource_requirements.requests.items()}
    assert requests == {"cpu": "4000m", "memory": str(2 * 2**30)}
    assert job.annotations[ann.EXTERNAL_JOB_URI] == "airflow://x"
    assert job.client_id == "c1" and job.owner == "alice"
    assert job.created.ToSeconds() == int(T0.timestamp())


def test_items_sharing_a_spec_get_their_own_copies() -> None:
    first, second = validate_request(request(item(), item(client_id="b")), CONFIG)
    assert first.pod_specs[0] == second.pod_specs[0]
    assert first.pod_specs[0].terminationGracePeriodSeconds == 1
    first.pod_specs[0].containers[0].name = "changed"
    assert second.pod_specs[0].containers[0].name == "main"
    assert second.client_id == "b"


def test_a_shared_spec_is_checked_against_each_items_own_fields() -> None:
    # The same pod spec, once valid on its own and once with a node selector merged in from
    # the deprecated required_node_labels: the second is a different spec.
    plain = item()
    labelled = item(required_node_labels={"zone": "b"})
    out_plain, out_labelled = validate_request(request(plain, labelled), CONFIG)
    assert "zone" not in out_plain.pod_specs[0].nodeSelector
    assert out_labelled.pod_specs[0].nodeSelector["zone"] == "b"


def test_a_spec_checked_by_an_earlier_request_is_checked_again_under_another_config() -> None:
    pod = {"containers": [container()], "priorityClassName": "armada-preemptible"}
    [first] = validate_request(request(item(pod)), CONFIG)
    # The same spec, now that the server no longer knows its priority class.
    narrower = SubmissionConfig(priority_classes=frozenset({"armada-default"}))
    with pytest.raises(SubmissionError, match="unknown priority class"):
        validate_request(request(item(pod)), narrower)
    # And under an equal config (another object), checked as before.
    [again] = validate_request(request(item(pod)), SubmissionConfig(**CONFIG.__dict__))
    assert again.pod_specs[0] == first.pod_specs[0]


def test_a_spec_checked_by_an_earlier_request_gets_that_requests_defaults_unchanged() -> None:
    [first] = validate_request(request(item()), CONFIG)
    # The caller changes the job it got back; a later request of the same spec is unaffected.
    first.pod_specs[0].terminationGracePeriodSeconds = 99
    first.pod_specs[0].containers[0].name = "changed"
    [second] = validate_request(request(item(client_id="b")), CONFIG)
    assert second.pod_specs[0].terminationGracePeriodSeconds == 1
    assert second.pod_specs[0].containers[0].name == "main"


def test_a_large_spec_is_checked_once_per_request_and_not_kept_for_others() -> None:
    big = {"containers": [container(args=["x" * (20 * 1024)])]}
    first, second = validate_request(request(item(big), item(big, client_id="b")), CONFIG)
    assert first.pod_specs[0] == second.pod_specs[0]
    recent = submission._recent
    assert recent is not None
    assert all(len(key) <= 16 * 1024 for key in recent[1])


def test_items_alike_but_for_their_client_ids_come_out_as_each_would_alone() -> None:
    pod = {"containers": [container()], "terminationGracePeriodSeconds": 0}
    items = [item(pod, client_id=c, required_node_labels={"zone": "b"}) for c in "abc"]
    items.append(item(pod, required_node_labels={"zone": "b"}))  # no client id at all
    together = validate_request(request(*items), CONFIG)
    alone = [validate_request(request(i), CONFIG)[0] for i in items]
    assert together == alone
    together[0].pod_specs[0].containers[0].name = "changed"  # copies of their own
    assert together[1].pod_specs[0].containers[0].name == "main"


@pytest.mark.parametrize(
    ("client_id", "message"),
    [
        ("x\x00", "job_request_items[2].client_id: must not contain NUL characters"),
        ("c" * 1025, "job_request_items[2].client_id: must be at most 1024 characters"),
    ],
)
def test_an_item_alike_an_earlier_one_is_refused_for_its_own_client_id(
    client_id: str, message: str
) -> None:
    alike = [item(client_id="a"), item(client_id="b"), item(client_id=client_id)]
    with pytest.raises(SubmissionError, match=re.escape(message)):
        validate_request(request(*alike), CONFIG)


def test_an_item_alike_an_earlier_one_is_refused_when_its_client_id_makes_it_too_large() -> None:
    def sized(args: str, client_id: str) -> submit_pb2.JobSubmitRequestItem:
        return item({"containers": [container(args=[args])]}, client_id=client_id)

    # The first item is just under the limit; its copy with a longer client id is over it.
    room = MAX_JOB_BYTES - sized("", "a").ByteSize()
    fits, over = sized("x" * (room - 10), "a"), sized("x" * (room - 10), "b" * 100)
    assert fits.ByteSize() <= MAX_JOB_BYTES < over.ByteSize()
    validate_request(request(fits), CONFIG)
    with pytest.raises(SubmissionError, match=re.escape("job_request_items[1]")):
        validate_request(request(fits, over), CONFIG)
