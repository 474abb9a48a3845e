"""The provider in a real Airflow deployment: what a user runs, as separate processes.

`airflow api-server`, `airflow scheduler` (LocalExecutor), `airflow dag-processor` and
`airflow triggerer` on a PostgreSQL metadata database, a DAGs folder with a deferrable
`ArmadaOperator` task, and the Armada side as separate processes too: an `armada-server
--executor none` on a SQLite file and an `armada-executor --kind local` running the jobs; all
driven through Airflow's REST API; beside them `armada reap`, the reconciler of tasks that
ended while no triggerer ran. The deployment starts once for the module (Airflow's
components take a while to start) and each test triggers its own DAG run.

Every test counts the task's jobs on the Armada server by the task's external job URI: no
duplicate, no two jobs of the task live at once, none left live once Airflow says the task
ended, and the task's state as the outcome mapping promises. Any component may be SIGKILLed
and started again, Airflow's and Armada's alike.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import secrets
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient

from ..e2e.processes import (
    Process,
    kill_leftovers,
    start_executor,
    start_server,
    wait_until,
)
from ..postgres import PostgresServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow]

BIN = Path(sys.executable).parent
QUEUE = "airflow"
DAG_ID = "armada_deployment"
#: The same task, not deferrable: its worker waits for the job, heartbeating to the API server
#: through the Execution API all along.
BLOCKING_DAG_ID = "armada_deployment_blocking"
TASK_ID = "work"
LIVE = {
    submit_pb2.SUBMITTED,
    submit_pb2.QUEUED,
    submit_pb2.LEASED,
    submit_pb2.PENDING,
    submit_pb2.RUNNING,
}
#: The server's settings. A lease outlives an executor or a server away for a restart, and so
#: do the pods (they fence themselves three quarters of it after the last sync); an idle event
#: stream reopened after a restart has a heartbeat within seconds to show it is back.
ARMADA_SETTINGS = {
    "scheduling_period": 0.1,
    "executor_sync_interval": 0.2,
    "lease_timeout": 30,
    "heartbeat_seconds": 2,
}
NODES = "2x2x2Gi"
#: What a worker logs (to its scheduler's output) each time it retries a call to the
#: Execution API it could not make, and what an API server logs on a task's heartbeat.
EXECUTION_API_RETRY = "Starting call to 'airflow.sdk.api.client.Client.request'"
HEARTBEAT = re.compile(r"method=PUT path=/execution/task-instances/\S+/heartbeat .*status_code=204")
EXECUTOR_ID = "armada-executor"
#: Seconds between the reaper's rounds (20 by default); it cancels on the second round that
#: finds a task over, after the trigger's own on_kill had its chance.
REAP_INTERVAL = 2

#: The DAGs the deployment runs: DAG_ID's task defers, BLOCKING_DAG_ID's waits in its worker.
#: The job runs until the file conf["release"] exists, so a test decides when it ends. With
#: conf["gate"], a try stays in its worker after submitting until that file exists (a worker
#: slow between submission and deferral), so a test can kill the scheduler, and the worker
#: with it, while the task is there.
DAG_FILE = """
import os
import time
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_armada.operators.armada import ArmadaOperator


class GatedArmadaOperator(ArmadaOperator):
    def _submit_or_reattach(self, context, client, identity):
        submission = super()._submit_or_reattach(context, client, identity)
        gate = context["dag_run"].conf.get("gate")
        while gate and not os.path.exists(gate):
            time.sleep(0.2)
        return submission


for dag_id, deferrable in (("armada_deployment", True), ("armada_deployment_blocking", False)):
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
        GatedArmadaOperator(
            task_id="work", armada_queue="airflow", retries=1, retry_delay=timedelta(seconds=1),
            deferrable=deferrable, log_interval=0.5, poll_interval=1.0,
            pod_spec={"containers": [{
                "name": "main", "image": "busybox",
                "command": ["sh", "-c", "echo start try {{ ti.try_number }}; "
                            "while [ ! -e {{ dag_run.conf['release'] }} ]; do sleep 0.2; done; "
                            "echo done try {{ ti.try_number }}"],
                "resources": {"requests": {"cpu": "200m", "memory": "64Mi"},
                              "limits": {"cpu": "200m", "memory": "64Mi"}}}]})
