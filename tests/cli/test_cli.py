"""Every `armada` subcommand against a real server: in-process, and once as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer

from .conftest import Armada

JOB_FILE = """\
queue: team-a
jobSetId: nightly
jobs:
  - priority: 1
    clientId: report
    podSpec:
      containers:
        - name: main
          image: busybox
          command: [sh, -c, "echo hi"]
          resources:
            requests: {cpu: 100m, memory: 64Mi}
            limits: {cpu: 100m, memory: 64Mi}
  # A gang of two: the gang annotations on every member.
  - clientId: worker-0
    annotations: &gang
      armadaproject.io/gangId: pair
      armadaproject.io/gangCardinality: "2"
    podSpec: &worker
      containers:
        - name: main
          image: busybox
          resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
  - clientId: worker-1
    annotations: *gang
    podSpec: *worker
"""

POD_GROUP_FILE = """\
queue: team-a
jobSetId: elastic
jobs:
  - clientId: train
    priority: 2
    labels: {app: train}
    podGroup:
      nodeUniformityLabel: rack
      roles:
        - name: coordinator
          minimum: 1
          maximum: 1
          podSpec:
            containers:
              - name: main
                image: busybox
                resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
        - name: worker
          minimum: 2
          maximum: 4
          podSpec:
            containers:
              - name: main
                image: busybox
                resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
  - clientId: after
    podSpec:
      containers:
        - name: main
          image: busybox
          resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
"""

QUEUE_FILE = """\
apiVersion: armadaproject.io/v1beta1
kind: Queue
name: team-a
priorityFactor: 2
userOwners: [alice]
permissions:
  - subjects: [{kind: Group, name: ml}]
    verbs: [submit, watch]
labels: {cost-centre: "42"}
---
kind: Queue
metadata: {name: team-b}
spec: {priorityFactor: 3, cordoned: true}
"""

POLICY_FILE = """\
kind: RetryPolicy
metadata: {name: gpu}
spec:
  retryLimit: 3
  backoff: {initialDelay: 10s}
  rules:
    - action: Retry
      onConditions: [OOMKilled]
    - action: Retry
      onExitCodes: {operator: In, values: [137]}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_queue_commands(armada: Armada, tmp_path: Path) -> None:
    assert (
        armada.ok("queue", "create", "-f", write(tmp_path, "q.yaml", QUEUE_FILE))
        == "Created queue team-a\nCreated queue team-b\n"
    )
    [doc] = yaml.safe_load_all(armada.ok("queue", "get", "team-a"))
    assert doc["kind"] == "Queue" and doc["name"] == "team-a"
    assert doc["priorityFactor"] == 2 and doc["userOwners"] == ["alice"]
    assert doc["permissions"] == [
        {"subjects": [{"kind": "Group", "name": "ml"}], "verbs": ["submit", "watch"]}
    ]
    table = armada.ok("queue", "list").splitlines()
    assert table[0].split() == ["NAME", "PRIORITY-FACTOR", "CORDONED", "OWNERS"]
    assert table[1].split() == ["team-a", "2", "no", "alice"]
    assert table[2].split() == ["team-b", "3", "yes"]
    # Round trip: what `get` prints, `update -f` accepts.
    exported = write(tmp_path, "export.yaml", armada.ok("queue", "list", "-o", "yaml"))
    armada.ok("queue", "update", "-f", exported)
    armada.ok(
        "queue",
        "create",
        "team-c",
        "--priority-factor",
        "4",
        "--owner",
        "bob",
        "--group-owner",
        "ml",
        "--label",
        "a=b",
        "--retry-policy",
        "gpu",
    )
    c = yaml.safe_load(armada.ok("queue", "get", "team-c"))
    assert c["groupOwners"] == ["ml"] and c["labels"] == {"a": "b"}
    assert c["retryPolicies"] == ["gpu"]
    armada.ok("queue", "update", "team-c", "--priority-factor", "5")
    assert (
        yaml.safe_load(armada.ok("queue", "get", "team-c", "-o", "json"))[0]["priorityFactor"] == 5
    )
    assert armada.ok("queue", "cordon", "team-c") == "Cordoned queue team-c\n"
    assert yaml.safe_load(armada.ok("queue", "get", "team-c"))["cordoned"] is True
    armada.ok("queue", "uncordon", "team-c")
    assert (
        armada.ok("queue", "delete", "team-c", "team-b")
        == "Deleted queue team-c\nDeleted queue team-b\n"
    )
    missing = armada("queue", "get", "team-c")
    assert missing.code == 1
    assert missing.err == "armada: error: not found: queue 'team-c' not found\n"
    again = armada("queue", "create", "team-a")
    assert again.code == 1 and "already exists" in again.err
    bad = armada("queue", "create", "-f", write(tmp_path, "bad.yaml", "name: x\nprio: 1\n"))
    assert bad.code == 1 and bad.err == "armada: error: prio: unknown field of Queue\n"


