"""Dagster as a user deploys it, against a real Armada server with a local executor: a code
server (`dagster api grpc`), `dagster-daemon run` and `dagster-webserver` on one
DAGSTER_HOME with run retries enabled and the default run launcher and run coordinator. Runs
are launched and terminated through the webserver's GraphQL API, and processes are killed
with SIGKILL the way a node or a container dies.

What is checked is what the task lifecycle promises: a step has at most one live Armada job
at any time, counted on the server by the task's external job URI, whatever Dagster kills or
re-executes; the job of a killed run is cancelled by its retry (no zombie), and a terminated
run's job is cancelled before Dagster reports the run ended.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.events.log import EventLogEntry
from dagster._core.instance.ref import InstanceRef
from dagster_graphql import DagsterGraphQLClient

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_core.client.lifecycle import TASK_ANNOTATION
from armada_core.client.reattach import LIVE_STATES
from armada_server.app import EmbeddedServer
from dagster_armada import task_identity
from tests.dagster.scripts import deployment_defs
from tests.e2e.processes import BIN, Process, processes_mentioning, wait_until

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


def process_tree(pid: int) -> list[int]:
    """`pid` and every process descending from it."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (ppid := parent_of(int(entry.name))) is not None:
            parents.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += parents.get(current, [])
    return tree


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
            "code-server": [str(BIN / "dagster"), "api", "grpc", "--python-file",
                            deployment_defs.__file__, "--host", "127.0.0.1", "--port",
                            str(self.grpc_port), "--location-name", LOCATION],
            "daemon": [str(BIN / "dagster-daemon"), "run", "-w", workspace],
            "webserver": [str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1",
                          "-p", str(self.web_port)],
        }[name]
        return self._start(name, argv)

    def wait_ready(self, name: str) -> None:
        pattern = {"code-server": r"Started Dagster code server",
                   "daemon": r"Instance is configured with the following daemons",
                   "webserver": r"Serving dagster-webserver on"}[name]
        self.processes[name].wait_for(pattern, timeout=120)
        if name == "webserver":  # it says so before it listens
            wait_until(self._serving, 60, "the webserver to answer")

    def _serving(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/server_info",
                                        timeout=5) as answer:
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

    @property
    def instance(self) -> DagsterInstance:
        """The instance, read by the test only to find runs and their event logs."""
        if self._instance is None:
            self._instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(self.home)))
        return self._instance

    def stop(self) -> None:
        code_server = self.processes.get("code-server")
        leftovers = (process_tree(code_server.popen.pid)[1:]
                     if code_server and code_server.popen.poll() is None else [])
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
        wait_until(lambda: statuses.append(self.status(run_id)) or statuses[-1] in FINISHED,
                   timeout, f"run {run_id} to finish", interval=0.1)
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


@pytest.fixture(scope="module")
def deployment_queue(admin: ArmadaClient) -> str:
    admin.create_queue(submit_pb2.Queue(name="dagster-deployment", priority_factor=1))
    return "dagster-deployment"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, server: EmbeddedServer,
               deployment_queue: str) -> Iterator[Deployment]:
    home = tmp_path_factory.mktemp("deployment")
    grpc_port, web_port = free_ports(2)
    (home / "dagster.yaml").write_text(yaml.safe_dump({
        "telemetry": {"enabled": False},
        "run_retries": {"enabled": True, "max_retries": 1},
    }))
    (home / "workspace.yaml").write_text(yaml.safe_dump({"load_from": [{"grpc_server": {
        "host": "127.0.0.1", "port": grpc_port, "location_name": LOCATION}}]}))
    (home / "markers").mkdir()
    env = {"DAGSTER_HOME": str(home), "ARMADA_ADDRESS": server.address,
           "ARMADA_QUEUE": deployment_queue, "ARMADA_TEST_MARKERS": str(home / "markers"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    running = Deployment(home=home, logs=home, env=env, web_port=web_port,
                         grpc_port=grpc_port)
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
        identity = task_identity(root_run_id=self.root, step_key=STEP, run_id=self.root,
                                 retry_number=0)
        self.uri = identity.external_job_uri
        self.task = identity.annotations()[TASK_ANNOTATION]
        self.add_run(self.root)

    def add_run(self, run_id: str) -> None:
        if f"dagster-{run_id}" not in self.job_sets:
            self.job_sets.append(f"dagster-{run_id}")

    def in_run(self, run_id: str) -> dict[str, int]:
        return self.admin.get_job_status_by_external_uri(self.queue, f"dagster-{run_id}",
                                                         self.uri)

    def all(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for job_set in list(self.job_sets):
            found.update(self.admin.get_job_status_by_external_uri(self.queue, job_set,
                                                                   self.uri))
        return found

    def submitted(self) -> list[str]:
        """Every job of the step ever submitted, from the job sets' events (by the task
        annotation every job of the task carries)."""
        return [m.message.submitted.job_id
                for job_set in self.job_sets
                for m in self.admin.get_job_set_events(self.queue, job_set)
                if m.message.WhichOneof("events") == "submitted"
                and m.message.submitted.job.annotations.get(TASK_ANNOTATION) == self.task]

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
    job ending and the next starting between two reads cannot pass for an overlap."""

    def __init__(self, jobs: StepJobs) -> None:
        self.jobs = jobs
        self.known: set[str] = set()
        self.most = 0
        self.polls = 0
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
    wait_for(lambda: found.update(jobs.in_run(run_id)) or
             submit_pb2.RUNNING in found.values(), timeout, f"run {run_id}'s job to run")
    [job_id] = [j for j, s in found.items() if s == submit_pb2.RUNNING]
    return job_id


# --- scenarios ------------------------------------------------------------------------------

def test_a_killed_run_worker_is_retried_without_a_duplicate_job(
        deployment: Deployment, admin: ArmadaClient, deployment_queue: str) -> None:
    """The run worker dies right after its step submitted a job; Dagster fails the run and
    its run retry re-executes the step under a new run id. The retry cancels the first job
    (no zombie) and waits for its end before submitting its own: never two at once."""
    first_run = deployment.launch()
    jobs = StepJobs(admin, deployment_queue, first_run)
    with LiveJobCounter(jobs) as counter, releasing(deployment, first_run):
        first: dict[str, int] = {}
        wait_for(lambda: first.update(jobs.in_run(first_run)) or first, 120,
                 "the first run's job to be submitted")
        [first_job] = first
        worker = deployment.worker_pid(first_run)
        code_server = deployment.processes["code-server"].popen.pid
        assert parent_of(worker) == code_server  # the run worker, not something else
        kill_tree(worker)

        assert deployment.wait_finished(first_run) == DagsterRunStatus.FAILURE
        retries: list[str] = []
        wait_for(lambda: retries.extend(deployment.children(first_run)) or retries, 90,
                 "the run retry to be created")
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
    assert jobs.event_time(f"dagster-{first_run}", first_job, "cancelled") <= \
        jobs.event_time(f"dagster-{retry_run}", retry_job, "submitted")
    details = admin.get_job_details([first_job])[first_job]
    assert details.cancel_reason == f"replaced by attempt {retry_run}/0 of {STEP}"
    assert f"Cancelling Armada job(s) {first_job}" in deployment.messages(retry_run)
    wait_for(lambda: not pod_running(first_job), 30, "the first job's pod to be gone")
    assert deployment.children(retry_run) == []


def test_terminating_a_run_through_graphql_cancels_its_job(
        deployment: Deployment, admin: ArmadaClient, deployment_queue: str) -> None:
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
        deployment: Deployment, admin: ArmadaClient, deployment_queue: str,
        killed: str) -> None:
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