"""


# --- processes ------------------------------------------------------------------------------


def component(name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> Process:
    """One process of the deployment, in a session of its own; its output goes to
    `<name>.log`. `kill(tree=True)` is a crash: SIGKILL to it and every process it started (a
    triggerer's runner, a scheduler's executor workers and the tasks they run), as when its
    machine goes away; `kill()` alone is SIGKILL to the process only (an executor whose pods
    run on, as pods on Kubernetes outlive a crashed executor)."""
    return Process(name, argv, log_dir, env=env, new_session=True)


class ArmadaSide:
    """`armada-server --executor none` on a SQLite file and `armada-executor --kind local`
    syncing with it, components of the deployment started by the end-to-end tests' helpers.
    Started again after a crash, the server opens the same database on the address it had,
    and the executor has the same id and sandbox, so it adopts the pods it left running."""

    def __init__(self, root: Path, sandbox: Path, components: dict[str, Process]) -> None:
        self.root = root
        self.sandbox = sandbox
        self.components = components
        self.address = ""  # once the server first listens

    def start(self, name: str) -> Process:
        """`name` (armada-server or armada-executor), under a log of its own each time (the
        helpers wait for words in it)."""
        log_name = f"{name}.{len(list(self.root.glob(f'{name}.*.log')))}"
        if name == "armada-server":
            component, address = start_server(
                self._component,
                log_name,
                self.root,
                f"sqlite:///{self.root / 'armada.db'}",
                **ARMADA_SETTINGS,
            )
            assert self.address in ("", address), f"restarted on {address}, not {self.address}"
            self.address = address
        else:
            component = start_executor(
                self._component,
                log_name,
                self.address,
                "local",
                self.root,
                NODES,
                sandbox=self.sandbox,
                executor_id=EXECUTOR_ID,
            )
        self.components[name] = component
        return component

    def _component(self, name: str, *argv: str) -> Process:
        """How the helpers start a process; a server started again gets the port it had
        rather than a free one (`--port 0`)."""
        args = list(argv)
        if self.address and "--port" in args:
            args[args.index("--port") + 1] = self.address.rsplit(":", 1)[1]
        return component(name, args, dict(os.environ), self.root)


# --- the deployment -------------------------------------------------------------------------


@dataclass
class Deployment:
    root: Path
    env: dict[str, str]
    api: httpx.Client
    armada: ArmadaClient
    components: dict[str, Process]
    armada_side: ArmadaSide
    dag_of: dict[str, str] = field(default_factory=dict)  # each run's DAG

    def start(self, name: str) -> Process:
        """`airflow <name>`, armada-server or armada-executor (again, after a crash), or the
        reaper (`armada reap`, which finds Airflow's API through AIRFLOW__API__BASE_URL)."""
        if name.startswith("armada-"):
            return self.armada_side.start(name)
        argv = [str(BIN / "airflow"), name]
        if name == "reaper":
            argv = [str(BIN / "armada"), "--url", self.armada_side.address, "reap"]
            argv += ["--interval", str(REAP_INTERVAL), "--status-file", str(self.reaper_status)]
        if name == "api-server":
            argv += ["--port", self.env["AIRFLOW__API__PORT"], "--workers", "1"]
        log_name = f"{name}.{len(list(self.root.glob(f'{name}.*.log')))}"
        self.components[name] = component(log_name, argv, self.env, self.root)
        return self.components[name]

    @property
    def reaper_status(self) -> Path:
        return self.root / "reaper.json"

    def reaper_counters(self) -> dict[str, Any]:
        """The reaper's counters (none before its first round)."""
        with contextlib.suppress(FileNotFoundError):
            counters: dict[str, Any] = json.loads(self.reaper_status.read_text())
            return counters
        return {"rounds": 0, "cancelled": 0, "unreachable": 0}

    def mark(self, run_id: str, state: str) -> None:
        """Mark the task `state` (failed, success) as a user does in the UI."""
        marked = self.api.patch(
            f"/api/v2/dags/{self.dag_of[run_id]}/dagRuns/{run_id}/taskInstances/{TASK_ID}",
            json={"new_state": state},
        )
        marked.raise_for_status()
        assert self.task(run_id)["state"] == state

    # REST API

    def trigger(self, dag_id: str = DAG_ID, **conf: Any) -> str:
        """A run of `dag_id` (DAG_ID, deferrable, or BLOCKING_DAG_ID); its run id."""
        run_id = f"test-{uuid.uuid4().hex[:12]}"
        answer = self.api.post(
            f"/api/v2/dags/{dag_id}/dagRuns",
            json={"dag_run_id": run_id, "logical_date": None, "conf": conf},
        )
        answer.raise_for_status()
        self.dag_of[run_id] = dag_id
        return run_id

    def run_state(self, run_id: str) -> str:
        answer = self.api.get(f"/api/v2/dags/{self.dag_of[run_id]}/dagRuns/{run_id}")
        answer.raise_for_status()
        return answer.json()["state"]

    def task(self, run_id: str) -> dict[str, Any]:
        answer = self.api.get(
            f"/api/v2/dags/{self.dag_of[run_id]}/dagRuns/{run_id}/taskInstances/{TASK_ID}"
        )
        answer.raise_for_status()
        return answer.json()

    def task_log(self, run_id: str, try_number: int) -> str:
        """The try's task log, as the worker and the triggerer wrote it."""
        logs = self.root / "home" / "logs"
        found = sorted(
            logs.glob(
                f"dag_id={self.dag_of[run_id]}/run_id={run_id}/"
                f"task_id={TASK_ID}/attempt={try_number}.log*"
            )
        )
        return "".join(p.read_text(errors="replace") for p in found)

    def api_ready(self) -> bool:
        """The API server answers (and the client has a token for it)."""
        with contextlib.suppress(httpx.HTTPError):
            token = self.api.get("/auth/token")
            if token.status_code < 300:
                self.api.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
                return True
        return False

    # Armada

    def jobs(self, run_id: str) -> dict[str, job_pb2.JobDetails]:
        """Every job of the task on the Armada server, found by its external job URI, with
        its runs."""
        dag_id = self.dag_of[run_id]
        states = self.armada.get_job_status_by_external_uri(
            QUEUE, f"{dag_id}-{run_id}", f"airflow://{dag_id}/{run_id}/{TASK_ID}/-1"
        )
        return self.armada.get_job_details(list(states), expand_job_run=True) if states else {}

    def live(self, run_id: str) -> list[str]:
        return [j for j, d in self.jobs(run_id).items() if d.state in LIVE]

    # waiting

    def until(self, condition: Callable[[], object], what: str, timeout: float = 120) -> None:
        try:
            wait_until(condition, timeout, what, interval=0.3)
        except AssertionError as e:
            tails = "\n".join(
                f"--- {c.name} ---\n{c.output()[-3000:]}" for c in self.components.values()
            )
            raise AssertionError(f"{e}\n{tails}") from None

    def task_in(self, run_id: str, *states: str, try_number: int | None = None) -> bool:
        ti = self.task(run_id)
        return ti["state"] in states and try_number in (None, ti["try_number"])

    def followed(self, run_id: str, job_id: str, try_number: int = 1) -> None:
        """Until the try follows the job: in its worker (not deferrable), or in a triggerer
        (Airflow kills a deferred task through its running trigger only) once the scheduler
        has processed the exit of the worker that deferred it (an exit reported only after
        the trigger fired has the scheduler fail the try: by then the task is queued again,
        for its resume, and Airflow takes the exit for an external failure)."""
        self.until(
            lambda: f"Armada job {job_id} is RUNNING" in self.task_log(run_id, try_number),
            "the try following the job",
        )
        if self.dag_of[run_id] == DAG_ID:
            self.deferring_worker_gone(run_id, try_number)

    def deferring_worker_gone(self, run_id: str, try_number: int) -> None:
        """Until the scheduler has processed the exit of the worker that deferred the try."""
        exited = (
            "Received executor event with state success for task instance "
            f"TaskInstanceKey(dag_id='{DAG_ID}', task_id='{TASK_ID}', "
            f"run_id='{run_id}', try_number={try_number},"
        )
        self.until(
            lambda: exited in self.components["scheduler"].output(),
            "the deferring worker's exit processed",
        )

    def running_job(self, run_id: str) -> str:
        """Once the task has a job running: its id."""
        self.until(
            lambda: any(d.state == submit_pb2.RUNNING for d in self.jobs(run_id).values()),
            "a job of the task running",
        )
        [job_id] = [j for j, d in self.jobs(run_id).items() if d.state == submit_pb2.RUNNING]
        return job_id

    # what every test checks at the end

    def succeeded_on(self, run_id: str, job_id: str, try_number: int = 1) -> None:
        """Once the run is done: the task succeeded at `try_number` on `job_id`, its one job,
        which succeeded in one run on the executor (the task ended with no job live, and never
        had two live at once); the job's output reached the try's log."""
        self.until(lambda: self.run_state(run_id) == "success", "the run done")
        ti = self.task(run_id)
        assert succeeded_at(ti, try_number)
        try_number = ti["try_number"]  # a try Airflow added reattached to the job
        jobs = self.jobs(run_id)
        assert list(jobs) == [job_id]
        assert jobs[job_id].state == submit_pb2.SUCCEEDED
        assert [(r.cluster, r.state) for r in jobs[job_id].job_runs] == [
            (EXECUTOR_ID, job_pb2.RUN_STATE_SUCCEEDED)
        ]
        assert_never_two_live(jobs)
        assert "done try 1" in self.task_log(run_id, try_number)


def succeeded_at(ti: dict[str, Any], try_number: int) -> bool:
    """The task instance succeeded at `try_number` or later. Under load Airflow's
    LocalExecutor can report the end of the workload that deferred after the task was queued
    to resume, and Airflow then retries it: the added try reattaches to the job (the callers
    check there is one job, or one per try the test made), an outcome of Airflow's, not of
    a job's."""
    return bool(ti["state"] == "success" and ti["try_number"] >= try_number)


def _free_of_airflow(environ: dict[str, str]) -> dict[str, str]:
    """The test process's environment without its own Airflow settings (conftest's)."""
    return {
        k: v
        for k, v in environ.items()
        if not (k.startswith("AIRFLOW") or k.startswith("_AIRFLOW"))
    }


def _tear_down(components: dict[str, Process], *marks: Path) -> None:
    """Nothing of the deployment outlives the module (no need to stop it gracefully)."""
    for process in reversed(list(components.values())):
        process.kill(tree=True)
    for mark in marks:  # task processes a crash orphaned, Armada pods
        kill_leftovers(str(mark))


@pytest.fixture(scope="module")
def deployment(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("deployment")
    home, dags, sandbox = root / "home", root / "dags", root / "pods"
    for d in (home, dags, sandbox):
        d.mkdir()
    (dags / "armada_deployment.py").write_text(DAG_FILE)
    components: dict[str, Process] = {}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(_tear_down, components, home, sandbox)
        armada_side = ArmadaSide(root, sandbox, components)
        armada_side.start("armada-server")
        armada_side.start("armada-executor")
        host, port = armada_side.address.rsplit(":", 1)
        # (calls wait for a server started again instead of failing while it comes up)
        armada = cleanup.enter_context(ArmadaClient(armada_side.address, wait_for_ready=True))
        armada.create_queue(submit_pb2.Queue(name=QUEUE, priority_factor=1))
        api_port = free_port()
        env = {
            **_free_of_airflow(dict(os.environ)),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres_server.new_database(),
            "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
            "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            # Log servers on free ports: other deployments may run on this machine.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            # Crashes are noticed in seconds, not minutes.
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "6",
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "3",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_SEC": "2",
            # A worker's calls to the Execution API (its heartbeats, a deferred task's resume)
            # outlast a restart of the API server: retried every second for 90 s, and the
            # scheduler gives a running task 90 s without a heartbeat. (A worker that died
            # with its scheduler is found by the next scheduler's orphan check, in seconds.)
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "90",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MIN": "1",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MAX": "1",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "90",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW_CONN_ARMADA_DEFAULT": json.dumps(
                {"conn_type": "armada", "host": host, "port": int(port)}
            ),
        }
        migrate = subprocess.run(
            [str(BIN / "airflow"), "db", "migrate"],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
        api = cleanup.enter_context(
            httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30)
        )
        deployment = Deployment(root, env, api, armada, components, armada_side)
        for name in ("api-server", "scheduler", "dag-processor", "triggerer", "reaper"):
            deployment.start(name)

        deployment.until(deployment.api_ready, "the API server", timeout=180)
        deployment.until(
            lambda: all(
                api.get(f"/api/v2/dags/{dag_id}").status_code == 200
                for dag_id in (DAG_ID, BLOCKING_DAG_ID)
            ),
            "the DAGs parsed",
            timeout=180,
        )
        deployment.until(
            lambda: all(
                part.get("status") == "healthy"
                for part in api.get("/api/v2/monitor/health").json().values()
            ),
            "every component healthy",
            timeout=180,
        )
        yield deployment


def assert_never_two_live(jobs: dict[str, job_pb2.JobDetails]) -> None:
    """No two jobs of the task were live (submitted, not yet ended) at the same time."""
    spans = sorted(
        (d.submitted_ts.ToNanoseconds(), d.last_transition_ts.ToNanoseconds(), j)
        for j, d in jobs.items()
    )
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        assert end <= start, f"jobs {first} and {second} of one task were live at once"


# --- the scenarios --------------------------------------------------------------------------


def test_a_triggerer_killed_while_the_task_is_deferred(
    deployment: Deployment, tmp_path: Path
) -> None:
    """SIGKILL the triggerer, let the job end meanwhile, start a new one: the new triggerer
    rebuilds the trigger, finds the job's end, and the task completes on its one job."""
    release = tmp_path / "release"
    run_id = deployment.trigger(release=str(release))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    deployment.components["triggerer"].kill(tree=True)
    release.touch()
    deployment.until(
        lambda: deployment.jobs(run_id)[job_id].state == submit_pb2.SUCCEEDED,
        "the job done while no triggerer runs",
    )
    deployment.start("triggerer")
    deployment.succeeded_on(run_id, job_id)


def test_a_scheduler_killed_with_the_worker_running_the_task(
    deployment: Deployment, tmp_path: Path
) -> None:
    """SIGKILL the scheduler (its LocalExecutor workers and the task process with it) while
    the task is in its worker, its job submitted; start a new one. The orphaned task runs
    again and its next try reattaches to the job: one job, and the task succeeds."""
    release, gate = tmp_path / "release", tmp_path / "gate"
    run_id = deployment.trigger(release=str(release), gate=str(gate))
    job_id = deployment.running_job(run_id)
    assert deployment.task_in(run_id, "running", try_number=1)
    deployment.components["scheduler"].kill(tree=True)
    gate.touch()
    deployment.start("scheduler")
    deployment.until(
        lambda: deployment.task_in(run_id, "deferred", try_number=2), "the next try deferred"
    )
    assert deployment.live(run_id) == [job_id]
    deployment.deferring_worker_gone(run_id, try_number=2)
    release.touch()
    deployment.succeeded_on(run_id, job_id, try_number=2)
    assert f"Reattaching to Armada job(s) {job_id}" in deployment.task_log(run_id, 2)


def test_a_running_task_cleared(deployment: Deployment, tmp_path: Path) -> None:
    """Clearing the deferred task kills it: its job is cancelled, and the next try runs a
    new job (never beside the old one) that succeeds."""
    release = tmp_path / "release"
    run_id = deployment.trigger(release=str(release))
    first = deployment.running_job(run_id)
    deployment.followed(run_id, first)
    cleared = deployment.api.post(
        f"/api/v2/dags/{DAG_ID}/clearTaskInstances",
        json={"dry_run": False, "dag_run_id": run_id, "task_ids": [TASK_ID], "only_failed": False},
    )
    cleared.raise_for_status()
    deployment.until(
        lambda: len(deployment.jobs(run_id)) == 2 and deployment.live(run_id), "the next try's job"
    )
    [second] = [j for j in deployment.jobs(run_id) if j != first]
    deployment.followed(run_id, second, try_number=2)
    release.touch()
    deployment.until(lambda: deployment.run_state(run_id) == "success", "the run done")
    assert succeeded_at(deployment.task(run_id), 2)
    jobs = deployment.jobs(run_id)
    assert set(jobs) == {first, second}
    assert (jobs[first].state, jobs[first].cancel_reason) == (
        submit_pb2.CANCELLED,
        "Airflow task killed (try 1)",
    )
    assert jobs[second].state == submit_pb2.SUCCEEDED
    assert_never_two_live(jobs)


def test_a_running_task_marked_failed(deployment: Deployment, tmp_path: Path) -> None:
    """Marking the deferred task failed kills it: its job is cancelled (no zombie once Airflow
    says the task ended) and nothing runs it again."""
    run_id = deployment.trigger(release=str(tmp_path / "release"))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    marked = deployment.api.patch(
        f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK_ID}",
        json={"new_state": "failed"},
    )
    marked.raise_for_status()
    assert deployment.task(run_id)["state"] == "failed"
    deployment.until(lambda: not deployment.live(run_id), "the job ended", timeout=30)
    deployment.until(lambda: deployment.run_state(run_id) == "failed", "the run failed")
    jobs = deployment.jobs(run_id)
    assert list(jobs) == [job_id]
    assert (jobs[job_id].state, jobs[job_id].cancel_reason) == (
        submit_pb2.CANCELLED,
        "Airflow task killed (try 1)",
    )
    ti = deployment.task(run_id)
    assert (ti["state"], ti["try_number"]) == ("failed", 1)
    assert_never_two_live(jobs)