def test_retry_policy_commands(armada: Armada, tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", POLICY_FILE)
    assert armada.ok("retry-policy", "create", "-f", path) == "Created retry policy gpu\n"
    got = yaml.safe_load(armada.ok("retry-policy", "get", "gpu"))
    assert got["metadata"]["name"] == "gpu" and got["spec"]["retryLimit"] == 3
    assert len(got["spec"]["rules"]) == 2
    armada.ok("retry-policy", "create", "simple", "--retry-limit", "2", "--default-action", "Retry")
    armada.ok("retry-policy", "update", "simple", "--retry-limit", "4")
    table = armada.ok("retry-policy", "list").splitlines()
    assert [line.split() for line in table[1:]] == [["gpu", "3", "2"], ["simple", "4", "0"]]
    assert len(list(yaml.safe_load_all(armada.ok("retry-policy", "list", "-o", "yaml")))) == 2
    armada.ok("retry-policy", "delete", "simple")
    assert armada("retry-policy", "get", "simple").code == 1
    bad = armada(
        "retry-policy",
        "create",
        "-f",
        write(tmp_path, "bad.yaml", POLICY_FILE.replace("retryLimit: 3", "retryLimt: 3")),
    )
    assert bad.code == 1
    assert bad.err == ("armada: error: spec.retryLimt: unknown field (did you mean retryLimit?)\n")


def test_submit_status_details_cancel_watch(armada: Armada, tmp_path: Path) -> None:
    armada.ok("queue", "create", "team-a")
    jobs = write(tmp_path, "jobs.yaml", JOB_FILE)
    assert (
        armada.ok("submit", jobs, "--dry-run")
        == "Valid: 3 job(s) for queue team-a, job set nightly\n"
    )
    out = armada.ok("submit", jobs)
    ids = [line.split()[4] for line in out.splitlines()]
    assert len(ids) == 3 and out.splitlines()[0].endswith("to job set nightly")
    assert armada.ok("submit", jobs, "-q").split() == ids  # client ids deduplicate
    assert armada.ok("status", *ids, "nope").splitlines() == [f"{i} QUEUED" for i in ids] + [
        "nope UNKNOWN"
    ]
    details = yaml.safe_load(armada.ok("details", ids[1], "--spec"))
    spec = details[ids[1]]["jobSpec"]
    assert spec["annotations"]["armadaproject.io/gangId"] == "pair"
    assert armada("details", "nope").err == "armada: error: not found: no such job: nope\n"
    assert (
        armada.ok("reprioritize", "team-a", "nightly", "5", ids[0]) == f"{ids[0]}: reprioritized\n"
    )
    preempt = armada("preempt", "team-a", "nightly", ids[0])
    assert preempt.code == 1 and "not preemption requested" in preempt.out
    assert (
        armada.ok("cancel", "team-a", "nightly", ids[0], "--reason", "not needed")
        == f"Cancelled {ids[0]}\n"
    )
    assert (
        armada.ok("cancel", "team-a", "nightly", "--state", "queued")
        == "Requested cancellation of 2 jobs of job set nightly in states queued"
        " (1 already finished)\n"
    )
    watched = armada.ok("watch", "team-a", "nightly", "--exit-if-inactive").splitlines()
    events = watched[:-1]
    assert [line.split()[3] for line in events] == [
        "submitted",
        "queued",
        "submitted",
        "queued",
        "submitted",
        "queued",
        "reprioritizing",
        "reprioritized",
        "cancelling",
        "cancelled",
        "cancelling",
        "cancelled",
        "cancelling",
        "cancelled",
    ]
    assert "(reason 'not needed')" in events[9]
    assert events[0].endswith("| 1 job: 1 submitted")
    assert events[-1].endswith("| 3 jobs: 3 cancelled")
    assert watched[-1] == "All jobs finished: 3 jobs: 3 cancelled"
    resumed = armada.ok("watch", "team-a", "nightly", "--exit-if-inactive", "--from", "12")
    assert len(resumed.splitlines()) == 3  # messages 13 and 14, then the summary


def test_submit_a_pod_group(armada: Armada, server: EmbeddedServer, tmp_path: Path) -> None:
    armada.ok("queue", "create", "team-a")
    jobs = write(tmp_path, "group.yaml", POD_GROUP_FILE)
    assert (
        armada.ok("submit", jobs, "--dry-run")
        == "Valid: 6 job(s) for queue team-a, job set elastic\n"
    )
    ids = armada.ok("submit", jobs, "-q").split()
    assert len(ids) == 6
    with ArmadaClient(server.address) as c:
        details = c.get_job_details(ids, expand_job_spec=True)
    specs = [details[i].job_spec for i in ids]
    group = [dict(s.annotations) for s in specs[:5]]
    assert [a["armadaproject.io/gangRole"] for a in group] == ["coordinator"] + ["worker"] * 4
    assert [a["armadaproject.io/gangRoleMinimum"] for a in group] == ["1"] + ["2"] * 4
    assert {
        (
            a["armadaproject.io/gangId"],
            a["armadaproject.io/gangCardinality"],
            a["armadaproject.io/gangNodeUniformityLabel"],
        )
        for a in group
    } == {("train", "5", "rack")}
    assert [s.client_id for s in specs] == [f"train-{i}" for i in range(5)] + ["after"]
    assert {s.priority for s in specs[:5]} == {2} and specs[4].labels["app"] == "train"
    assert specs[4].pod_specs[0].containers[0].resources.requests["cpu"].string == "1"
    assert "armadaproject.io/gangId" not in specs[5].annotations
    # Mistakes name the entry and the role's field.
    for bad, problem in [
        (
            POD_GROUP_FILE.replace("minimum: 2", "minimum: 5"),
            "jobs[0].podGroup.roles[1].minimum: must be between 1 and the role's maximum 4, got 5",
        ),
        (
            POD_GROUP_FILE.replace("name: worker", "name: coordinator"),
            "jobs[0].podGroup.roles[1].name: 'coordinator' is already the name of roles[0]",
        ),
        (
            POD_GROUP_FILE.replace("      nodeUniformityLabel: rack\n", "      replicas: 2\n"),
            "jobs[0].podGroup.replicas: unknown field",
        ),
        (
            POD_GROUP_FILE.replace("    labels: {app: train}\n", "    podSpec: {containers: []}\n"),
            "jobs[0].podSpec: a pod group's pod specs are its roles' podSpec",
        ),
        (
            POD_GROUP_FILE.replace(
                '{requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}',
                '{requests: {cpu: "1"}}',
            ),
            "jobs[0].podGroup.members[1].pod_specs[0].containers[0].resources.requests: must "
            "request memory",
        ),
    ]:
        result = armada("submit", write(tmp_path, "bad.yaml", bad), "--dry-run")
        assert result.code == 1 and result.err.startswith(f"armada: error: {problem}"), result.err


def test_watch_follows_live_events(armada: Armada, server: EmbeddedServer, tmp_path: Path) -> None:
    armada.ok("queue", "create", "team-a")
    [job] = armada.ok("submit", "-q", write(tmp_path, "j.yaml", JOB_FILE.split("  # A")[0])).split()

    def cancel_later() -> None:
        time.sleep(0.5)
        with ArmadaClient(server.address) as c:
            c.cancel_jobs("team-a", "nightly", [job])

    threading.Thread(target=cancel_later).start()
    out = armada.ok("watch", "team-a", "nightly", "--exit-on-inactive").splitlines()
    assert [line.split()[3] for line in out[:-1]] == [
        "submitted",
        "queued",
        "cancelling",
        "cancelled",
    ]


def test_usage_and_input_errors(armada: Armada, tmp_path: Path) -> None:
    usage = armada("cancel", "q", "s", "job-1", "--state", "queued")
    assert usage.code == 2 and "--state filters a whole job set" in usage.err
    assert armada("queue", "create").code == 2
    missing = armada("submit", str(tmp_path / "nope.yaml"))
    assert missing.code == 1 and "No such file or directory" in missing.err
    bad = armada(
        "submit",
        write(
            tmp_path,
            "bad.yaml",
            JOB_FILE.replace(
                "cpu: 100m, memory: 64Mi}\n            limits",
                "cpu: lots, memory: 64Mi}\n            limits",
            ),
        ),
    )
    assert bad.code == 1
    assert bad.err.startswith(
        "armada: error: jobs[0].pod_specs[0].containers[0].resources."
        "requests[cpu]: 'lots' is not a valid quantity"
    )
    assert (
        armada("submit", write(tmp_path, "ok.yaml", JOB_FILE)).err
        == "armada: error: not found: queue 'team-a' not found; create it with: armada queue "
        "create team-a\n"
    )
    logs = armada("logs", "some-job", "--tail", "5")
    assert logs.code == 1 and logs.err.startswith("armada: error: not found: job 'some-job'")
    auth = armada("--username", "u", "status", "x")
    assert auth.code == 1 and "needs both a username and a password" in auth.err
    assert armada("no-such-command").code == 2


def test_unreachable_server(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with EmbeddedServer(database_url=f"sqlite:///{tmp_path / 'x.db'}", http_port=None) as running:
        address = running.address
    result = Armada(address, capsys)("status", "x")
    assert result.code == 1
    assert result.err.startswith("armada: error: unavailable: ")
    assert result.err.rstrip().endswith(f"(is an Armada server running at {address}?)")
    assert result.err.count("\n") == 1


def test_console_script_in_a_subprocess(server: EmbeddedServer, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("armada")
    env = {**os.environ, "ARMADA_URL": server.address}
    jobs = write(tmp_path, "jobs.yaml", JOB_FILE)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *args], env=env, capture_output=True, text=True, timeout=60
        )

    assert run("queue", "create", "team-a").returncode == 0
    submitted = run("submit", "-q", jobs)
    assert submitted.returncode == 0, submitted.stderr
    ids = submitted.stdout.split()
    assert len(ids) == 3
    assert run("cancel", "team-a", "nightly").returncode == 0
    watched = run("watch", "team-a", "nightly", "--exit-if-inactive")
    assert watched.returncode == 0
    assert watched.stdout.splitlines()[-1] == "All jobs finished: 3 jobs: 3 cancelled"
    failed = run("queue", "get", "ghost")
    assert failed.returncode == 1
    assert failed.stderr == "armada: error: not found: queue 'ghost' not found\n"


def test_node_cordon_and_following_logs_name_what_is_missing(armada) -> None:  # type: ignore[no-untyped-def]
    result = armada("node", "cordon", "ghost")
    assert result.code == 1
    assert result.err == (
        "armada: error: not found: node_name: 'ghost' is not a node of any executor\n"
    )
    result = armada("node", "uncordon", "e1/ghost")
    assert result.code == 1 and "uncordon_node_name: 'e1/ghost'" in result.err
    assert armada("node", "drain", "n").code == 2
    # Following a job that does not exist stops at once, saying so.
    result = armada("logs", "-f", "some-job", "--interval", "0.05")
    assert result.code == 1 and result.err.startswith("armada: error: not found: job")
