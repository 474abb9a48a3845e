"""Dagster as a user deploys it, against a real Armada server with a local executor: a code
server (`dagster api grpc`), `dagster-daemon run` and `dagster-webserver` on one
DAGSTER_HOME with run retries enabled and the default run launcher and run coordinator. Runs
are launched and terminated through the webserver's GraphQL API, and processes are killed
with SIGKILL the way a node or a container dies.

What is checked is what the task lifecycle promises: a step has at most one live Armada job
at any time, counted on the server by the task's external job URI, whatever Dagster kills or
re-executes; the job of a killed run is cancelled by its retry (no zombie), and a terminated
run's job is cancelled before Dagster reports the run ended.

The same deployment also runs against Armada as separate processes (`armada-server
--executor none` on a SQLite file and an `armada-executor --kind local`), each SIGKILLed and
started again while a step's job runs: the executor adopts its running pod, the server comes
back on the same database and address, and the step's wait goes on to the job's success.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.events.log import EventLogEntry
from dagster._core.instance.ref import InstanceRef
from dagster._grpc.client import DagsterGrpcClient
from dagster_graphql import DagsterGraphQLClient

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, Unavailable
from armada_core.client.lifecycle import TASK_ANNOTATION
from armada_core.client.reattach import LIVE_STATES
from armada_server.app import EmbeddedServer
from dagster_armada import task_identity
from tests.dagster.scripts import deployment_defs
from tests.e2e.processes import (
    BIN,
    Process,
    kill_leftovers,
    process_tree,
    processes_mentioning,
    start_executor,
    start_server,
    wait_until,
)

pytestmark = [
    pytest.mark.e2e,
    # dagster_graphql's client calls gql the way gql deprecated; nothing this suite can change
    pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning"),
]

ROOT = Path(__file__).parents[2]
LOCATION = "deployment"
JOB = "release_job"
STEP = deployment_defs.STEP
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
WORKER_PID = re.compile(r"Started process for run \(pid: (\d+)\)")
QUEUE = "dagster-deployment"
EXECUTOR = "executor"
# The server stays down longer than the step's status check interval, so a check and the
# event stream's reconnection both meet the outage.
SERVER_OUTAGE = deployment_defs.STATUS_CHECK_INTERVAL + 1
# A long lease: the pods of the executor keep running (they fence themselves only after half
# of it without a sync) while the server restarts.
#: The code location as the webserver has it loaded.
LOCATION_QUERY = """
query {
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError { __typename ... on RepositoryLocation { serverId } }
      }
    }
  }
}
"""
#: Seconds between the reaper sensor's ticks (20 by default).
REAP_INTERVAL = 2
ARMADA_SETTINGS = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": 60}


def message(record: EventLogEntry) -> str:
    event = record.dagster_event
    return (event.message if event is not None else None) or record.user_message or ""


def free_ports(count: int) -> list[int]:
    """Distinct free ports (all bound at once while they are picked)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for each in sockets:
            each.bind(("127.0.0.1", 0))
        return [int(each.getsockname()[1]) for each in sockets]


# --- processes ------------------------------------------------------------------------------


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_tree(pid: int) -> list[int]:
    """SIGKILL a process and its descendants at once (a container dying); returns them."""
    tree = process_tree(pid)
    for each in tree:
        with contextlib.suppress(OSError):
            os.kill(each, signal.SIGKILL)
    wait_until(lambda: not any(alive(p) for p in tree), 30, f"processes {tree} to die")
    return tree