def test_the_armada_executor_killed_while_the_job_runs(
    deployment: Deployment, tmp_path: Path
) -> None:
    """SIGKILL `armada-executor` while the deferred task's job runs (its pod runs on) and
    start it again: it adopts the pod, which finishes, and the task succeeds on its one job
    and that job's one run."""
    release = tmp_path / "release"
    run_id = deployment.trigger(release=str(release))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    deployment.components["armada-executor"].kill()
    executor = deployment.start("armada-executor")
    assert "adopted 1 runs" in executor.output(), executor.output()[-3000:]
    assert deployment.live(run_id) == [job_id]
    release.touch()
    deployment.succeeded_on(run_id, job_id)  # the pod's output after adoption in the log


def test_the_armada_server_killed_while_the_job_runs(
    deployment: Deployment, tmp_path: Path
) -> None:
    """SIGKILL `armada-server` while the deferred task's job runs and start it again on the
    same database and address: the trigger's event stream, broken meanwhile, resumes, the
    job runs on, and the task succeeds on its one job and that job's one run."""
    release = tmp_path / "release"
    run_id = deployment.trigger(release=str(release))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    deployment.components["armada-server"].kill(tree=True)
    deployment.until(
        lambda: "Armada event stream: event stream failed" in deployment.task_log(run_id, 1),
        "the trigger's event stream broken",
        timeout=30,
    )
    deployment.start("armada-server")
    deployment.until(
        lambda: re.search(
            r"Armada event stream: event stream (is back|reopened)", deployment.task_log(run_id, 1)
        ),
        "the trigger's event stream resumed",
        timeout=30,
    )
    assert deployment.live(run_id) == [job_id]
    release.touch()
    deployment.succeeded_on(run_id, job_id)


