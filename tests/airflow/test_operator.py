"""The ArmadaOperator in real DAG runs (dag.test) against a real embedded Armada server."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid

import pytest

from airflow_armada.operators.armada import task_identity
from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, NotFound, job_item
from armada_core.client.lifecycle import ATTEMPT_ANNOTATION, GENERATION_ANNOTATION, TASK_ANNOTATION
from armada_core.client.lifecycle.airflow_states import split_task
from armada_core.client.lifecycle.reaping import REAP_ANNOTATION
from armada_core.retry import load_policy

from .conftest import QUEUE
from .helpers import (
    Background,
    job_set_of,
    new_run,
    run_dag,
    submitted_jobs,
    task_instance,
    wait_until_running,
    xcom,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("airflow_db", "armada")]


@pytest.mark.parametrize("mode", ["deferrable", "sync"])
def test_a_job_succeeds_and_returns_its_result(mode, client, capfd) -> None:
    dr = run_dag(f"armada_single_{mode}")
    assert dr.state == "success"
    result = xcom(dr, "hello")
    [job_id] = result["job_ids"]
    assert result["outcome"] == "succeeded"
    assert result["jobs"][0]["state"] == "SUCCEEDED"
    assert result["jobs"][0]["exit_codes"] in ({}, {"main": 0})
    assert result["run_ids"][0] and result["nodes"][0]
    assert result["duration_seconds"] >= 0.9  # the job sleeps 1 s; run timestamps are ms-exact
    assert result["links"] == [f"http://armada.test/jobs/{job_id}?q=airflow"]
    assert xcom(dr, "hello", "_link_ArmadaJobLink") == result["links"][0]
    assert client.get_job_status([job_id])[job_id] == submit_pb2.SUCCEEDED
    assert submitted_jobs(client, job_set_of(dr)) == [job_id]
    assert task_instance(dr, "hello").try_number == 1
    uri = f"airflow://armada_single_{mode}/{dr.run_id}/hello/-1"
    assert client.get_job_status_by_external_uri(QUEUE, job_set_of(dr), uri) == {
        job_id: submit_pb2.SUCCEEDED
    }
    spec = client.get_job_details([job_id], expand_job_spec=True)[job_id].job_spec
    assert spec.annotations["airflow.apache.org/try-number"] == "1"
    assert (spec.annotations[ATTEMPT_ANNOTATION], spec.annotations[GENERATION_ANNOTATION]) == (
        "0",
        "0",
    )
    out = capfd.readouterr().out
    assert f"[job {job_id}] hello from armada" in out
    assert f"[job {job_id}] second line" in out


def test_a_gang_of_three(client, capfd) -> None:
    dr = run_dag("armada_gang")
    assert dr.state == "success"
    result = xcom(dr, "gang")
    ids = result["job_ids"]
    assert len(set(ids)) == 3
    assert [j["state"] for j in result["jobs"]] == ["SUCCEEDED"] * 3
    details = client.get_job_details(ids, expand_job_spec=True)
    annotations = [dict(details[i].job_spec.annotations) for i in ids]
    assert {a["armadaproject.io/gangId"] for a in annotations} != {""}
    assert len({a["armadaproject.io/gangId"] for a in annotations}) == 1
    assert {a["armadaproject.io/gangCardinality"] for a in annotations} == {"3"}
    out = capfd.readouterr().out
    for i, job_id in enumerate(ids):
        assert f"[member {i} job {job_id}] member armada-{job_id}-0" in out


def test_an_elastic_pod_group(client, capfd) -> None:
    dr = run_dag("armada_pod_group")
    ids = xcom(dr, "group", "armada_job_ids")
    assert len(set(ids)) == 5  # the coordinator and every worker up to the maximum
    details = client.get_job_details(ids, expand_job_spec=True)
    annotations = [dict(details[i].job_spec.annotations) for i in ids]
    assert [a["armadaproject.io/gangRole"] for a in annotations] == ["coordinator"] + ["worker"] * 4
    assert [a["armadaproject.io/gangRoleMinimum"] for a in annotations] == ["1"] + ["2"] * 4
    assert len({a["armadaproject.io/gangId"] for a in annotations}) == 1
    assert {a["armadaproject.io/gangCardinality"] for a in annotations} == {"5"}
    # With room for everything, all five run; the task follows them together.
    out = capfd.readouterr().out
    assert f"[member 0 job {ids[0]}] role coordinator of group" in out
    for i, job_id in enumerate(ids[1:], start=1):
        assert f"[member {i} job {job_id}] role worker of group" in out
    # The coordinator ends before the workers: a member that succeeded keeps its role
    # (SEMANTICS.md, "Elastic pod groups"), so the workers run on and the task succeeds.
    assert dr.state == "success"
    assert set(client.get_job_status(ids).values()) == {submit_pb2.SUCCEEDED}
    assert [j["state"] for j in xcom(dr, "group")["jobs"]] == ["SUCCEEDED"] * 5


def test_a_user_error_fails_without_retry(client, capfd) -> None:
    dr = run_dag("armada_user_error")
    assert dr.state == "failed"
    ti = task_instance(dr, "fails")
    assert (ti.state, ti.try_number) == ("failed", 1)  # retries=2, yet not retried
    [job_id] = submitted_jobs(client, job_set_of(dr))
    out = capfd.readouterr().out
    assert "AirflowFailException" in out
    assert f"job {job_id} failed: container main exit code 3" in out
    assert "termination message 'bad input file'" in out
    assert f"[job {job_id}] about to fail" in out


def test_an_infrastructure_failure_is_retried_by_airflow(client, capfd) -> None:
    run_after, job_set = new_run("armada_preempted")

    def preempt() -> str:
        victim = wait_until_running(client, job_set)
        urgent = {
            "containers": [
                {
                    "name": "main",
                    "command": ["sleep", "1"],
                    "resources": {
                        "requests": {"cpu": "1", "memory": "64Mi"},
                        "limits": {"cpu": "1", "memory": "64Mi"},
                    },
                }
            ],
            "nodeSelector": {"role": "victim"},
        }
        client.submit_jobs(
            QUEUE, f"urgent-{uuid.uuid4()}", [job_item(urgent, priority_class="high")]
        )
        return victim

    helper = Background(preempt)
    helper.start()
    dr = run_dag("armada_preempted", run_after=run_after)
    victim = helper.join_checked()
    assert job_set_of(dr) == job_set
    assert dr.state == "success"
    ti = task_instance(dr, "victim")
    assert ti.try_number == 2
    first, second = submitted_jobs(client, job_set)
    assert first == victim
    states = client.get_job_status([first, second])
    assert states == {first: submit_pb2.PREEMPTED, second: submit_pb2.SUCCEEDED}
    assert xcom(dr, "victim")["job_ids"] == [second]
    assert "failed because of the infrastructure (a retry may help)" in capfd.readouterr().out


def test_a_server_side_retry_is_waited_through(client, tmp_path) -> None:
    try:
        client.get_retry_policy("airflow-oom")
    except NotFound:
        client.create_retry_policy(
            load_policy("""
