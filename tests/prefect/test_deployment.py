"""A real deployment: a `prefect server start` process, a work pool of type `armada`, a
deployment, and `prefect worker start --type armada` processes that the tests start and
SIGKILL, against an armada-server with the local executor.

A worker that dies leaves its flow runs' jobs running; the pool's owner of each flow run
(`prefect_armada.worker.flow_run_owner`) takes over the watch: it cancels the job when the
flow run is cancelled and reports the flow run's end as the submitting worker would have.

The last tests run the flow runs on real Armada processes instead (`armada-server --executor
none` on an SQLite file, and an `armada-executor --kind local`), and SIGKILL those: the
executor, which adopts its pods when started again, and the server, started again on the same
database and address while the worker's watch waits for it.

Every test counts the Armada jobs of each flow run: exactly one, none left running once
Prefect says the flow run ended.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.client.schemas.objects import FlowRun, StateType, WorkerStatus
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Cancelled, Cancelling, Pending

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import TERMINAL, ArmadaClient
from armada_server.app import EmbeddedServer
from prefect_armada import ArmadaWorker
from prefect_armada.worker import WORKER_LABEL, parse_infrastructure_id

from ..e2e.processes import (
    Process,
    kill_leftovers,
    processes_mentioning,
    start_executor,
    start_server,
)
from .conftest import HERE, jobs_in, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PREFECT = str(Path(sys.executable).parent / "prefect")
#: Workers heartbeat every 3 s, so Prefect shows a killed one offline after 9 s (three
#: missed heartbeats); the takeover checks run at the same pace.
HEARTBEAT_SECONDS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without its Prefect settings (the harness's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {**env, "PREFECT_HOME": str(home), "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`prefect server start` with its services (no scheduler, UI or analytics)."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    env = environment(
        home, PREFECT_API_DATABASE_CONNECTION_URL=(f"sqlite+aiosqlite:///{home / 'prefect.db'}")
    )
    with open(home / "server.log", "wb") as log:
        server = subprocess.Popen(
            [
                PREFECT,
                "server",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-scheduler",
                "--no-ui",
                "--analytics-off",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/api"

    def healthy() -> bool:
        if server.poll() is not None:
            raise AssertionError((home / "server.log").read_text()[-3000:])
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        # Migrating a new database took up to two minutes on a loaded two-core machine.
        wait_until(healthy, 300, "the Prefect server")
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def api() -> SyncPrefectClient:
    return get_client(sync_client=True)


class Pool:
    """The work pool, its deployment, and the worker processes the tests start and kill."""

    def __init__(self, api_url: str, home: Path, armada: ArmadaClient, queue: str) -> None:
        self.api_url, self.home, self.armada, self.queue = api_url, home, armada, queue
        self.name = f"armada-{uuid.uuid4().hex[:6]}"
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        with api() as client:
            client.create_work_pool(
                WorkPoolCreate(
                    name=self.name,
                    type="armada",
                    base_job_template=ArmadaWorker.get_default_base_job_template(),
                )
            )
            flow_id = client.create_flow_from_name("waits")
            # Named after the pool: Prefect upserts a deployment by flow and name, so a second
            # pool's deployment of the same name would take this one over (its work pool and
            # Armada server) and this pool's flow runs would run on the other's.
            self.deployment_id = client.create_deployment(
                flow_id,
                f"armada-e2e-{self.name}",
                work_pool_name=self.name,
                entrypoint="worker_flows.py:waits",
                pull_steps=[
                    {"prefect.deployments.steps.set_working_directory": {"directory": str(HERE)}}
                ],
                job_variables={
                    "credentials": {"address": armada.config.address},
                    "queue": queue,
                    # No command: the default runs the worker's interpreter (local executor).
                    "cpu": "500m",
                    "memory": "512Mi",
                    "cancellation_check_seconds": 0.5,
                },
            )

    # --- workers ---

    def start_worker(self) -> str:
        name = f"w{len(self.workers) + 1}"
        env = environment(
            self.home / name,
            PREFECT_API_URL=self.api_url,
            PREFECT_WORKER_HEARTBEAT_SECONDS=str(HEARTBEAT_SECONDS),
            PREFECT_WORKER_QUERY_SECONDS="1",
        )
        (self.home / name).mkdir(parents=True)
        with open(self.log(name), "wb") as log:
            self.workers[name] = subprocess.Popen(
                [
                    PREFECT,
                    "worker",
                    "start",
                    "--pool",
                    self.name,
                    "--type",
                    "armada",
                    "--name",
                    name,
                    "--install-policy",
                    "never",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return name

    def log(self, name: str) -> Path:
        return self.home / f"{name}.log"

    def output(self, name: str) -> str:
        return self.log(name).read_text(errors="replace")

    def online(self) -> set[str]:
        with api() as client:
            return {
                w.name
                for w in client.read_workers_for_work_pool(self.name)
                if w.status == WorkerStatus.ONLINE
            }

    def alive(self) -> list[str]:
        return [name for name, p in self.workers.items() if p.poll() is None]

    def ensure_workers(self, count: int) -> list[str]:
        """`count` live workers, all online."""
        while len(self.alive()) < count:
            self.start_worker()
        alive = self.alive()
        wait_until(lambda: set(alive) <= self.online(), 90, f"workers {alive} online")
        return alive

    def kill(self, name: str) -> None:
        self.workers[name].send_signal(signal.SIGKILL)
        self.workers[name].wait()

    def stop(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.terminate()
        for process in self.workers.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    # --- flow runs ---

    def flow_run(self, marker: Path) -> FlowRun:
        with api() as client:
            return client.create_flow_run_from_deployment(
                self.deployment_id, parameters={"marker": str(marker)}
            )

    def read(self, flow_run_id: uuid.UUID) -> FlowRun:
        with api() as client:
            return client.read_flow_run(flow_run_id)

    def running(self, flow_run_id: uuid.UUID) -> tuple[FlowRun, str]:
        """The flow run once its flow reports Running, and its Armada job."""

        def started() -> FlowRun | None:
            flow_run = self.read(flow_run_id)
            state = flow_run.state
            return (
                flow_run
                if state is not None and state.is_running() and flow_run.infrastructure_pid
                else None
            )

        flow_run = wait_until(started, 120, f"flow run {flow_run_id} running")
        return flow_run, parse_infrastructure_id(flow_run.infrastructure_pid or "")[2]

    def final(self, flow_run_id: uuid.UUID, timeout: float = 90) -> FlowRun:
        def ended() -> FlowRun | None:
            flow_run = self.read(flow_run_id)
            return flow_run if flow_run.state is not None and flow_run.state.is_final() else None

        return wait_until(ended, timeout, f"flow run {flow_run_id} to end")

    def cancel(self, flow_run_id: uuid.UUID) -> None:
        """As the UI and `prefect flow-run cancel` do: propose Cancelling."""
        with api() as client:
            client.set_flow_run_state(flow_run_id, Cancelling())

    def states(self, flow_run_id: uuid.UUID) -> list[StateType]:
        with api() as client:
            return [s.type for s in client.read_flow_run_states(flow_run_id)]

    def jobs(self, flow_run_id: uuid.UUID) -> dict[str, int]:
        """Every Armada job ever submitted for the flow run, with its state."""
        ids = jobs_in(self.armada, self.queue, f"prefect-{flow_run_id}")
        return self.armada.get_job_status(ids) if ids else {}

    def takeovers(self, flow_run_id: uuid.UUID) -> dict[str, int]:
        line = f"Taking over the watch of flow run {flow_run_id}"
        return {name: self.output(name).count(line) for name in self.workers}

    def cancellations(self, job_id: str) -> dict[str, int]:
        line = f"Cancelling Armada job(s) {job_id}"
        return {name: self.output(name).count(line) for name in self.workers}

    def watches_ended(self, flow_run_id: uuid.UUID) -> list[str]:
        """The status code of each worker watch that followed the flow run's job to its end
        (from the workers' `prefect.worker.executed-flow-run` events)."""
        resource = f"prefect.flow-run.{flow_run_id}"
        response = httpx.post(
            f"{self.api_url}/events/filter",
            timeout=10,
            json={
                "filter": {
                    "event": {"name": ["prefect.worker.executed-flow-run"]},
                    "related": {"id": [resource]},
                }
            },
        )
        response.raise_for_status()
        return [
            related["prefect.infrastructure.status-code"]
            for event in response.json()["events"]
            for related in event["related"]
            if related["prefect.resource.id"] == resource
        ]


@pytest.fixture(scope="module")
def pool(
    prefect_api: str, armada_server: EmbeddedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with ArmadaClient(armada_server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name=queue, priority_factor=1))
        the_pool = Pool(prefect_api, tmp_path_factory.mktemp("workers"), armada, queue)
        try:
            yield the_pool
        finally:
            the_pool.stop()


def one_job(
    pool: Pool, flow_run: FlowRun, ended_as: StateType, *, wait: float = 0
) -> tuple[str, int]:
    """The flow run ended in the state `ended_as`: its one Armada job and the job's state,
    which must have ended too (within `wait` seconds: a flow that reports Completed exits
    just after)."""
    assert flow_run.state is not None and flow_run.state.type == ended_as, flow_run.state
    jobs = pool.jobs(flow_run.id)
    assert len(jobs) == 1, f"flow run {flow_run.id} has Armada jobs {jobs}"
    [(job_id, state)] = jobs.items()
    if state not in TERMINAL:
        state = wait_until(
            lambda: (s := pool.jobs(flow_run.id)[job_id]) in TERMINAL and s,
            wait or 0.1,
            f"job {job_id} of an ended flow run to end",
        )
    return job_id, state


def submitter(flow_run: FlowRun) -> str:
    return flow_run.labels[WORKER_LABEL]


def test_two_live_workers_watch_each_flow_run_once(pool: Pool, tmp_path: Path) -> None:
    """No takeover while the submitting worker lives: one job per flow run, one cancellation,
    one Cancelled state."""
    workers = pool.ensure_workers(2)
    to_cancel, to_finish = pool.flow_run(tmp_path / "never"), pool.flow_run(tmp_path / "go")
    to_cancel, cancel_job = pool.running(to_cancel.id)
    to_finish, _ = pool.running(to_finish.id)
    # A few takeover rounds pass while both run.
    time.sleep(3 * HEARTBEAT_SECONDS)

    (tmp_path / "go").touch()
    pool.cancel(to_cancel.id)
    cancelled, finished = pool.final(to_cancel.id), pool.final(to_finish.id)

    assert one_job(pool, cancelled, StateType.CANCELLED) == (cancel_job, submit_pb2.CANCELLED)
    assert one_job(pool, finished, StateType.COMPLETED, wait=30)[1] == submit_pb2.SUCCEEDED
    for flow_run in (cancelled, finished):
        assert submitter(flow_run) in workers
        assert sum(pool.takeovers(flow_run.id).values()) == 0
    assert pool.cancellations(cancel_job) == {
        name: int(name == submitter(cancelled)) for name in pool.workers
    }
    states = pool.states(cancelled.id)
    assert states.count(StateType.CANCELLING) == 1 and states.count(StateType.CANCELLED) == 1, (
        states
    )


def test_the_survivor_cancels_a_killed_workers_flow_run(pool: Pool, tmp_path: Path) -> None:
    """The submitting worker is SIGKILLed; cancelling the flow run afterwards cancels its job
    through the other worker, and the flow run ends Cancelled (not stuck in Cancelling)."""
    pool.ensure_workers(2)
    flow_run, job_id = pool.running(pool.flow_run(tmp_path / "never").id)
    dead = submitter(flow_run)
    pool.kill(dead)
    [survivor] = pool.alive()
    pool.cancel(flow_run.id)

    ended = pool.final(flow_run.id)
    assert one_job(pool, ended, StateType.CANCELLED) == (job_id, submit_pb2.CANCELLED)
    assert submitter(ended) == survivor
    assert pool.takeovers(flow_run.id) == {name: int(name == survivor) for name in pool.workers}
    assert pool.cancellations(job_id) == {name: int(name == survivor) for name in pool.workers}
    assert pool.states(flow_run.id).count(StateType.CANCELLED) == 1


def test_a_new_worker_follows_killed_workers_flow_runs_to_their_end(
    pool: Pool, tmp_path: Path
) -> None:
    """Every worker is SIGKILLed and a new one started: it takes both flow runs over; one
    ends by itself (Completed), the other's job is preempted (Crashed, as the outcome mapping
    says for an infrastructure failure)."""
    pool.ensure_workers(2)
    finishing, finishing_job = pool.running(pool.flow_run(tmp_path / "go").id)
    preempted, preempted_job = pool.running(pool.flow_run(tmp_path / "never").id)
    for name in pool.alive():
        pool.kill(name)
    [new] = pool.ensure_workers(1)
    wait_until(
        lambda: all(pool.takeovers(f.id)[new] for f in (finishing, preempted)),
        60,
        f"worker {new} to take both flow runs over",
    )

    (tmp_path / "go").touch()
    pool.armada.preempt_jobs(
        pool.queue, f"prefect-{preempted.id}", [preempted_job], reason="node drained"
    )
    completed, crashed = pool.final(finishing.id), pool.final(preempted.id)

    assert one_job(pool, completed, StateType.COMPLETED, wait=30) == (
        finishing_job,
        submit_pb2.SUCCEEDED,
    )
    assert crashed.state is not None and crashed.state.is_crashed(), crashed.state
    # The flow run process may report its own crash on the termination signal first; the
    # worker then says why.
    wait_until(
        lambda: "preempted" in (pool.final(preempted.id).state.message or ""),
        60,
        "the worker to give the crash its infrastructure reason",
    )
    crashed = pool.final(preempted.id)
    assert "infrastructure" in (crashed.state.message or "")
    assert "preempted" in (crashed.state.message or "")
    assert one_job(pool, crashed, StateType.CRASHED) == (preempted_job, submit_pb2.PREEMPTED)
    for flow_run in (completed, crashed):
        assert submitter(flow_run) == new
        assert sum(pool.takeovers(flow_run.id).values()) == 1


def test_a_flow_run_left_pending_by_a_dead_worker_runs_once(pool: Pool, tmp_path: Path) -> None:
    """A worker died after moving a flow run to Pending and before recording its job (here:
    a Pending flow run labelled with a worker that never comes online): after the grace
    period its owner completes the submission through the lifecycle, and it runs once."""
    alive = pool.ensure_workers(2)
    (tmp_path / "go").touch()
    with api() as client:
        flow_run = client.create_flow_run_from_deployment(
            pool.deployment_id, parameters={"marker": str(tmp_path / "go")}, state=Pending()
        )
        client.update_flow_run_labels(flow_run.id, {WORKER_LABEL: "gone"})

    ended = pool.final(flow_run.id, 120)
    assert one_job(pool, ended, StateType.COMPLETED, wait=30)[1] == submit_pb2.SUCCEEDED
    owner = submitter(ended)
    assert owner in alive
    assert pool.takeovers(flow_run.id) == {name: int(name == owner) for name in pool.workers}


# --- a cancelled flow run's own job ----------------------------------------------------------


def task_job_deployment(pool: Pool, job_set_id: str, marker: Path, task_checks: float) -> uuid.UUID:
    """A deployment of `worker_flows.runs_a_task_job` on the pool: its task runs a job that
    writes `marker` and sleeps, and checks every `task_checks` s whether the flow run is
    cancelling."""
    with api() as client:
        flow_id = client.create_flow_from_name("runs-a-task-job")
        return client.create_deployment(
            flow_id,
            f"armada-e2e-{job_set_id}",
            work_pool_name=pool.name,
            entrypoint="worker_flows.py:runs_a_task_job",
            pull_steps=[
                {"prefect.deployments.steps.set_working_directory": {"directory": str(HERE)}}
            ],
            parameters={
                "address": pool.armada.config.address,
                "queue": pool.queue,
                "job_set_id": job_set_id,
                "marker": str(marker),
                "check_seconds": task_checks,
            },
            job_variables={
                "credentials": {"address": pool.armada.config.address},
                "queue": pool.queue,
                "cpu": "500m",
                "memory": "512Mi",
            },
        )


@pytest.mark.timeout(600)  # two processes start Prefect: the flow run's and its worker's
@pytest.mark.parametrize("first", ["the worker's cancel", "the flow process's exit"])
def test_a_cancelled_flow_runs_job_ends_cancelled_whichever_reaches_the_server_first(
    pool: Pool, tmp_path: Path, first: str
) -> None:
    """A flow run whose task job runs is cancelled. Either the worker's watch notices first
    and cancels the flow run's job (the process then ends on the termination signal), or the
    task in the flow process notices first, cancels its job and hands back Cancelled, and the
    process ends by itself: it cancels its own job before, so that its exit is never a
    failure. Each order is forced by the other side checking only once an hour."""
    pool.ensure_workers(1)
    worker_checks, task_checks = (0.2, 3600.0) if first == "the worker's cancel" else (3600.0, 0.2)
    job_set_id = f"task-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "task-job-runs"
    deployment = task_job_deployment(pool, job_set_id, marker, task_checks)
    with api() as client:
        created = client.create_flow_run_from_deployment(
            deployment, job_variables={"cancellation_check_seconds": worker_checks}
        )
    flow_run, job_id = pool.running(created.id)
    wait_until(marker.exists, 120, "the task's job running")
    pool.cancel(flow_run.id)

    ended = pool.final(flow_run.id, 120)
    assert one_job(pool, ended, StateType.CANCELLED, wait=30) == (job_id, submit_pb2.CANCELLED)
    [task_job] = jobs_in(pool.armada, pool.queue, job_set_id)
    assert pool.armada.get_job_status([task_job]) == {task_job: submit_pb2.CANCELLED}
    # Who cancelled the flow run's job: its worker, or the flow process before it ended.
    assert sum(pool.cancellations(job_id).values()) == int(first == "the worker's cancel")
    process_log = "\n".join(line.line for line in pool.armada.logs(job_id))
    assert (f"Cancelling Armada job {job_id} of flow run" in process_log) == (
        first == "the flow process's exit"
    )


# --- real Armada processes --------------------------------------------------------------------

#: Pods fence themselves three quarters of the lease timeout after the executor's last sync:
#: long enough for a restart of the executor or the server.
ARMADA_SETTINGS = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": 30}


class Armada:
    """`armada-server --executor none` on an SQLite file and an `armada-executor --kind
    local`, each SIGKILLed and started again on demand: the server on the same database and
    address, the executor with the same id and sandbox."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.database = f"sqlite:///{root / 'armada.db'}"
        self.sandbox = root / "executor-pods"
        self.started: list[Process] = []
        self.port = 0
        self.server: Process
        self.executor: Process

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, name: str, *argv: str) -> Process:
        process = Process(f"{name}-{len(self.started)}", list(argv), self.root)
        self.started.append(process)
        return process

    def start_server(self) -> Process:
        # The last --port wins: after the first start, the server binds the same address.
        self.server, address = start_server(
            lambda name, *argv: self._start(name, *argv, "--port", str(self.port)),
            "armada-server",
            self.root,
            self.database,
            **ARMADA_SETTINGS,
        )
        self.port = int(address.rsplit(":", 1)[1])
        return self.server

    def start_executor(self) -> Process:
        self.executor = start_executor(
            self._start,
            "armada-executor",
            self.address,
            "local",
            self.root,
            "1x4x8Gi",
            executor_id="e1",
            sandbox=self.sandbox,
        )
        return self.executor

    def stop(self) -> None:
        for process in reversed(self.started):
            process.stop()
        kill_leftovers(str(self.sandbox))  # pods of a failed test


@pytest.fixture(scope="module")
def armada_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Armada]:
    processes = Armada(tmp_path_factory.mktemp("armada-processes"))
    try:
        processes.start_server()
        processes.start_executor()
        yield processes
    finally:
        processes.stop()


@pytest.fixture(scope="module")
def remote_pool(
    prefect_api: str, armada_processes: Armada, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    """A work pool whose deployment submits to the `armada-server` process."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with ArmadaClient(armada_processes.address) as client:
        client.create_queue(submit_pb2.Queue(name=queue, priority_factor=1))
        the_pool = Pool(prefect_api, tmp_path_factory.mktemp("remote-workers"), client, queue)
        try:
            yield the_pool
        finally:
            the_pool.stop()


def pods_of(job_id: str) -> list[int]:
    """Live processes of the job's pods (the local executor sets ARMADA_JOB_ID in them)."""
    return processes_mentioning(f"ARMADA_JOB_ID={job_id}")


def ran_once(pool: Pool, flow_run: FlowRun, job_id: str) -> None:
    """The flow run ended Completed: its one job succeeded in one run on the executor, and
    no process of it is left."""
    assert one_job(pool, flow_run, StateType.COMPLETED, wait=30) == (job_id, submit_pb2.SUCCEEDED)
    runs = pool.armada.get_job_details([job_id], expand_job_run=True)[job_id].job_runs
    assert [(run.cluster, run.state) for run in runs] == [("e1", job_pb2.RUN_STATE_SUCCEEDED)]
    wait_until(lambda: not pods_of(job_id), 30, f"the processes of job {job_id} to end")
    wait_until(
        lambda: pool.watches_ended(flow_run.id),
        30,
        f"the worker's watch of flow run {flow_run.id} to end",
    )
    assert pool.watches_ended(flow_run.id) == ["0"]
    assert sum(pool.takeovers(flow_run.id).values()) == 0
    assert pool.states(flow_run.id).count(StateType.COMPLETED) == 1


def test_an_executor_killed_while_the_job_runs_adopts_it(
    armada_processes: Armada, remote_pool: Pool, tmp_path: Path
) -> None:
    """`armada-executor` is SIGKILLed while the flow run's job runs and started again: it
    adopts the pod, which goes on; the flow run ends Completed with one job and one run."""
    armada, pool = armada_processes, remote_pool
    pool.ensure_workers(1)
    flow_run, job_id = pool.running(pool.flow_run(tmp_path / "go").id)
    armada.executor.kill()
    assert pods_of(job_id), "the pod died with its executor"
    assert "adopted 1 runs" in armada.start_executor().output()

    (tmp_path / "go").touch()
    ran_once(pool, pool.final(flow_run.id), job_id)


def test_a_server_killed_while_the_job_runs_loses_and_duplicates_nothing(
    armada_processes: Armada, remote_pool: Pool, tmp_path: Path
) -> None:
    """`armada-server` is SIGKILLed while the flow run's job runs and started again on the same
    database and address: the executor keeps the pod, the worker's watch reconnects and
    follows the job to its end, and the flow run ends Completed with one job and one run."""
    armada, pool = armada_processes, remote_pool
    [worker] = pool.ensure_workers(1)
    flow_run, job_id = pool.running(pool.flow_run(tmp_path / "go").id)
    armada.server.kill()
    lost = "Armada event stream: event stream failed"
    wait_until(
        lambda: lost in pool.output(worker), 30, "the worker's watch to lose its event stream"
    )
    armada.start_server()
    assert pods_of(job_id), "the pod died with the server"

    (tmp_path / "go").touch()
    ran_once(pool, pool.final(flow_run.id), job_id)
    assert armada.executor.popen.poll() is None
    # The job's output written after the restart still reached the worker's log.
    after = pool.output(worker).rsplit(lost, 1)[1]
    assert f"Flow run {flow_run.name!r} - Finished in state Completed()" in after


# --- the reaper: flow runs ended behind the workers' back -----------------------------------


def test_a_flow_run_forced_to_an_end_while_its_worker_is_dead(pool: Pool, tmp_path: Path) -> None:
    """Every worker is SIGKILLed and one flow run forced to Cancelled through the API: no
    worker watches it, and no takeover reads a finished flow run. A new worker's reaper
    cancels its job, naming the state; the other flow run, still Running, keeps its job,
    which its new watcher follows to the end."""
    pool.ensure_workers(1)
    forced, forced_job = pool.running(pool.flow_run(tmp_path / "never").id)
    running, running_job = pool.running(pool.flow_run(tmp_path / "go").id)
    for name in pool.alive():
        pool.kill(name)
    with api() as client:
        client.set_flow_run_state(forced.id, Cancelled(), force=True)
    assert pool.jobs(forced.id) == {forced_job: submit_pb2.RUNNING}

    pool.ensure_workers(1)
    wait_until(
        lambda: pool.jobs(forced.id)[forced_job] == submit_pb2.CANCELLED,
        90,
        "the reaper to cancel the forced flow run's job",
    )
    details = pool.armada.get_job_details([forced_job])[forced_job]
    assert details.cancel_reason == f"prefect flow run {forced.id} is Cancelled"
    assert pool.jobs(running.id) == {running_job: submit_pb2.RUNNING}
    assert pool.read(running.id).state.is_running()

    (tmp_path / "go").touch()
    assert one_job(pool, pool.final(running.id), StateType.COMPLETED, wait=30) == (
        running_job,
        submit_pb2.SUCCEEDED,
    )