def test_the_api_server_killed_while_a_worker_waits_on_the_job(
    deployment: Deployment, tmp_path: Path
) -> None:
    """The task not deferrable: its worker waits for the job, heartbeating to the API server
    through the Execution API. SIGKILL the API server: the worker's heartbeat fails and is
    retried. Start it again: the heartbeat gets through, the worker's wait never noticed,
    and the task succeeds at its first try on its one job."""
    release = tmp_path / "release"
    run_id = deployment.trigger(BLOCKING_DAG_ID, release=str(release))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    worker = deployment.components["scheduler"]  # (its LocalExecutor workers log there)
    retried = worker.output().count(EXECUTION_API_RETRY)
    deployment.components["api-server"].kill(tree=True)
    deployment.until(
        lambda: worker.output().count(EXECUTION_API_RETRY) > retried,
        "the worker's heartbeat retried",
        timeout=60,
    )
    api_server = deployment.start("api-server")
    deployment.until(deployment.api_ready, "the API server back", timeout=180)
    deployment.until(
        lambda: HEARTBEAT.search(api_server.output()),
        "the worker's heartbeat through to the new API server",
        timeout=60,
    )
    assert deployment.task_in(run_id, "running", try_number=1)
    assert deployment.live(run_id) == [job_id]
    release.touch()
    deployment.succeeded_on(run_id, job_id)