kind: RetryPolicy
metadata: {name: airflow-oom}
spec:
  retryLimit: 2
  rules:
    - {action: Retry, onConditions: [OOMKilled]}
""")
        )
    dr = run_dag(
        "armada_server_retry", conf={"policy": "airflow-oom", "marker": str(tmp_path / "ran-once")}
    )
    assert dr.state == "success"
    assert task_instance(dr, "oom_once").try_number == 1
    result = xcom(dr, "oom_once")
    assert result["jobs"][0]["server_retries"] == 1
    [job_id] = submitted_jobs(client, job_set_of(dr))
    assert result["job_ids"] == [job_id]
    runs = client.get_job_details([job_id], expand_job_run=True)[job_id].job_runs
    assert len(runs) == 2


def test_a_killed_task_cancels_its_job(client: ArmadaClient, capfd) -> None:
    """SIGTERM is what Airflow's supervisor sends a task marked failed or cleared in the UI;
    the task runner's handler calls on_kill (deferred tasks: see test_trigger.py)."""
    run_after, job_set = new_run("armada_kill_sync")

    def kill() -> str:
        job_id = wait_until_running(client, job_set)
        os.kill(os.getpid(), signal.SIGTERM)
        return job_id

    previous = signal.getsignal(signal.SIGTERM)
    helper = Background(kill)
    helper.start()
    try:
        dr = run_dag("armada_kill_sync", run_after=run_after)
    finally:
        signal.signal(signal.SIGTERM, previous)
    job_id = helper.join_checked()
    assert client.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED
    assert dr.state == "failed"
    ti = task_instance(dr, "sleeper")
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert submitted_jobs(client, job_set) == [job_id]
    assert client.get_job_details([job_id])[job_id].cancel_reason == "Airflow task killed (try 1)"
    assert f"Task killed: cancelling Armada jobs {job_id}" in capfd.readouterr().out


