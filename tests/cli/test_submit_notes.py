"""`armada submit` says what the server says of the jobs it accepted (JobSubmitResponse.notes,
an extension), on standard error so that `-q` still prints the ids alone, and what it says of
a queue that refuses them."""

from __future__ import annotations

from pathlib import Path

from .conftest import Armada

JOBS = """\
queue: team-a
jobSetId: nightly
jobs:
  - podSpec: &pod
      containers:
        - name: main
          image: busybox
          resources: {requests: {cpu: "1000", memory: 1Gi}, limits: {cpu: "1000", memory: 1Gi}}
  - podSpec: *pod
"""
NO_EXECUTOR = (
    "armada: note: no executor has connected yet, so whether the jobs fit a node could not be "
    "checked; they wait until one connects\n"
)


def test_submit_prints_the_servers_notes_on_standard_error(armada: Armada, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    armada.ok("queue", "create", "team-a")
    said = armada("submit", str(jobs))
    assert said.code == 0 and said.err == NO_EXECUTOR
    assert [line.split(" to job set ")[1] for line in said.out.splitlines()] == ["nightly"] * 2
    quiet = armada("submit", str(jobs), "-q")
    assert quiet.code == 0 and quiet.err == NO_EXECUTOR
    assert len(quiet.out.split()) == 2


def test_submit_to_a_cordoned_queue_says_how_to_lift_the_cordon(
    armada: Armada, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    armada.ok("queue", "create", "team-a")
    armada.ok("queue", "cordon", "team-a")
    refused = armada("submit", str(jobs))
    assert refused.code == 1 and refused.out == ""
    assert refused.err == (
        "armada: error: failed precondition: queue 'team-a' is cordoned: it takes no new jobs "
        "and its queued jobs are not scheduled (jobs already running go on); lift the cordon "
        "with: armada queue uncordon team-a\n"
    )