def test_the_api_server_killed_while_the_task_is_deferred(
    deployment: Deployment, tmp_path: Path
) -> None:
    """SIGKILL the API server while the task is deferred and let the job end meanwhile: the
    trigger (its triggerer reaches the metadata database without the API server) sees the
    end, and the worker resuming the task waits for the API server, retrying. Start it
    again: the resumed try completes the task, at its first try, on its one job."""
    release = tmp_path / "release"
    run_id = deployment.trigger(release=str(release))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    worker = deployment.components["scheduler"]
    retried = worker.output().count(EXECUTION_API_RETRY)
    deployment.components["api-server"].kill(tree=True)
    release.touch()
    deployment.until(
        lambda: deployment.jobs(run_id)[job_id].state == submit_pb2.SUCCEEDED,
        "the job done while no API server runs",
    )
    deployment.until(
        lambda: worker.output().count(EXECUTION_API_RETRY) > retried,
        "the resuming worker's call retried",
        timeout=60,
    )
    deployment.start("api-server")
    deployment.until(deployment.api_ready, "the API server back", timeout=180)
    deployment.succeeded_on(run_id, job_id)


@pytest.mark.parametrize("dag_id", [DAG_ID, BLOCKING_DAG_ID])
def test_the_dag_processor_killed_while_the_job_runs(
    deployment: Deployment, tmp_path: Path, dag_id: str
) -> None:
    """SIGKILL the DAG processor (and its parsing processes) while the task's job runs,
    deferred or waited on in its worker, and start it again: the DAG is parsed anew, the
    task goes on at its first try, and succeeds on its one job."""
    release = tmp_path / "release"
    run_id = deployment.trigger(dag_id, release=str(release))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    state = deployment.task(run_id)["state"]
    assert state == ("deferred" if dag_id == DAG_ID else "running")

    def parsed() -> datetime:
        answer = deployment.api.get(f"/api/v2/dags/{dag_id}")
        answer.raise_for_status()
        return datetime.fromisoformat(answer.json()["last_parsed_time"])

    before = parsed()
    deployment.components["dag-processor"].kill(tree=True)
    deployment.start("dag-processor")
    deployment.until(lambda: parsed() > before, "the DAG parsed by the new DAG processor")
    assert deployment.task_in(run_id, state, try_number=1)
    assert deployment.live(run_id) == [job_id]
    release.touch()
    deployment.succeeded_on(run_id, job_id)


