"""`armada cancel` and `armada reprioritize` of a whole job set: how many jobs, finished ones
skipped, and a job set that does not exist said to be so."""

from __future__ import annotations

from pathlib import Path

from .conftest import Armada
from .servers import job_file


def submit(armada: Armada, tmp_path: Path, job_set: str, count: int) -> list[str]:
    path = tmp_path / "jobs.yaml"
    path.write_text(job_file("q", job_set, *["true"] * count))
    return armada.ok("submit", "-q", str(path)).split()


def test_cancelling_a_job_set_says_how_many_jobs(armada: Armada, tmp_path: Path) -> None:
    armada.ok("queue", "create", "q")
    ids = submit(armada, tmp_path, "nightly", 3)
    armada.ok("cancel", "q", "nightly", ids[0])
    assert (
        armada.ok("cancel", "q", "nightly")
        == "Requested cancellation of 2 jobs of job set nightly (1 already finished)\n"
    )
    assert armada.ok("status", *ids).split()[1::2] == ["CANCELLED"] * 3
    assert (
        armada.ok("cancel", "q", "nightly")
        == "Requested cancellation of 0 jobs of job set nightly (3 already finished)\n"
    )
    [single] = submit(armada, tmp_path, "single", 1)
    assert armada.ok("cancel", "q", "single", "--state", "running") == (
        "Requested cancellation of 0 jobs of job set single in states running (1 in other states)\n"
    )
    assert armada.ok("cancel", "q", "single", "--state", "queued") == (
        "Requested cancellation of 1 job of job set single in states queued\n"
    )
    assert armada.ok("status", single) == f"{single} CANCELLED\n"


def test_cancelling_a_job_set_that_does_not_exist(armada: Armada) -> None:
    armada.ok("queue", "create", "q")
    result = armada("cancel", "q", "ghost")
    assert result.code == 1 and result.out == ""
    assert result.err == (
        "armada: error: job set 'ghost' does not exist in queue 'q': "
        "no job was ever submitted to it\n"
    )
    missing_queue = armada("cancel", "nope", "ghost")
    assert missing_queue.code == 1 and "queue 'nope' not found" in missing_queue.err


def test_reprioritizing_a_job_set_skips_its_finished_jobs(armada: Armada, tmp_path: Path) -> None:
    armada.ok("queue", "create", "q")
    done, live = submit(armada, tmp_path, "s", 2)
    armada.ok("cancel", "q", "s", done)
    result = armada("reprioritize", "q", "s", "5")
    assert result.code == 0, result.out
    assert result.out.splitlines() == [
        f"{live}: reprioritized",
        "Reprioritized 1 job of job set s to priority 5; skipped 1 finished job",
    ]
    # Named, a finished job is still an error.
    named = armada("reprioritize", "q", "s", "7", done)
    assert named.code == 1 and f"{done}: not reprioritized: job is cancelled" in named.out
    ghost = armada("reprioritize", "q", "ghost", "5")
    assert ghost.code == 1
    assert "job set 'ghost' does not exist in queue 'q'" in ghost.err
