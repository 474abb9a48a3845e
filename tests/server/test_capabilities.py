"""Executor capabilities: a job no executor of its pool can honour is refused at submission.

Executors declare over the executor protocol which pod-spec fields they cannot honour; the
server stores the declaration and refuses, naming the field and the pool, a job every executor
of its pool would have to ignore part of. Executors here speak the protocol over real gRPC to a
real server on SQLite and PostgreSQL; the in-process local executor is covered too.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from armada_core.api import executor_pb2, executor_pb2_grpc, submit_pb2
from armada_core.api.k8s import core_v1_pb2 as k8s
from armada_core.client import ArmadaClient, job_item
from armada_core.jobs import JobState
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig
from armada_server.executors.capabilities import (
    full_capabilities,
    local_capabilities,
    unhonoured,
)
from armada_server.executors.local import ignored_fields
from armada_server.services import capabilities as index_module

from ..executors.helpers import memory_limit, pod, sh

LOCAL = list(local_capabilities().unsupported_pod_fields)


# --- which fields of a spec a declaration names ------------------------------------------------


def test_the_local_declaration_names_what_the_local_executor_would_ignore() -> None:
    main = sh(
        "main",
        "true",
        volumeMounts=[k8s.VolumeMount(name="data", mountPath="/d")],
        lifecycle=k8s.Lifecycle(preStop=k8s.LifecycleHandler()),
        tty=True,
    )
    main.resources.limits["ephemeral-storage"].string = "1Gi"
    setup = sh("setup", "true", securityContext=k8s.SecurityContext(runAsUser=1000))
    spec = pod(main, init=[setup])
    spec.volumes.append(k8s.Volume(name="data"))
    spec.hostPID = True
    found = unhonoured(spec, LOCAL)
    expected = [
        f.replace(".ephemeral-storage", "[ephemeral-storage]") for f in ignored_fields(spec)
    ]
    assert sorted(found) == sorted(expected)
    assert found[0] == "volumes"


def test_a_plain_batch_pod_is_honoured_everywhere() -> None:
    spec = pod(
        sh("main", "true", resources=memory_limit("1Gi"), workingDir="out", env={"A": "b"}),
        init=[sh("setup", "true")],
        deadline=60,
    )
    spec.hostPID = False  # set but false: nothing to honour
    assert unhonoured(spec, LOCAL) == []
    assert unhonoured(spec, full_capabilities().unsupported_pod_fields) == []


def test_paths_reach_into_messages_maps_and_lists() -> None:
    c = sh("main", "true", securityContext=k8s.SecurityContext(runAsUser=0))
    c.resources.limits["nvidia.com/gpu"].string = "1"
    spec = pod(c, sh("side", "true"))
    spec.securityContext.runAsUser = 1000
    assert unhonoured(
        spec,
        [
            "securityContext.runAsUser",
            "securityContext.fsGroup",
            "containers.securityContext.runAsUser",
            "containers.resources.limits[nvidia.com/gpu]",
            "containers.resources.limits[example.com/fpga]",
            "noSuchField",
            "containers[",
            "containers.name.x",
        ],
    ) == [
        "securityContext.runAsUser",
        "containers[0].securityContext.runAsUser",
        "containers[0].resources.limits[nvidia.com/gpu]",
    ]


def test_sidecars_are_refused_by_the_local_executor() -> None:
    spec = pod(sh("main", "true"), init=[sh("side", "sleep 1", restartPolicy="Always")])
    assert unhonoured(spec, LOCAL) == ["initContainers[0].restartPolicy"]


# --- the server's decisions, executors speaking the protocol ----------------------------------


@pytest.fixture
def fresh_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every submission reads the declarations (instead of at most once a second)."""
    monkeypatch.setattr(index_module, "REFRESH_SECONDS", 0.0)


def register(
    channel: grpc.Channel, name: str, pool: str, capabilities: executor_pb2.Capabilities | None
) -> None:
    request = executor_pb2.SyncRequest(
        executor_id=name,
        pool=pool,
        nodes=[executor_pb2.Node(name=f"{name}-n0", allocatable={"cpu": "4", "memory": "8Gi"})],
    )
    if capabilities is not None:
        request.capabilities.CopyFrom(capabilities)
    executor_pb2_grpc.ExecutorApiStub(channel).Sync(request, timeout=30)


