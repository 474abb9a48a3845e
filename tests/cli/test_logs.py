"""`armada logs`: says when a job has no log, and reads the logs of every run of a job the
server retried (on the local executor, which keeps each run's log)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from armada_core.client import ArmadaClient, NotFound
from armada_server.app import EmbeddedServer

from .conftest import Armada
from .servers import ended, job_file, server_config, start, wait_until


def submit(armada: Armada, tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    return armada.ok("submit", "-q", str(path)).split()


def test_a_job_that_never_ran_has_no_logs(armada: Armada, tmp_path: Path) -> None:
    armada.ok("queue", "create", "q")
    [waiting, cancelled] = submit(armada, tmp_path, job_file("q", "s", "echo hi", "echo hi"))
    result = armada("logs", waiting)
    assert result.code == 1 and result.out == ""
    assert result.err == (
        f"armada: error: job {waiting} has not run yet (QUEUED): it has no logs yet; "
        f"`armada logs -f {waiting}` waits for them\n"
    )
    armada.ok("cancel", "q", "s", cancelled)
    for args in (("logs", cancelled), ("logs", "-f", cancelled, "--interval", "0.05")):
        result = armada(*args)
        assert result.code == 1 and result.out == ""
        assert result.err == (
            f"armada: error: job {cancelled} ended (CANCELLED) without running: it has no logs\n"
        )


@pytest.fixture
def retried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[Armada, str, list[str]]]:
    """A job that failed twice on the local executor (retried once by its queue's policy):
    the armada command, the job, its runs' ids."""
    server: EmbeddedServer = start(server_config(tmp_path, "local"))
    try:
        armada = Armada(server.address, capsys)
        armada.ok(
            "retry-policy", "create", "again", "--retry-limit", "1", "--default-action", "Retry"
        )
        armada.ok("queue", "create", "q", "--retry-policy", "again")
        [job] = submit(armada, tmp_path, job_file("q", "s", "echo attempt on $HOSTNAME; exit 3"))
        with ArmadaClient(server.address) as c:
            wait_until(ended(c, job), "the job's end")
            runs = [r.run_id for r in c.get_job_details([job], expand_job_run=True)[job].job_runs]
        assert len(runs) == 2
        yield armada, job, runs
    finally:
        server.stop()


def test_every_run_of_a_retried_job_has_its_log(retried: tuple[Armada, str, list[str]]) -> None:
    armada, job, runs = retried
    first, second = f"attempt on armada-{job}-0", f"attempt on armada-{job}-0-1"
    assert armada.ok("logs", job) == f"{second}\n"  # the latest run, as before
    assert armada.ok("logs", job, "--run", "0") == f"{first}\n"
    assert armada.ok("logs", job, "--run", "1") == f"{second}\n"
    assert armada.ok("logs", job, "--run", runs[0]) == f"{first}\n"
    assert armada.ok("logs", job, "--all-runs").splitlines() == [
        f"==> run 0 ({runs[0]}) on local/local-0: failed <==",
        first,
        f"==> run 1 ({runs[1]}) on local/local-0: failed <==",
        second,
    ]
    doc = json.loads(armada.ok("logs", job, "--all-runs", "-o", "json"))
    assert doc["jobId"] == job
    assert [(r["run"], r["runId"], r["state"]) for r in doc["runs"]] == [
        (0, runs[0], "failed"),
        (1, runs[1], "failed"),
    ]
    assert [[x["line"] for x in r["lines"]] for r in doc["runs"]] == [[first], [second]]
    assert all(x["timestamp"] for r in doc["runs"] for x in r["lines"])
    latest = json.loads(armada.ok("logs", job, "-o", "json"))
    assert [(r["run"], r["runId"]) for r in latest["runs"]] == [(1, runs[1])]
    missing = armada("logs", job, "--run", "2")
    assert missing.code == 1
    assert missing.err == (f"armada: error: job {job} has 2 run(s), numbered 0 to 1: no run 2\n")
    stranger = armada("logs", job, "--run", "not-a-run")
    assert stranger.code == 1 and "'not-a-run' is not a run of job" in stranger.err
    assert armada("logs", job, "--run", "0", "-f").code == 2
    with ArmadaClient(armada.address) as c:
        with pytest.raises(NotFound, match="run 'nope' not found"):
            c.logs(job, run_id="nope")
        assert [x.line for x in c.logs("", run_id=runs[0])] == [first]