# --- the reaper: tasks ended behind the operator's back ---------------------------------------


def reaped_as(deployment: Deployment, run_id: str, job_id: str, state: str) -> None:
    """Until the reaper cancelled the job, with the reason naming the task's state."""
    deployment.until(
        lambda: deployment.jobs(run_id)[job_id].state == submit_pb2.CANCELLED,
        "the job cancelled by the reaper",
        timeout=60,
    )
    task = f"{deployment.dag_of[run_id]}/{run_id}/{TASK_ID}/-1"
    assert deployment.jobs(run_id)[job_id].cancel_reason == f"airflow task {task} is {state}"


@pytest.mark.parametrize("state", ["failed", "success"])
def test_a_deferred_task_marked_while_no_triggerer_runs(
    deployment: Deployment, tmp_path: Path, state: str
) -> None:
    """With no triggerer, marking a deferred task calls no on_kill: the reaper sees the task
    ended and cancels its job; another deferred task's job, running, is left alone however
    many rounds pass."""
    release = tmp_path / "release"
    marked = deployment.trigger(release=str(release))
    running = deployment.trigger(release=str(release))
    marked_job = deployment.running_job(marked)
    running_job = deployment.running_job(running)
    deployment.followed(marked, marked_job)
    deployment.followed(running, running_job)
    deployment.components["triggerer"].kill(tree=True)
    try:
        deployment.mark(marked, state)
        reaped_as(deployment, marked, marked_job, state)
        rounds = deployment.reaper_counters()["rounds"]
        deployment.until(
            lambda: deployment.reaper_counters()["rounds"] >= rounds + 3, "three more rounds"
        )
        assert deployment.task_in(running, "deferred", try_number=1)
        assert deployment.live(running) == [running_job]
    finally:
        deployment.start("triggerer")
    release.touch()
    deployment.succeeded_on(running, running_job)
    assert list(deployment.jobs(marked)) == [marked_job]