@dataclass
class Deployment:
    """The Dagster processes of one DAGSTER_HOME, restartable one by one."""

    home: Path
    logs: Path
    env: dict[str, str]
    web_port: int
    grpc_port: int
    processes: dict[str, Process] = field(default_factory=dict)
    started: list[Process] = field(default_factory=list)
    _instance: DagsterInstance | None = None

    def _start(self, name: str, argv: list[str]) -> Process:
        with pytest.MonkeyPatch.context() as env:
            for key, value in self.env.items():
                env.setenv(key, value)
            process = Process(f"{name}-{len(self.started)}", argv, self.logs)
        self.processes[name] = process
        self.started.append(process)
        return process

    def start(self, name: str) -> Process:
        workspace = str(self.home / "workspace.yaml")
        argv = {
            "code-server": [
                str(BIN / "dagster"),
                "api",
                "grpc",
                "--python-file",
                deployment_defs.__file__,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.grpc_port),
                "--location-name",
                LOCATION,
            ],
            "daemon": [str(BIN / "dagster-daemon"), "run", "-w", workspace],
            "webserver": [
                str(BIN / "dagster-webserver"),
                "-w",
                workspace,
                "-h",
                "127.0.0.1",
                "-p",
                str(self.web_port),
            ],
        }[name]
        return self._start(name, argv)

    def wait_ready(self, name: str) -> None:
        pattern = {
            "code-server": r"Started Dagster code server",
            "daemon": r"Instance is configured with the following daemons",
            "webserver": r"Serving dagster-webserver on",
        }[name]
        self.processes[name].wait_for(pattern, timeout=120)
        if name == "webserver":  # it says so before it listens
            wait_until(self._serving, 60, "the webserver to answer")

    def _serving(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.web_port}/server_info", timeout=5
            ) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def restart(self, name: str) -> None:
        self.processes[name].kill()
        self.start(name)
        self.wait_ready(name)

    @property
    def graphql(self) -> DagsterGraphQLClient:
        return DagsterGraphQLClient("127.0.0.1", port_number=self.web_port, timeout=60)

    def location_server_id(self) -> str | None:
        """The id of the code server the webserver has loaded the code location from (None
        while the location is not loaded)."""
        result = self.graphql._execute(LOCATION_QUERY)
        for entry in result["workspaceOrError"]["locationEntries"]:
            location = entry["locationOrLoadError"] or {}
            if entry["name"] == LOCATION and location.get("__typename") == "RepositoryLocation":
                return str(location["serverId"])
        return None

    @property
    def instance(self) -> DagsterInstance:
        """The instance, read by the test only to find runs and their event logs."""
        if self._instance is None:
            self._instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(self.home)))
        return self._instance

    def stop(self) -> None:
        code_server = self.processes.get("code-server")
        leftovers = (
            process_tree(code_server.popen.pid)[1:]
            if code_server and code_server.popen.poll() is None
            else []
        )
        for process in reversed(self.started):
            process.stop()
        for pid in leftovers:  # run workers a failed test left behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self._instance is not None:
            self._instance.dispose()

    # --- runs -------------------------------------------------------------------------------

    def launch(self) -> str:
        return self.graphql.submit_job_execution(JOB, repository_location_name=LOCATION)

    def status(self, run_id: str) -> DagsterRunStatus:
        return self.graphql.get_run_status(run_id)

    def wait_finished(self, run_id: str, timeout: float = 90) -> DagsterRunStatus:
        statuses: list[DagsterRunStatus] = []
        wait_until(
            lambda: statuses.append(self.status(run_id)) or statuses[-1] in FINISHED,
            timeout,
            f"run {run_id} to finish",
            interval=0.1,
        )
        return statuses[-1]

    def children(self, run_id: str) -> list[str]:
        """Runs re-executing `run_id` (its run retries)."""
        runs = self.instance.get_runs(RunsFilter(tags={"dagster/parent_run_id": run_id}))
        return [run.run_id for run in runs]

    def worker_pid(self, run_id: str) -> int:
        """The run worker's pid, as the code server recorded it when it started it."""
        for record in self.instance.all_logs(run_id):
            if match := WORKER_PID.search(message(record)):
                return int(match.group(1))
        raise AssertionError(f"run {run_id} has no run worker recorded:\n{self.messages(run_id)}")

    def messages(self, run_id: str) -> str:
        return "\n".join(message(record) for record in self.instance.all_logs(run_id))