@pytest.mark.parametrize("dag_id", ["armada_crash_after_submit", "armada_crash_inside_submit"])
def test_a_worker_crash_after_submission_reattaches(dag_id, client, capfd) -> None:
    """Found again by the task's external job URI, whether or not the ids came back."""
    dr = run_dag(dag_id)
    assert dr.state == "success"
    assert task_instance(dr, "crashy").try_number == 2
    [job_id] = submitted_jobs(client, job_set_of(dr))  # no second job
    assert xcom(dr, "crashy")["job_ids"] == [job_id]
    out = capfd.readouterr().out
    assert "simulated worker crash" in out
    assert f"Reattaching to Armada job(s) {job_id}" in out


def test_a_reattached_job_that_fails_is_reported_not_resubmitted(client, tmp_path, capfd) -> None:
    dr = run_dag("armada_crash_then_user_error", conf={"marker": str(tmp_path / "go")})
    assert dr.state == "failed"
    ti = task_instance(dr, "crashy")
    assert (ti.state, ti.try_number) == ("failed", 2)  # the crash, then the user error
    [job_id] = submitted_jobs(client, job_set_of(dr))
    assert f"job {job_id} failed: container main exit code 3" in capfd.readouterr().out


def test_dry_run_renders_and_validates_without_submitting(client) -> None:
    dr = run_dag("armada_dry_run", conf={"word": "rendered-word"})
    assert dr.state == "success"
    result = xcom(dr, "dry")
    assert result["dry_run"] is True
    assert len(result["items"]) == 2
    container = result["items"][0]["podSpecs"][0]["containers"][0]
    assert container["command"] == ["sh", "-c", "echo rendered-word"]
    assert result["items"][0]["annotations"]["armadaproject.io/gangCardinality"] == "2"
    assert submitted_jobs(client, job_set_of(dr)) == []


def test_templated_fields(client, capfd) -> None:
    job_set = f"templated-{uuid.uuid4()}"
    dr = run_dag("armada_templated", conf={"job_set": job_set, "team": "ml", "word": "w42"})
    assert dr.state == "success"
    [job_id] = submitted_jobs(client, job_set)
    spec = client.get_job_details([job_id], expand_job_spec=True)[job_id].job_spec
    assert spec.labels["team"] == "ml"
    assert spec.annotations["example.com/word"] == "w42"
    assert spec.annotations["airflow.apache.org/dag-id"] == "armada_templated"
    assert xcom(dr, "templated")["links"] == [f"http://ui.example/airflow/{job_set}/{job_id}"]
    assert f"[job {job_id}] word=w42 try=1" in capfd.readouterr().out


def test_a_bad_pod_spec_is_rejected_before_submission(client, capfd) -> None:
    dr = run_dag("armada_bad_spec")
    assert dr.state == "failed"
    ti = task_instance(dr, "bad")
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert submitted_jobs(client, job_set_of(dr)) == []
    out = capfd.readouterr().out
    assert "invalid Armada job spec, nothing submitted" in out
    assert "did you mean image?" in out


@pytest.mark.parametrize("mode", ["deferrable", "sync"])
def test_without_the_default_connection_the_task_uses_the_defaults(
    mode, armada, client, capfd, monkeypatch
) -> None:
    """No `armada_default` connection: the worker and the triggerer both connect where
    armada_core's environment defaults say (ARMADA_URL, else localhost:50051), saying so."""
    monkeypatch.delenv("AIRFLOW_CONN_ARMADA_DEFAULT")
    monkeypatch.setenv("ARMADA_URL", armada.address)
    dr = run_dag(f"armada_single_{mode}")
    assert dr.state == "success"
    [job_id] = xcom(dr, "hello")["job_ids"]
    assert client.get_job_status([job_id])[job_id] == submit_pb2.SUCCEEDED
    assert xcom(dr, "hello")["links"] == [f"http://localhost:8080/jobs/{job_id}"]
    out = capfd.readouterr().out
    assert (
        f"Airflow connection 'armada_default' is not defined: connecting to {armada.address} "
        "(ARMADA_URL, else localhost:50051)" in out
    )
    assert "isn't defined" not in out


def test_a_missing_connection_fails_the_task_saying_how_to_create_it(client, capfd) -> None:
    dr = run_dag("armada_missing_connection")
    assert dr.state == "failed"
    ti = task_instance(dr, "nowhere")
    assert (ti.state, ti.try_number) == ("failed", 1)  # retries=2, yet not retried
    out = "".join(capfd.readouterr())
    assert (
        "Airflow connection 'armada_elsewhere' is not defined; create it with: "
        "airflow connections add armada_elsewhere --conn-type armada --conn-host HOST "
        "--conn-port 50051" in out
    )
    assert "isn't defined" not in out
    assert "XCom not found" not in out