def with_volume(pool: str | None = None) -> submit_pb2.JobSubmitRequestItem:
    spec = {
        "containers": [
            {
                "name": "main",
                "command": ["true"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
            }
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    }
    return job_item(spec, annotations={ann.POOL: pool} if pool else None)


def refusal(client: ArmadaClient, item: submit_pb2.JobSubmitRequestItem) -> str:
    from armada_core.client import InvalidArgument

    with pytest.raises(InvalidArgument) as raised:
        client.submit_jobs("q", "s", [job_item(pod_dict("true")), item])
    return str(raised.value)


def pod_dict(*command: str) -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "command": list(command),
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
            }
        ]
    }


@pytest.fixture
def protocol_server(database_url: str, fresh_reads: None) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(
        database_url=database_url, http_port=None, scheduling_period=3600
    ) as server:
        yield server


def test_a_pool_whose_executors_cannot_honour_a_field_refuses_the_job(
    protocol_server: EmbeddedServer,
) -> None:
    with (
        ArmadaClient(protocol_server.address) as client,
        grpc.insecure_channel(protocol_server.address) as channel,
    ):
        client.create_queue(submit_pb2.Queue(name="q"))
        # No executor yet: nothing to go by, the job waits for one.
        client.submit_jobs("q", "s", [with_volume("cpu")])
        register(channel, "local-1", "cpu", local_capabilities())
        register(channel, "local-2", "cpu", local_capabilities())
        register(channel, "k8s", "gpu", full_capabilities())
        message = refusal(client, with_volume("cpu"))
        assert message.startswith(
            "Submit/SubmitJobs: INVALID_ARGUMENT: "
            "job_request_items[1].pod_specs[0].volumes: no executor of "
            "pool 'cpu' can run this job: executor 'local-1' cannot "
            "honour volumes, containers[0].volumeMounts (nor can the 1 "
            "other executor)"
        ), message
        # Another pool can, and a job naming no pool may run there.
        client.submit_jobs("q", "s", [with_volume("gpu"), with_volume(), with_volume("new")])
        # An executor that never declared anything may honour anything.
        register(channel, "old", "cpu", None)
        client.submit_jobs("q", "s", [with_volume("cpu")])
        register(channel, "old", "cpu", local_capabilities())
        register(channel, "k8s", "gpu", local_capabilities())
        message = refusal(client, with_volume())
        assert message.startswith(
            "Submit/SubmitJobs: INVALID_ARGUMENT: "
            "job_request_items[1].pod_specs[0].volumes: no executor of "
            "any pool can run this job"
        ), message


def test_the_declarations_are_read_at_most_once_a_second(database_url: str) -> None:
    now = [0.0]
    with (
        EmbeddedServer(database_url=database_url, http_port=None, scheduling_period=3600) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        index = index_module.CapabilityIndex(
            server.server.storage.engine, refresh=1.0, clock=lambda: now[0]
        )
        assert index.executors() == ()
        register(channel, "local-1", "cpu", local_capabilities())
        now[0] = 0.9
        assert index.executors() == ()  # still the cached read
        index.check([with_volume("cpu")])
        now[0] = 1.0
        [executor] = index.executors()
        assert (executor.executor_id, executor.pool, executor.unsupported) == (
            "local-1",
            "cpu",
            tuple(LOCAL),
        )
        with pytest.raises(Exception, match="no executor of pool 'cpu'"):
            index.check([with_volume("cpu")])


# --- the in-process local executor ------------------------------------------------------------


@pytest.mark.e2e
def test_the_in_process_local_executor_refuses_what_it_cannot_honour(
    tmp_path, database_url: str
) -> None:  # type: ignore[no-untyped-def]
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        database_url=database_url,
        sandbox_dir=str(tmp_path / "pods"),
        nodes=(NodeGroup(1, "2", "2Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
    )
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        # Refused from the start, before the executor's first sync.
        message = refusal(client, with_volume())
        assert (
            "volumes: no executor of any pool can run this job: executor 'local' cannot "
            "honour volumes, containers[0].volumeMounts" in message
        ), message
        message = refusal(client, with_volume("default"))
        assert "no executor of pool 'default'" in message
        ids = client.submit_jobs("q", "ok", [job_item(pod_dict("true"))])
        results = client.wait_for_jobs("q", "ok", ids, timeout=60)
        assert {r.state for r in results.values()} == {JobState.SUCCEEDED}