@contextlib.contextmanager
def deployed(home: Path, address: str, queue: str) -> Iterator[Deployment]:
    """A code server, a daemon and a webserver on the DAGSTER_HOME `home`, whose code location
    submits to `queue` on the Armada server at `address`; stopped on the way out."""
    grpc_port, web_port = free_ports(2)
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {
                "telemetry": {"enabled": False},
                "run_retries": {"enabled": True, "max_retries": 1},
            }
        )
    )
    (home / "workspace.yaml").write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {
                        "grpc_server": {
                            "host": "127.0.0.1",
                            "port": grpc_port,
                            "location_name": LOCATION,
                        }
                    }
                ]
            }
        )
    )
    (home / "markers").mkdir()
    env = {
        "DAGSTER_HOME": str(home),
        "ARMADA_ADDRESS": address,
        "ARMADA_QUEUE": queue,
        "ARMADA_TEST_MARKERS": str(home / "markers"),
        "ARMADA_REAP_INTERVAL": str(REAP_INTERVAL),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    running = Deployment(home=home, logs=home, env=env, web_port=web_port, grpc_port=grpc_port)
    try:
        running.start("code-server")
        running.wait_ready("code-server")
        running.start("daemon")
        running.start("webserver")
        running.wait_ready("daemon")
        running.wait_ready("webserver")
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def deployment_queue(admin: ArmadaClient) -> str:
    admin.create_queue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
    return QUEUE


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, server: EmbeddedServer, deployment_queue: str
) -> Iterator[Deployment]:
    """The deployment against the session's embedded server (its executor in-process)."""
    with deployed(
        tmp_path_factory.mktemp("deployment"), server.address, deployment_queue
    ) as running:
        yield running


# --- Armada as separate processes -----------------------------------------------------------


@dataclass
class ArmadaProcesses:
    """`armada-server --executor none` on a SQLite file and one `armada-executor --kind
    local`, each of which can be SIGKILLed and started again in place: the server on the same
    database and address, the executor with the same id and sandbox (it adopts the pods it
    left running)."""

    root: Path
    address: str = ""
    processes: dict[str, Process] = field(default_factory=dict)
    started: list[Process] = field(default_factory=list)

    @property
    def sandbox(self) -> Path:
        return self.root / "pods"

    def _launch(self, name: str, *argv: str) -> Process:
        process = Process(f"{name}-{len(self.started)}", list(argv), self.root)
        self.started.append(process)
        return process

    def start(self, name: str) -> Process:
        if name == "armada-server":
            # The first start takes any free port; every later one binds the same address.
            port = self.address.rsplit(":", 1)[1] if self.address else "0"

            def on_port(name: str, *argv: str) -> Process:
                at = argv.index("--port") + 1
                return self._launch(name, *argv[:at], port, *argv[at + 1 :])

            process, address = start_server(
                on_port, name, self.root, f"sqlite:///{self.root / 'armada.db'}", **ARMADA_SETTINGS
            )
            assert self.address in ("", address), (self.address, address)
            self.address = address
        else:
            process = start_executor(
                self._launch,
                name,
                self.address,
                "local",
                self.root,
                "1x4x8Gi",
                executor_id=EXECUTOR,
                sandbox=self.sandbox,
            )
        self.processes[name] = process
        return process

    def restart(self, name: str, down: float = 0) -> Process:
        """SIGKILL, then start it again `down` seconds later."""
        self.processes[name].kill()
        time.sleep(down)
        return self.start(name)

    def stop(self) -> None:
        for process in reversed(self.started):
            process.stop()
        kill_leftovers(str(self.sandbox))  # pods a failed test left behind


@pytest.fixture(scope="module")
def armada_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArmadaProcesses]:
    armada = ArmadaProcesses(tmp_path_factory.mktemp("armada-processes"))
    try:
        armada.start("armada-server")
        armada.start("armada-executor")
        with ArmadaClient(armada.address) as client:
            client.create_queue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
        yield armada
    finally:
        armada.stop()