def jobs_of_task(client: ArmadaClient, job_set_id: str, dag_id: str, task_id: str) -> list[str]:
    """Every job the server holds for one logical task, found by its Airflow annotations."""
    ids = submitted_jobs(client, job_set_id)
    details = client.get_job_details(ids, expand_job_spec=True) if ids else {}
    return [
        i
        for i in ids
        if details[i].job_spec.annotations["airflow.apache.org/dag-id"] == dag_id
        and details[i].job_spec.annotations["airflow.apache.org/task-id"] == task_id
    ]


def test_a_cleared_task_runs_a_new_job_on_its_next_try(client, capfd) -> None:
    """Clearing a running task kills it (on_kill cancels the job); the next try must not
    reattach to the cancelled job."""
    dr = run_dag("armada_dies_when_jobs_end", conf={"kill": True, "until": "CANCELLED"})
    assert dr.state == "success"
    ti = task_instance(dr, "dies")
    assert (ti.state, ti.try_number) == ("success", 2)
    first, second = jobs_of_task(client, job_set_of(dr), "armada_dies_when_jobs_end", "dies")
    assert client.get_job_status([first, second]) == {
        first: submit_pb2.CANCELLED,
        second: submit_pb2.SUCCEEDED,
    }
    assert xcom(dr, "dies")["job_ids"] == [second]
    details = client.get_job_details([second], expand_job_spec=True)[second].job_spec
    assert details.annotations[GENERATION_ANNOTATION] == "1"
    out = capfd.readouterr().out
    assert f"this attempt's jobs ended without succeeding ({first} CANCELLED)" in out
    assert f"[job {second}] done try 2" in out


def test_a_try_after_an_unseen_preemption_submits_a_new_job(client) -> None:
    """The try that watched the job died before it saw the preemption (as when Airflow puts a
    task up for retry on a state mismatch): the next try runs a new job, one try per
    preemption."""
    run_after, job_set = new_run("armada_dies_when_jobs_end")

    def preempt() -> str:
        victim = wait_until_running(client, job_set)
        urgent = {
            "containers": [
                {
                    "name": "main",
                    "command": ["sleep", "1"],
                    "resources": {
                        "requests": {"cpu": "1", "memory": "64Mi"},
                        "limits": {"cpu": "1", "memory": "64Mi"},
                    },
                }
            ],
            "nodeSelector": {"role": "victim"},
        }
        client.submit_jobs(
            QUEUE, f"urgent-{uuid.uuid4()}", [job_item(urgent, priority_class="high")]
        )
        return victim

    helper = Background(preempt)
    helper.start()
    dr = run_dag("armada_dies_when_jobs_end", conf={"until": "PREEMPTED"}, run_after=run_after)
    victim = helper.join_checked()
    assert dr.state == "success"
    assert task_instance(dr, "dies").try_number == 2
    first, second = jobs_of_task(client, job_set, "armada_dies_when_jobs_end", "dies")
    assert first == victim
    assert client.get_job_status([first, second]) == {
        first: submit_pb2.PREEMPTED,
        second: submit_pb2.SUCCEEDED,
    }


def test_the_same_try_after_a_crash_reattaches_to_its_running_job(client, tmp_path, capfd) -> None:
    dr = run_dag("armada_same_try_again", conf={"marker": str(tmp_path / "go")})
    assert dr.state == "success"
    assert task_instance(dr, "again").try_number == 1
    [job_id] = jobs_of_task(client, job_set_of(dr), "armada_same_try_again", "again")
    assert xcom(dr, "again")["job_ids"] == [job_id]
    assert f"Reattaching to Armada job(s) {job_id}" in capfd.readouterr().out


def test_the_same_try_after_its_job_was_cancelled_submits_under_a_new_client_id(
    client, tmp_path
) -> None:
    dr = run_dag("armada_same_try_again", conf={"marker": str(tmp_path / "go"), "kill": True})
    assert dr.state == "success"
    assert task_instance(dr, "again").try_number == 1
    first, second = jobs_of_task(client, job_set_of(dr), "armada_same_try_again", "again")
    assert client.get_job_status([first, second]) == {
        first: submit_pb2.CANCELLED,
        second: submit_pb2.SUCCEEDED,
    }
    assert xcom(dr, "again")["job_ids"] == [second]


