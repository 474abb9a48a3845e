"""Authentication and queue permissions: every RPC with no, wrong and insufficient credentials."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from google.protobuf import empty_pb2

from armada_core.api import event_pb2, job_pb2, submit_pb2, tasks_pb2, tasks_pb2_grpc
from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig
from armada_server.config import ServerConfig

from ..jobs.factories import item
from .conftest import Stubs

ISSUER = "https://issuer.test"


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def auth_server(tmp_path: Path, signing_key) -> Iterator[EmbeddedServer]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    auth = AuthConfig.from_mapping(
        {
            "basic": {
                "users": {
                    "alice": {"password": "a-pw"},
                    "bob": {"password": "b-pw"},
                    "carol": {"password": "c-pw", "groups": ["auditors"]},
                }
            },
            "tokens": [{"token": "ci-secret", "user": "ci-bot", "groups": ["ml-team"]}],
            "oidc": {"issuer": ISSUER, "jwks_file": str(jwks), "audience": "armada"},
            "admins": ["alice"],
        }
    )
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        auth=auth,
        database_url=f"sqlite:///{tmp_path / 'a.db'}",
    )
    with EmbeddedServer(config) as server:
        yield server


def basic(user: str, password: str) -> tuple[str, str]:
    return ("authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())


def bearer(token: str) -> tuple[str, str]:
    return ("authorization", f"Bearer {token}")


def oidc_token(
    key,
    *,
    sub: str = "dave",
    groups=("ml-team",),
    issuer: str = ISSUER,
    expires_in: int = 300,
    kid: str = "k1",
) -> str:
    claims = {
        "sub": sub,
        "groups": list(groups),
        "iss": issuer,
        "aud": "armada",
        "exp": int(time.time()) + expires_in,
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


ALICE = [basic("alice", "a-pw")]
BOB = [basic("bob", "b-pw")]
CAROL = [basic("carol", "c-pw")]


@pytest.fixture
def api(auth_server: EmbeddedServer) -> Iterator[Stubs]:
    from armada_core.api import event_pb2_grpc, job_pb2_grpc, submit_pb2_grpc

    channel = grpc.insecure_channel(auth_server.address)
    stubs = Stubs(
        channel,
        submit_pb2_grpc.SubmitStub(channel),
        submit_pb2_grpc.QueueServiceStub(channel),
        submit_pb2_grpc.RetryPolicyServiceStub(channel),
        event_pb2_grpc.EventStub(channel),
        job_pb2_grpc.JobsStub(channel),
    )
    # Queue "q": bob may submit and watch, the ml-team group may cancel; carol nothing.
    stubs.queues.CreateQueue(
        submit_pb2.Queue(
            name="q",
            permissions=[
                submit_pb2.Queue.Permissions(
                    subjects=[submit_pb2.Queue.Permissions.Subject(kind="User", name="bob")],
                    verbs=["submit", "watch"],
                ),
                submit_pb2.Queue.Permissions(
                    subjects=[submit_pb2.Queue.Permissions.Subject(kind="Group", name="ml-team")],
                    verbs=["cancel", "reprioritize", "preempt"],
                ),
            ],
        ),
        metadata=ALICE,
    )
    yield stubs
    channel.close()


def code(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        result = call()
        if isinstance(result, Iterator):
            list(result)
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


OK = grpc.StatusCode.OK
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED


def calls(api: Stubs) -> dict[str, tuple[Callable[[list], object], str]]:
    """RPC -> (call with metadata, who may: 'admin', a queue verb, or 'anyone')."""
    sub = submit_pb2.JobSubmitRequest(queue="q", job_set_id="s", job_request_items=[item()])
    return {
        "SubmitJobs": (lambda md: api.submit.SubmitJobs(sub, metadata=md), "submit"),
        "CancelJobs": (
            lambda md: api.submit.CancelJobs(
                submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=["x"]), metadata=md
            ),
            "cancel",
        ),
        "CancelJobSet": (
            lambda md: api.submit.CancelJobSet(
                submit_pb2.JobSetCancelRequest(queue="q", job_set_id="s"), metadata=md
            ),
            "cancel",
        ),
        "ReprioritizeJobs": (
            lambda md: api.submit.ReprioritizeJobs(
                submit_pb2.JobReprioritizeRequest(queue="q", job_set_id="s", new_priority=1),
                metadata=md,
            ),
            "reprioritize",
        ),
        "PreemptJobs": (
            lambda md: api.submit.PreemptJobs(
                submit_pb2.JobPreemptRequest(queue="q", job_set_id="s"), metadata=md
            ),
            "preempt",
        ),
        "GetJobSetEvents": (
            lambda md: api.events.GetJobSetEvents(
                event_pb2.JobSetRequest(queue="q", id="s"), metadata=md
            ),
            "watch",
        ),
        "Watch": (
            lambda md: next(
                iter(
                    api.events.Watch(
                        event_pb2.WatchRequest(queue="q", job_set_id="s"), metadata=md, timeout=0.5
                    )
                ),
                None,
            ),
            "watch",
        ),
        "CancelOnQueue": (
            lambda md: api.queues.CancelOnQueue(
                submit_pb2.QueueCancelRequest(name="q"), metadata=md
            ),
            "cancel",
        ),
        "PreemptOnQueue": (
            lambda md: api.queues.PreemptOnQueue(
                submit_pb2.QueuePreemptRequest(name="q"), metadata=md
            ),
            "preempt",
        ),
        "CreateQueue": (
            lambda md: api.queues.CreateQueue(submit_pb2.Queue(name="new"), metadata=md),
            "admin",
        ),
        "UpdateQueue": (
            lambda md: api.queues.UpdateQueue(submit_pb2.Queue(name="q"), metadata=md),
            "admin",
        ),
        "CordonQueue": (
            lambda md: api.queues.CordonQueue(submit_pb2.QueueCordonRequest(name="q"), metadata=md),
            "admin",
        ),
        "UncordonQueue": (
            lambda md: api.queues.UncordonQueue(
                submit_pb2.QueueUncordonRequest(name="q"), metadata=md
            ),
            "admin",
        ),
        "CreateRetryPolicy": (
            lambda md: api.policies.CreateRetryPolicy(
                submit_pb2.RetryPolicy(name="p"), metadata=md
            ),
            "admin",
        ),
        "GetQueue": (
            lambda md: api.queues.GetQueue(submit_pb2.QueueGetRequest(name="q"), metadata=md),
            "anyone",
        ),
        "GetQueues": (
            lambda md: api.queues.GetQueues(submit_pb2.StreamingQueueGetRequest(), metadata=md),
            "anyone",
        ),
        "GetRetryPolicies": (
            lambda md: api.policies.GetRetryPolicies(
                submit_pb2.RetryPolicyListRequest(), metadata=md
            ),
            "anyone",
        ),
        "GetJobStatus": (
            lambda md: api.jobs.GetJobStatus(job_pb2.JobStatusRequest(job_ids=["x"]), metadata=md),
            "anyone",
        ),
        "GetJobDetails": (
            lambda md: api.jobs.GetJobDetails(
                job_pb2.JobDetailsRequest(job_ids=["x"]), metadata=md
            ),
            "anyone",
        ),
        "GetJobErrors": (
            lambda md: api.jobs.GetJobErrors(job_pb2.JobErrorsRequest(job_ids=["x"]), metadata=md),
            "anyone",
        ),
        "GetActiveQueues": (
            lambda md: api.jobs.GetActiveQueues(job_pb2.GetActiveQueuesRequest(), metadata=md),
            "anyone",
        ),
        "GetLiveTaskJobs": (
            lambda md: tasks_pb2_grpc.TaskJobsStub(api.channel).GetLiveTaskJobs(
                tasks_pb2.LiveTaskJobsRequest(queue="q"), metadata=md
            ),
            "watch",
        ),
    }


RPCS = [
    "SubmitJobs",
    "CancelJobs",
    "CancelJobSet",
    "ReprioritizeJobs",
    "PreemptJobs",
    "GetJobSetEvents",
    "Watch",
    "CancelOnQueue",
    "PreemptOnQueue",
    "CreateQueue",
    "UpdateQueue",
    "CordonQueue",
    "UncordonQueue",
    "CreateRetryPolicy",
    "GetQueue",
    "GetQueues",
    "GetRetryPolicies",
    "GetJobStatus",
    "GetJobDetails",
    "GetJobErrors",
    "GetActiveQueues",
    "GetLiveTaskJobs",
]


def outcome(call: Callable[[list], object], md: list) -> grpc.StatusCode:
    status = code(lambda: call(md))
    # Watch on an empty set times out after authorising: that counts as allowed.
    return OK if status == grpc.StatusCode.DEADLINE_EXCEEDED else status


@pytest.mark.parametrize("rpc", RPCS)
def test_no_and_wrong_credentials_are_unauthenticated(api: Stubs, rpc: str) -> None:
    call, _ = calls(api)[rpc]
    assert outcome(call, []) == UNAUTH
    assert outcome(call, [basic("alice", "wrong")]) == UNAUTH
    assert outcome(call, [basic("mallory", "x")]) == UNAUTH
    assert outcome(call, [bearer("not-a-token")]) == UNAUTH
    assert outcome(call, [("authorization", "Digest abc")]) == UNAUTH


@pytest.mark.parametrize("rpc", RPCS)
def test_permissions(api: Stubs, rpc: str, signing_key) -> None:
    call, who_may = calls(api)[rpc]
    bob_may = who_may in ("anyone", "submit", "watch")
    team_may = who_may in ("anyone", "cancel", "reprioritize", "preempt")
    assert outcome(call, CAROL) == (OK if who_may == "anyone" else DENIED)
    assert outcome(call, BOB) == (OK if bob_may else DENIED)
    assert outcome(call, [bearer("ci-secret")]) == (OK if team_may else DENIED)
    assert outcome(call, [bearer(oidc_token(signing_key))]) == (OK if team_may else DENIED)
    assert outcome(call, ALICE) == OK


def test_health_needs_no_credentials(api: Stubs) -> None:
    assert api.submit.Health(empty_pb2.Empty()).status == 1
    assert api.events.Health(empty_pb2.Empty()).status == 1


@pytest.mark.parametrize(
    "token_kw",
    [
        {"issuer": "https://other.test"},
        {"expires_in": -10},
        {"kid": "unknown"},
    ],
)
def test_bad_oidc_tokens_are_refused(api: Stubs, signing_key, token_kw) -> None:
    token = oidc_token(signing_key, **token_kw)
    call, _ = calls(api)["GetJobStatus"]
    assert outcome(call, [bearer(token)]) == UNAUTH


def test_token_signed_by_another_key_is_refused(api: Stubs) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    call, _ = calls(api)["GetJobStatus"]
    assert outcome(call, [bearer(oidc_token(other))]) == UNAUTH


def test_owner_is_recorded_from_the_caller(api: Stubs) -> None:
    sub = submit_pb2.JobSubmitRequest(queue="q", job_set_id="s", job_request_items=[item()])
    [job] = api.submit.SubmitJobs(sub, metadata=BOB).job_response_items
    details = api.jobs.GetJobDetails(
        job_pb2.JobDetailsRequest(job_ids=[job.job_id], expand_job_spec=True), metadata=BOB
    )
    assert details.job_details[job.job_id].job_spec.owner == "bob"


def test_callers_arriving_together_share_one_read_of_their_queue(tmp_path: Path) -> None:
    """Permission checks read the queue: callers that arrive while a read of it is in flight
    share that read (a thousand watchers starting at once made a thousand), a caller that
    goes away leaves the others' read alone, an error reaches every caller, and the next
    caller after a read reads again."""
    with EmbeddedServer(database_url=f"sqlite:///{tmp_path / 'db'}") as server:
        ctx = server.server.context
        assert ctx is not None
        ctx.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        real = ctx.queues.get_queue
        gate = threading.Event()
        reads: list[str] = []

        def gated(name: str) -> submit_pb2.Queue:
            reads.append(name)
            gate.wait(30)
            return real(name)

        ctx.queues.get_queue = gated  # type: ignore[method-assign]

        async def together() -> None:
            callers = [asyncio.ensure_future(ctx._stored_queue("q")) for _ in range(100)]
            missing = [asyncio.ensure_future(ctx._stored_queue("ghost")) for _ in range(3)]
            await asyncio.sleep(0.2)
            callers[0].cancel()  # gone: the other 99 still get the read
            gate.set()
            got = await asyncio.gather(*callers[1:])
            assert {q.name for q in got} == {"q"} and reads == ["q", "ghost"]
            for one in missing:
                with pytest.raises(Exception, match="ghost"):
                    await one
            assert (await ctx._stored_queue("q")).name == "q"
            assert reads == ["q", "ghost", "q"]

        asyncio.run_coroutine_threadsafe(together(), server._loop).result(60)