@pytest.fixture(scope="module")
def processes_admin(armada_processes: ArmadaProcesses) -> Iterator[ArmadaClient]:
    """A client of the server process; while it is down, calls wait for it to come back."""
    with ArmadaClient(armada_processes.address, wait_for_ready=True, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def processes_deployment(
    tmp_path_factory: pytest.TempPathFactory, armada_processes: ArmadaProcesses
) -> Iterator[Deployment]:
    """The deployment against the server process (its code location's ARMADA_ADDRESS)."""
    with deployed(
        tmp_path_factory.mktemp("processes-deployment"), armada_processes.address, QUEUE
    ) as running:
        yield running


# --- the step's Armada jobs -----------------------------------------------------------------


@dataclass
class StepJobs:
    """The Armada jobs of one logical step (a root run's `wait_for_release`), found on the
    server by the task's external job URI in the job sets of the lineage's runs."""

    admin: ArmadaClient
    queue: str
    root: str
    job_sets: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        identity = task_identity(
            root_run_id=self.root, step_key=STEP, run_id=self.root, retry_number=0
        )
        self.uri = identity.external_job_uri
        self.task = identity.annotations()[TASK_ANNOTATION]
        self.add_run(self.root)

    def add_run(self, run_id: str) -> None:
        if f"dagster-{run_id}" not in self.job_sets:
            self.job_sets.append(f"dagster-{run_id}")

    def in_run(self, run_id: str) -> dict[str, int]:
        return self.admin.get_job_status_by_external_uri(self.queue, f"dagster-{run_id}", self.uri)

    def all(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for job_set in list(self.job_sets):
            found.update(self.admin.get_job_status_by_external_uri(self.queue, job_set, self.uri))
        return found

    def submitted(self) -> list[str]:
        """Every job of the step ever submitted, from the job sets' events (by the task
        annotation every job of the task carries)."""
        return [
            m.message.submitted.job_id
            for job_set in self.job_sets
            for m in self.admin.get_job_set_events(self.queue, job_set)
            if m.message.WhichOneof("events") == "submitted"
            and m.message.submitted.job.annotations.get(TASK_ANNOTATION) == self.task
        ]

    def event_time(self, job_set: str, job_id: str, kind: str) -> float:
        for m in self.admin.get_job_set_events(self.queue, job_set):
            if m.message.WhichOneof("events") == kind:
                event = getattr(m.message, kind)
                if event.job_id == job_id:
                    return float(event.created.ToNanoseconds() / 1e9)
        raise AssertionError(f"no {kind} event for job {job_id} in job set {job_set}")


class LiveJobCounter:
    """Polls the server all along: how many of the step's jobs are live at once, at most.

    Each poll first finds the step's job ids, then reads all their states in one call, so a
    job ending and the next starting between two reads cannot pass for an overlap. A poll the
    server cannot answer (it is being restarted) is skipped."""

    def __init__(self, jobs: StepJobs) -> None:
        self.jobs = jobs
        self.known: set[str] = set()
        self.most = 0
        self.polls = 0
        self.unanswered = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.known |= set(self.jobs.all())
                if self.known:
                    states = self.jobs.admin.get_job_status(sorted(self.known))
                    live = [j for j, s in states.items() if s in LIVE_STATES]
                    self.most = max(self.most, len(live))
                    self.polls += 1
            except Unavailable:
                self.unanswered += 1
            except BaseException as e:  # surfaced by the test
                self.errors.append(e)
                return
            self._stop.wait(0.1)

    def __enter__(self) -> LiveJobCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    wait_until(condition, timeout, what, interval=0.05)


def pod_running(job_id: str) -> bool:
    return bool(processes_mentioning(f"HOSTNAME=armada-{job_id}-0"))


def release(deployment: Deployment, root: str) -> None:
    marker = deployment.home / "markers" / root
    marker.mkdir(exist_ok=True)
    (marker / "release").touch()


@contextlib.contextmanager
def releasing(deployment: Deployment, root: str) -> Iterator[None]:
    """Releases the lineage's jobs on the way out, whatever happened (no pod left waiting)."""
    try:
        yield
    finally:
        release(deployment, root)


def running_job(jobs: StepJobs, run_id: str, timeout: float = 120) -> str:
    """The step's job of `run_id`, once it runs."""
    found: dict[str, int] = {}
    wait_for(
        lambda: found.update(jobs.in_run(run_id)) or submit_pb2.RUNNING in found.values(),
        timeout,
        f"run {run_id}'s job to run",
    )
    [job_id] = [j for j, s in found.items() if s == submit_pb2.RUNNING]
    return job_id


# --- scenarios ------------------------------------------------------------------------------


def test_a_killed_run_worker_is_retried_without_a_duplicate_job(
    deployment: Deployment, admin: ArmadaClient, deployment_queue: str
) -> None:
    """The run worker dies right after its step submitted a job; Dagster fails the run and
    its run retry re-executes the step under a new run id. The retry cancels the first job
    (no zombie) and waits for its end before submitting its own: never two at once."""
    first_run = deployment.launch()
    jobs = StepJobs(admin, deployment_queue, first_run)
    with LiveJobCounter(jobs) as counter, releasing(deployment, first_run):
        first: dict[str, int] = {}
        wait_for(
            lambda: first.update(jobs.in_run(first_run)) or first,
            120,
            "the first run's job to be submitted",
        )
        [first_job] = first
        worker = deployment.worker_pid(first_run)
        code_server = deployment.processes["code-server"].popen.pid
        assert parent_of(worker) == code_server  # the run worker, not something else
        kill_tree(worker)

        assert deployment.wait_finished(first_run) == DagsterRunStatus.FAILURE
        retries: list[str] = []
        wait_for(
            lambda: retries.extend(deployment.children(first_run)) or retries,
            90,
            "the run retry to be created",
        )
        [retry_run] = retries
        jobs.add_run(retry_run)
        retry_job = running_job(jobs, retry_run)
        assert admin.get_job_status([first_job])[first_job] == submit_pb2.CANCELLED
        release(deployment, first_run)
        assert deployment.wait_finished(retry_run) == DagsterRunStatus.SUCCESS
    assert not counter.errors, counter.errors
    assert counter.polls > 10 and counter.most == 1
    assert admin.get_job_status([retry_job])[retry_job] == submit_pb2.SUCCEEDED
    assert sorted(jobs.submitted()) == sorted([first_job, retry_job])
    # The first job's end was recorded before the second was submitted, on the server's clock.
    assert jobs.event_time(f"dagster-{first_run}", first_job, "cancelled") <= jobs.event_time(
        f"dagster-{retry_run}", retry_job, "submitted"
    )
    details = admin.get_job_details([first_job])[first_job]
    assert details.cancel_reason == f"replaced by attempt {retry_run}/0 of {STEP}"
    assert f"Cancelling Armada job(s) {first_job}" in deployment.messages(retry_run)
    wait_for(lambda: not pod_running(first_job), 30, "the first job's pod to be gone")
    assert deployment.children(retry_run) == []


def test_terminating_a_run_through_graphql_cancels_its_job(
    deployment: Deployment, admin: ArmadaClient, deployment_queue: str
) -> None:
    run_id = deployment.launch()
    jobs = StepJobs(admin, deployment_queue, run_id)
    job_id = running_job(jobs, run_id)
    deployment.graphql.terminate_run(run_id)
    assert deployment.wait_finished(run_id) == DagsterRunStatus.CANCELED
    # No zombie once Dagster says the run ended: the job was cancelled before.
    assert admin.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED
    assert "was terminated" in admin.get_job_details([job_id])[job_id].cancel_reason
    wait_for(lambda: not pod_running(job_id), 30, "the job's pod to be gone")
    assert jobs.submitted() == [job_id]


@pytest.mark.parametrize("killed", ["daemon", "webserver"])
def test_killing_the_daemon_or_webserver_loses_and_duplicates_nothing(
    deployment: Deployment, admin: ArmadaClient, deployment_queue: str, killed: str
) -> None:
    run_id = deployment.launch()
    jobs = StepJobs(admin, deployment_queue, run_id)
    with LiveJobCounter(jobs) as counter, releasing(deployment, run_id):
        job_id = running_job(jobs, run_id)
        deployment.restart(killed)  # SIGKILL, then start it again
        assert deployment.status(run_id) == DagsterRunStatus.STARTED
        assert jobs.in_run(run_id) == {job_id: submit_pb2.RUNNING}
        release(deployment, run_id)
        assert deployment.wait_finished(run_id) == DagsterRunStatus.SUCCESS
    assert not counter.errors, counter.errors
    assert counter.most == 1
    assert jobs.submitted() == [job_id]
    assert admin.get_job_status([job_id])[job_id] == submit_pb2.SUCCEEDED
    assert deployment.children(run_id) == []


def test_killing_the_code_server_loses_and_duplicates_nothing(
    deployment: Deployment, admin: ArmadaClient, deployment_queue: str
) -> None:
    """SIGKILL the code server alone while the step's job runs: the run worker it started
    (a child process) runs on, orphaned, and so does the step's wait. Started again on the
    same port, the code server has a new server id; the webserver loads the location from it.
    The run ends successfully on its one job: never two live, none live once it ended, no
    run retry."""
    run_id = deployment.launch()
    jobs = StepJobs(admin, deployment_queue, run_id)
    with LiveJobCounter(jobs) as counter, releasing(deployment, run_id):
        job_id = running_job(jobs, run_id)
        code_server = deployment.processes["code-server"]
        worker = deployment.worker_pid(run_id)
        assert parent_of(worker) == code_server.popen.pid
        old_server = deployment.location_server_id()
        assert old_server is not None
        code_server.kill()  # the process alone, not its run worker
        assert alive(worker)
        deployment.start("code-server")
        deployment.wait_ready("code-server")
        new_server = DagsterGrpcClient(port=deployment.grpc_port, host="127.0.0.1").get_server_id()
        assert new_server != old_server
        wait_for(
            lambda: deployment.location_server_id() == new_server,
            60,
            "the webserver to load the location from the new code server",
        )
        assert alive(worker)
        assert deployment.status(run_id) == DagsterRunStatus.STARTED
        assert jobs.in_run(run_id) == {job_id: submit_pb2.RUNNING}
        release(deployment, run_id)
        assert deployment.wait_finished(run_id) == DagsterRunStatus.SUCCESS
        # No zombie once Dagster says the run ended: the job has ended.
        assert admin.get_job_status([job_id])[job_id] == submit_pb2.SUCCEEDED
    assert not counter.errors, counter.errors
    assert counter.most == 1
    assert jobs.submitted() == [job_id]
    assert deployment.children(run_id) == []
    wait_for(lambda: not alive(worker), 30, "the orphaned run worker to exit")
    wait_for(lambda: not pod_running(job_id), 30, "the job's pod to be gone")


def runs_of(admin: ArmadaClient, job_id: str) -> list[tuple[str, int]]:
    """The job's runs on the server: (executor, run state) each."""
    details = admin.get_job_details([job_id], expand_job_run=True)[job_id]
    return [(run.cluster, run.state) for run in details.job_runs]


@pytest.mark.parametrize("killed", ["armada-executor", "armada-server"])
def test_killing_the_armada_executor_or_server_loses_and_duplicates_nothing(
    processes_deployment: Deployment,
    armada_processes: ArmadaProcesses,
    processes_admin: ArmadaClient,
    killed: str,
) -> None:
    """While the step's job runs, the executor or the server dies by SIGKILL and is started
    again: the executor adopts the job's running pod, the server comes back on the same
    database and address. The step's wait goes on to the job's success: one Dagster run, one
    Armada job with one run, never two live at once, none live once the run has ended."""
    deployment, admin = processes_deployment, processes_admin
    run_id = deployment.launch()
    jobs = StepJobs(admin, QUEUE, run_id)
    with LiveJobCounter(jobs) as counter, releasing(deployment, run_id):
        job_id = running_job(jobs, run_id)
        wait_for(lambda: pod_running(job_id), 30, "the job's pod to run")
        polls = counter.polls
        restarted = armada_processes.restart(
            killed, down=SERVER_OUTAGE if killed == "armada-server" else 0
        )
        if killed == "armada-executor":
            assert "adopted 1 runs" in restarted.output()
        assert pod_running(job_id)
        assert deployment.status(run_id) == DagsterRunStatus.STARTED
        assert jobs.in_run(run_id) == {job_id: submit_pb2.RUNNING}
        wait_for(lambda: counter.polls > polls + 5, 30, "the counter to poll the server again")
        release(deployment, run_id)
        assert deployment.wait_finished(run_id) == DagsterRunStatus.SUCCESS
        # No zombie once Dagster says the run ended: the job has ended.
        assert admin.get_job_status([job_id])[job_id] == submit_pb2.SUCCEEDED
    assert not counter.errors, counter.errors
    assert counter.most == 1
    assert jobs.submitted() == [job_id]
    assert runs_of(admin, job_id) == [(EXECUTOR, job_pb2.RUN_STATE_SUCCEEDED)]
    # The job's program started once: its pod lived through the restart.
    started = deployment.home / "markers" / run_id / "started"
    assert started.read_text().split() == [f"armada-{job_id}-0"]
    assert deployment.children(run_id) == []
    wait_for(lambda: not pod_running(job_id), 30, "the job's pod to be gone")


# --- the reaper sensor: runs ended behind their steps' back ----------------------------------

DELETE = """
mutation ($runId: String!) { deletePipelineRun(runId: $runId) { __typename } }
"""


@pytest.mark.parametrize("how", ["marked failed", "deleted"])
def test_a_run_ended_behind_its_steps_back_has_its_job_cancelled(
    deployment: Deployment, admin: ArmadaClient, deployment_queue: str, how: str
) -> None:
    """A run marked failed in the instance while its run worker goes on (as run monitoring
    does when it takes the worker for dead; no run retry), or deleted through GraphQL, while
    its step waits on its job: nobody tells the step. The reaper sensor cancels the job,
    naming the run's state; another run's job, whose run is STARTED, runs on to its end."""
    run_id = deployment.graphql.submit_job_execution(
        JOB, repository_location_name=LOCATION, tags={"dagster/max_retries": "0"}
    )
    other = deployment.launch()
    jobs, other_jobs = (
        StepJobs(admin, deployment_queue, run_id),
        StepJobs(admin, deployment_queue, other),
    )
    with releasing(deployment, run_id), releasing(deployment, other):
        # (two runs at once: their step processes may take minutes on a loaded machine)
        job_id = running_job(jobs, run_id, timeout=300)
        other_job = running_job(other_jobs, other, timeout=300)
        if how == "marked failed":
            run = deployment.instance.get_run_by_id(run_id)
            assert run is not None
            deployment.instance.report_run_failed(run, "marked failed by hand")
            state = "FAILURE"
        else:
            deployment.graphql._execute(DELETE, {"runId": run_id})
            state = "deleted"
        wait_for(
            lambda: admin.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED,
            90,
            "the reaper sensor to cancel the job",
        )
        reason = admin.get_job_details([job_id])[job_id].cancel_reason
        assert reason == f"dagster run {run_id} is {state}"
        assert other_jobs.in_run(other) == {other_job: submit_pb2.RUNNING}
        assert deployment.status(other) == DagsterRunStatus.STARTED
        release(deployment, other)
        assert deployment.wait_finished(other) == DagsterRunStatus.SUCCESS
    assert admin.get_job_status([other_job])[other_job] == submit_pb2.SUCCEEDED
    assert deployment.children(run_id) == []