def test_a_kill_of_an_earlier_try_reaching_the_job_late_starts_it_again(client, capfd) -> None:
    """A cleared deferred task: the next try may find the job before the triggerer cancels it
    for the old try. The cancellation is the old try's (its reason says so): the new try
    submits a new job instead of failing as if someone else had cancelled it."""
    dr = run_dag("armada_killed_late")
    assert dr.state == "success"
    ti = task_instance(dr, "late")
    assert (ti.state, ti.try_number) == ("success", 2)
    first, second = submitted_jobs(client, job_set_of(dr))
    details = client.get_job_details([first, second])
    assert (details[first].state, details[first].cancel_reason) == (
        submit_pb2.CANCELLED,
        "Airflow task killed (try 1)",
    )
    assert details[second].state == submit_pb2.SUCCEEDED
    assert xcom(dr, "late")["job_ids"] == [second]
    assert "cancelled by the kill of an earlier try" in capfd.readouterr().out


def test_a_successful_task_run_again_runs_a_new_job(client, capfd) -> None:
    """A cleared successful task is meant to run again: its reported job is not reused."""
    dr = run_dag("armada_runs_again_after_success")
    assert dr.state == "success"
    result = xcom(dr, "twice")
    [first], [second] = result["first"]["job_ids"], result["second"]["job_ids"]
    assert first != second
    assert submitted_jobs(client, job_set_of(dr)) == [first, second]
    attempts = [
        client.get_job_details([j], expand_job_spec=True)[j].job_spec.annotations[
            ATTEMPT_ANNOTATION
        ]
        for j in (first, second)
    ]
    assert attempts == ["0", "1"]


@pytest.mark.parametrize("mode", ["deferrable", "sync"])
def test_a_waiting_job_says_why_in_the_task_log(mode, client, capfd) -> None:
    """The only node the job fits on is busy until its task log has said why it waits (the
    scheduler's reason: no room on the matching node)."""
    blocker_set = f"blocker-{uuid.uuid4()}"
    blocker = {
        "containers": [
            {
                "name": "main",
                "command": ["sleep", "120"],
                "resources": {
                    "requests": {"cpu": "1", "memory": "64Mi"},
                    "limits": {"cpu": "1", "memory": "64Mi"},
                },
            }
        ],
        "nodeSelector": {"role": "victim"},
    }
    [blocking] = client.submit_jobs(QUEUE, blocker_set, [job_item(blocker, priority_class="high")])
    wait_until_running(client, blocker_set)
    said = re.compile(r"Armada job (\w+) QUEUED \w+: .*matching nodes?\b.*")

    def release_once_said() -> str:
        out, deadline = "", time.monotonic() + 60
        try:
            while not said.search(out) and time.monotonic() < deadline:
                out += capfd.readouterr().out
                time.sleep(0.1)
        finally:
            client.cancel_jobs(QUEUE, blocker_set, [blocking])
        return out

    helper = Background(release_once_said)
    helper.start()
    dr = run_dag(f"armada_waits_{mode}")
    out = helper.join_checked()
    assert dr.state == "success"
    [job_id] = submitted_jobs(client, job_set_of(dr))
    match = said.search(out)
    assert match is not None, (
        "no waiting reason in the task log; the log the helper read ended with:\n"
        + "\n".join(out.splitlines()[-40:])
    )
    assert match.group(1) == job_id


def test_one_identity_for_every_try_of_a_task_instance() -> None:
    identity = task_identity("d", "manual__2024", "t", -1)
    assert identity.external_job_uri == "airflow://d/manual__2024/t/-1"
    # what the reaper's Airflow adapter reads back from the job's annotation
    assert split_task(identity.annotations()[TASK_ANNOTATION]) == ("d", "manual__2024", "t", -1)
    assert identity.client_id() == task_identity("d", "manual__2024", "t", -1).client_id()
    ids = {
        task_identity("d", "r", "t", -1, attempt).client_id(generation)
        for attempt in (0, 1)
        for generation in (0, 1)
    }
    ids |= {
        task_identity("d", "r", "t", 0).client_id(),
        task_identity("d", "r2", "t", -1).client_id(),
    }
    assert len(ids) == 6


def test_cancel_on_kill_reaches_the_trigger(client) -> None:
    """Deferred, the trigger's on_kill is what cancels (see test_trigger.py): it must know.
    So must the reaper: the jobs of a task with cancel_on_kill=False say it leaves them."""
    dr = run_dag("armada_trigger_kwargs")
    assert dr.state == "success"
    for keep in (False, True):
        kwargs = xcom(dr, f"cancel_on_kill_{keep}", "trigger_kwargs")
        assert kwargs["cancel_on_kill"] is keep
    jobs = client.get_job_details(submitted_jobs(client, job_set_of(dr)), expand_job_spec=True)
    reaped = {
        d.job_spec.annotations["airflow.apache.org/task-id"]: d.job_spec.annotations.get(
            REAP_ANNOTATION
        )
        for d in jobs.values()
    }
    assert reaped == {"cancel_on_kill_False": "false", "cancel_on_kill_True": None}
