"""End to end on the local executor: real server, real scheduling, real processes."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, gang_items, job_item
from armada_core.jobs import JobState
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, PriorityClassConfig, ServerConfig

pytestmark = pytest.mark.e2e

CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)


def pod(*command: str, cpu: str = "1", memory: str = "256Mi", **extra) -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "command": list(command),
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ],
        **extra,
    }


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        sandbox_dir=str(tmp_path / "pods"),
        database_url=f"sqlite:///{tmp_path / 'armada.db'}",
        nodes=(NodeGroup(2, "2", "2Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as running:
        yield running


@pytest.fixture
def client(server: EmbeddedServer) -> Iterator[ArmadaClient]:
    with ArmadaClient(server.address) as c:
        c.create_queue(submit_pb2.Queue(name="q"))
        yield c


def run(client: ArmadaClient, *items, job_set: str = "s", timeout: float = 60):
    ids = client.submit_jobs("q", job_set, list(items))
    return ids, client.wait_for_jobs("q", job_set, ids, timeout=timeout)


def test_a_gang_runs_together_and_logs_are_served(
    client: ArmadaClient, server: EmbeddedServer
) -> None:
    ids, results = run(
        client, *gang_items(pod("sh", "-c", "echo hello from $HOSTNAME; sleep 1"), replicas=3)
    )
    assert {r.state for r in results.values()} == {JobState.SUCCEEDED}
    starts = [
        client.get_job_details([i], expand_job_run=True)[i].job_runs[0].started_ts for i in ids
    ]
    spread = max(s.ToNanoseconds() for s in starts) - min(s.ToNanoseconds() for s in starts)
    assert spread < 1e9  # placed in one cycle and started together
    lines = client.logs(ids[0])
    assert [line.line for line in lines] == [f"hello from armada-{ids[0]}-0"]


def test_exit_code_and_termination_message(client: ArmadaClient) -> None:
    script = "echo 'bad input file' > /dev/termination-log; exit 3"
    [job], results = run(client, job_item(pod("sh", "-c", script)))
    result = results[job]
    assert result.state == JobState.FAILED
    assert result.exit_codes == {"main": 3}
    assert "bad input file" in result.termination_messages["main"]


def test_oom_is_retried_by_policy(client: ArmadaClient) -> None:
    from armada_core.retry import load_policy

    client.create_retry_policy(
        load_policy("""
apiVersion: armadaproject.io/v1
kind: RetryPolicy
metadata: {name: oom}
spec:
  retryLimit: 1
  defaultAction: Fail
  rules:
    - action: Retry
      onConditions: [OOMKilled]
""")
    )
    client.update_queue(submit_pb2.Queue(name="q", retry_policies=["oom"]))
    hog = f'{sys.executable} -c "x = bytearray(400 * 1024 * 1024); import time; time.sleep(5)"'
    [job], results = run(client, job_item(pod("sh", "-c", hog, memory="100Mi")))
    result = results[job]
    assert result.state == JobState.FAILED
    assert len(result.retryable_failures) == 1  # one retry by the policy, then its limit
    details = client.get_job_details([job], expand_job_run=True)[job]
    assert len(details.job_runs) == 2


def test_deadline_is_enforced(client: ArmadaClient) -> None:
    [job], results = run(client, job_item(pod("sleep", "30", activeDeadlineSeconds=1)))
    assert results[job].state == JobState.FAILED
    assert "DeadlineExceeded" in (results[job].failure_reason or "")


def test_cancel_kills_the_process_tree(client: ArmadaClient, tmp_path: Path) -> None:
    marker = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {marker}; sleep 300 & echo $! >> {marker}; wait"
    [job] = client.submit_jobs("q", "c", [job_item(pod("sh", "-c", script))])
    deadline = time.monotonic() + 30
    while (
        not marker.exists() or len(marker.read_text().split()) < 2
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p) for p in marker.read_text().split()]
    client.cancel_jobs("q", "c", [job])
    results = client.wait_for_jobs("q", "c", [job], timeout=30)
    assert results[job].state == JobState.CANCELLED
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if Path(f"/proc/{p}").exists()], "children survived"


def test_urgent_job_preempts_exactly_one_preemptible_job(client: ArmadaClient) -> None:
    fillers = client.submit_jobs(
        "q", "fill", [job_item(pod("sleep", "300", cpu="1")) for _ in range(4)]
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = client.get_job_status(fillers)
        if all(s == submit_pb2.RUNNING for s in states.values()):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"fillers never all ran: {states}")
    [urgent], results = run(client, job_item(pod("true"), priority_class="high"), job_set="urgent")
    assert results[urgent].state == JobState.SUCCEEDED
    states = client.get_job_status(fillers)
    assert sorted(states.values()) == sorted([submit_pb2.PREEMPTED] + [submit_pb2.RUNNING] * 3)
    client.cancel_job_set("q", "fill")


def test_fields_the_local_executor_cannot_honour_are_refused(client: ArmadaClient) -> None:
    from armada_core.client import InvalidArgument

    spec = pod("true", volumes=[{"name": "data", "emptyDir": {}}])
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    with pytest.raises(InvalidArgument) as raised:
        client.submit_jobs("q", "s", [job_item(spec)])
    assert "cannot honour volumes, containers[0].volumeMounts" in str(raised.value)
