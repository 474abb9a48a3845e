"""The local executor's pods outlive it: a new executor adopts them from their sandboxes.

The first executor is a real child process (a LocalBackend on its own event loop) that starts
the pods and is then SIGKILLed; the test's own LocalBackend adopts what it left, as
`armada-executor` does on start. Also the room rule with real processes.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from armada_core.api import executor_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2 as k8s
from armada_server.config import parse_nodes
from armada_server.executors.local_backend import LocalBackend
from armada_server.executors.nodes import virtual_nodes

from .helpers import memory_limit, pod, processes_under, py, sh

pytestmark = pytest.mark.timeout(90)

NODES = virtual_nodes([parse_nodes("1x2x4Gi")], "e1")

FIRST_EXECUTOR = r"""
import asyncio, signal, sys
from pathlib import Path
from armada_core.api import executor_pb2
from armada_server.config import parse_nodes
from armada_server.executors.local_backend import LocalBackend
from armada_server.executors.nodes import virtual_nodes


async def main():
    backend = LocalBackend(virtual_nodes([parse_nodes("1x2x4Gi")], "e1"), Path(sys.argv[1]),
                           owner="e1")
    updates = []
    await backend.open(updates.append)
    leases = [executor_pb2.Lease.FromString(bytes.fromhex(h)) for h in sys.argv[2:]]
    for lease in leases:
        backend.start(lease, updates.append)
    while sum(u.WhichOneof("update") == "running" for u in updates) < len(leases):
        await asyncio.sleep(0.02)
    print("running", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def lease(name: str, spec: k8s.PodSpec, cpu: str = "100m") -> executor_pb2.Lease:
    job = submit_pb2.Job(id=name, queue="q", job_set_id="s", namespace="default", pod_specs=[spec])
    job.scheduling_resource_requirements.requests["cpu"].string = cpu
    return executor_pb2.Lease(
        run_id=f"run-{name}", node="e1-0", pod_name=f"armada-{name}-0", job=job
    )


def start_first_executor(root: Path, leases: list[executor_pb2.Lease]) -> subprocess.Popen:
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FIRST_EXECUTOR,
            str(root),
            *(lease.SerializeToString().hex() for lease in leases),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    assert first.stdout.readline() == "running\n"
    return first


async def until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(1500):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_an_adopted_pod_reports_its_exit_code_message_memory_and_deadline(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pods"
    gate = tmp_path / "go"
    wait = f'while [ ! -e "{gate}" ]; do sleep 0.02; done'
    leases = [
        lease(
            "fails",
            pod(
                sh(
                    "main",
                    f'{wait}; echo "it broke" > $ARMADA_TERMINATION_MESSAGE_PATH; echo bye; exit 3',
                )
            ),
        ),
        lease("succeeds", pod(sh("main", f"{wait}; echo done"))),
        lease(
            "grows",
            pod(
                py(
                    "main",
                    f"import os, time\nwhile not os.path.exists({str(gate)!r}): "
                    "time.sleep(0.02)\nx = bytearray(200 * 2**20)\n"
                    "time.sleep(60)",
                    resources=memory_limit("100Mi"),
                )
            ),
        ),
        lease("late", pod(sh("main", "sleep 60"), deadline=4)),
        lease("stopped", pod(sh("main", "sleep 60"))),
        lease("gone", pod(sh("main", "sleep 60"))),
    ]
    first = start_first_executor(root, leases)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert len(processes_under(root)) >= len(leases)  # orphaned, alive

    backend = LocalBackend(NODES, root, owner="e1")
    updates: list[executor_pb2.RunUpdate] = []
    try:
        assert await backend.open(updates.append) == len(leases)
        assert backend.held() == {le.run_id for le in leases}
        backend.stop("run-stopped", preempt=True)  # as the server's answer to the first sync
        backend.synced(0, 0.0)
        gate.touch()

        def ended(run: str) -> executor_pb2.RunUpdate | None:
            return next(
                (
                    u
                    for u in updates
                    if u.run_id == run
                    and u.WhichOneof("update") in ("succeeded", "failed", "stopped", "returned")
                ),
                None,
            )

        await until(
            lambda: all(ended(le.run_id) for le in leases if le.job.id != "gone"),
            "the adopted pods to end",
        )
        failed = ended("run-fails")
        assert failed is not None and failed.WhichOneof("update") == "failed"
        [main] = failed.failed.containers
        assert (main.exit_code, main.message.strip(), main.reason) == (3, "it broke", "Error")
        assert ended("run-succeeds").WhichOneof("update") == "succeeded"  # type: ignore[union-attr]
        grows = ended("run-grows")
        assert grows is not None and grows.failed.condition == "OOMKilled"
        late = ended("run-late")
        assert late is not None and late.failed.condition == "DeadlineExceeded"
        assert ended("run-stopped").WhichOneof("update") == "stopped"  # type: ignore[union-attr]
        # Output written after the adoption was logged all the same.
        log = root / "armada-fails-0" / "run-fails" / "logs" / "main.log"
        assert "bye" in log.read_text()
        assert "run-gone" in backend.held()
    finally:
        await backend.close()
    assert processes_under(root) == []


async def test_a_stale_heartbeat_makes_orphaned_pods_kill_themselves(tmp_path: Path) -> None:
    root = tmp_path / "pods"
    leases = [lease(f"job{i}", pod(sh("main", "sleep 60"))) for i in range(3)]
    first = start_first_executor(root, leases)
    first.send_signal(signal.SIGKILL)
    first.wait()
    # The dead executor's last sync: its heartbeat deadline passes 1 s from now.
    heartbeat = root / ".heartbeat-e1"
    backend = LocalBackend(NODES, root, owner="e1")
    backend.synced(lease_timeout=4 / 3, elapsed=0.0)
    assert heartbeat.exists()
    await until(lambda: not processes_under(root), "the orphans to fence themselves")

    updates: list[executor_pb2.RunUpdate] = []
    try:
        await backend.open(updates.append)

        def ends() -> list[executor_pb2.RunUpdate]:
            return [u for u in updates if u.WhichOneof("update") not in ("pending", "running")]

        await until(lambda: len(ends()) == len(leases), "the fenced runs to be reported")
        # Not the jobs' failure: the leases go back, the runs were attempted.
        assert {u.WhichOneof("update") for u in ends()} == {"returned"}
        assert all(
            u.returned.run_attempted and u.returned.reason.startswith("Fenced") for u in ends()
        )
    finally:
        await backend.close()


async def test_a_lease_waits_until_the_terminating_pod_on_its_node_has_ended(
    tmp_path: Path,
) -> None:
    backend = LocalBackend(NODES, tmp_path / "pods", owner="e1")
    updates: list[executor_pb2.RunUpdate] = []
    await backend.open(updates.append)
    try:
        # The victim takes the whole node (2 CPUs) and ignores SIGTERM for a while.
        victim = lease(
            "victim",
            pod(
                py(
                    "main",
                    "import signal, time\n"
                    "signal.signal(signal.SIGTERM, lambda *_: "
                    "(time.sleep(1), exit(0)))\n"
                    "print('up', flush=True)\ntime.sleep(60)",
                ),
                grace=10,
            ),
            cpu="2",
        )
        backend.start(victim, updates.append)
        await until(
            lambda: any(
                u.run_id == victim.run_id and u.WhichOneof("update") == "running" for u in updates
            ),
            "the victim to run",
        )
        await until(
            lambda: backend.logs(victim.pod_name, victim.run_id, "main"),
            "the victim to handle SIGTERM",
        )
        backend.stop(victim.run_id, preempt=True)
        urgent = lease("urgent", pod(sh("main", "true")), cpu="2")
        backend.start(urgent, updates.append)
        assert urgent.run_id in backend.held()

        await until(
            lambda: any(
                u.run_id == urgent.run_id and u.WhichOneof("update") == "succeeded" for u in updates
            ),
            "the urgent job to run",
        )
        order = [(u.run_id, u.WhichOneof("update")) for u in updates]
        # Pending (held for room), then started only once the victim had stopped.
        assert (
            order.index((urgent.run_id, "pending"))
            < order.index((victim.run_id, "stopped"))
            < order.index((urgent.run_id, "running"))
        )
    finally:
        await backend.close()