def test_an_unreachable_airflow_has_nothing_cancelled(
    deployment: Deployment, tmp_path: Path
) -> None:
    """The reaper stopped, the task marked failed while no triggerer runs, the API server
    killed, the reaper started again: it cannot ask Airflow, says so (a line, its counter),
    and cancels nothing; once the API server is back, it cancels the job.

    The triggerer comes back only after that: a triggerer that starts while the trigger row
    of the failed task remains kills the trigger, which cancels the job too (with the kill's
    reason), and would race the reaper this test is about."""
    run_id = deployment.trigger(release=str(tmp_path / "release"))
    job_id = deployment.running_job(run_id)
    deployment.followed(run_id, job_id)
    deployment.components["reaper"].kill()
    deployment.components["triggerer"].kill(tree=True)
    try:
        try:
            deployment.mark(run_id, "failed")
            deployment.components["api-server"].kill(tree=True)
            deployment.reaper_status.unlink(missing_ok=True)  # the new reaper counts from 0
            reaper = deployment.start("reaper")
            deployment.until(
                lambda: deployment.reaper_counters()["unreachable"] >= 3,
                "three rounds that could not ask Airflow",
            )
            assert "airflow cannot be reached" in reaper.output()
            assert deployment.live(run_id) == [job_id]
            assert deployment.reaper_counters()["cancelled"] == 0
        finally:
            deployment.start("api-server")
            deployment.until(deployment.api_ready, "the API server back", timeout=180)
        reaped_as(deployment, run_id, job_id, "failed")
    finally:
        deployment.start("triggerer")
