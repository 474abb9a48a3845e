"""api.TaskJobs.GetLiveTaskJobs, the extension the task reconciler lists jobs through: live jobs
with an orchestrator's external job URI, their annotations, and only queues the caller may
watch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from armada_core.api import submit_pb2, submit_pb2_grpc, tasks_pb2, tasks_pb2_grpc
from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig
from armada_server.config import ServerConfig

from ..jobs.factories import item
from .conftest import Stubs
from .test_auth import ALICE, BOB, CAROL


def submit(api: Stubs, uri: str, *, queue: str = "q", **annotations: str) -> str:
    job = item()
    job.external_job_uri = uri
    job.annotations.update(annotations)
    request = submit_pb2.JobSubmitRequest(queue=queue, job_set_id="s", job_request_items=[job])
    [answer] = api.submit.SubmitJobs(request).job_response_items
    return answer.job_id


def live(api: Stubs, **request: str) -> dict[str, tasks_pb2.LiveTaskJob]:
    stub = tasks_pb2_grpc.TaskJobsStub(api.channel)
    answer = stub.GetLiveTaskJobs(tasks_pb2.LiveTaskJobsRequest(**request))
    return {j.job_id: j for j in answer.jobs}


def test_lists_live_jobs_of_the_orchestrator_with_their_annotations(api: Stubs, queue: str) -> None:
    airflow = submit(api, "airflow://d/r/t/-1", **{"armadaproject.io/task-attempt": "0"})
    prefect = submit(api, "prefect://flow-run-1")
    submit(api, "")  # no task: never listed
    submit(api, "airflowish://x")  # another orchestrator whose name starts alike
    api.queues.CreateQueue(submit_pb2.Queue(name="other", priority_factor=1))
    elsewhere = submit(api, "airflow://d/r/u/-1", queue="other")

    found = live(api, orchestrator="airflow")
    assert list(found) == [airflow, elsewhere]
    job = found[airflow]
    assert (job.queue, job.jobset, job.state) == ("q", "s", submit_pb2.QUEUED)
    assert job.external_job_uri == "airflow://d/r/t/-1"
    assert job.annotations["armadaproject.io/task-attempt"] == "0"
    assert list(live(api, queue="q", orchestrator="airflow")) == [airflow]
    assert set(live(api, queue="q")) >= {airflow, prefect}


def test_ended_jobs_are_not_listed(api: Stubs, queue: str) -> None:
    cancelled = submit(api, "airflow://d/r/t/-1")
    kept = submit(api, "airflow://d/r/t2/-1")
    api.submit.CancelJobs(
        submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[cancelled])
    )
    assert list(live(api, orchestrator="airflow")) == [kept]


def test_a_prefix_is_matched_literally(api: Stubs, queue: str) -> None:
    """LIKE's wildcards in the orchestrator name are refused, and nothing else matches."""
    submit(api, "air_low://x")
    with pytest.raises(grpc.RpcError) as e:
        live(api, orchestrator="air_low")
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "orchestrator" in (e.value.details() or "")
    assert live(api, orchestrator="air-low") == {}


def test_a_missing_queue_is_not_found(api: Stubs, queue: str) -> None:
    with pytest.raises(grpc.RpcError) as e:
        live(api, queue="nope")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    auth = AuthConfig.from_mapping(
        {
            "basic": {
                "users": {
                    "alice": {"password": "a-pw"},
                    "bob": {"password": "b-pw"},
                    "carol": {"password": "c-pw"},
                }
            },
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


def test_every_queue_means_the_queues_the_caller_may_watch(auth_server: EmbeddedServer) -> None:
    channel = grpc.insecure_channel(auth_server.address)
    queues = submit_pb2_grpc.QueueServiceStub(channel)
    submit = submit_pb2_grpc.SubmitStub(channel)
    jobs = tasks_pb2_grpc.TaskJobsStub(channel)
    watch = submit_pb2.Queue.Permissions(
        subjects=[submit_pb2.Queue.Permissions.Subject(kind="User", name="bob")], verbs=["watch"]
    )
    queues.CreateQueue(submit_pb2.Queue(name="seen", permissions=[watch]), metadata=ALICE)
    queues.CreateQueue(submit_pb2.Queue(name="hidden"), metadata=ALICE)
    ids = {}
    for queue in ("seen", "hidden"):
        job = item()
        job.external_job_uri = f"dagster://{queue}"
        request = submit_pb2.JobSubmitRequest(queue=queue, job_set_id="s", job_request_items=[job])
        ids[queue] = submit.SubmitJobs(request, metadata=ALICE).job_response_items[0].job_id

    def listed(who: list[tuple[str, str]]) -> set[str]:
        answer = jobs.GetLiveTaskJobs(
            tasks_pb2.LiveTaskJobsRequest(orchestrator="dagster"), metadata=who
        )
        return {j.job_id for j in answer.jobs}

    assert listed(ALICE) == set(ids.values())
    assert listed(BOB) == {ids["seen"]}
    assert listed(CAROL) == set()
    channel.close()
