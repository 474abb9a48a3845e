"""`armada-server simulate`: workloads from YAML and generators, refused with the field named
when wrong; the JSON and a self-contained HTML page, for one configuration or two."""

from __future__ import annotations

import gc
import json
import re
from pathlib import Path

import pytest

from armada_server.cli import main
from armada_server.config import ServerConfig
from armada_server.simulation.command import cores
from armada_server.simulation.generators import generate
from armada_server.simulation.run import YOUNG_THRESHOLD, simulate
from armada_server.simulation.workload import WorkloadError, parse_workload

SMALL = """
queues: [{name: a}, {name: b, priority_factor: 2}]
nodes: [2x4x8Gi]
jobs:
  - {queue: a, count: 6, every: 10, runtime: 2m, cpu: "2", memory: 1Gi}
  - {queue: b, at: 1m, count: 4, runtime: 90s, cpu: "1"}
  - {queue: b, at: 3m, gang: {cardinality: 2}, runtime: 1m}
"""


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"queues": [{"name": "a"}], "jobs": [{"queue": "a"}]}, "jobs[0].runtime: is required"),
        (
            {"queues": [{"name": "a"}], "jobs": [{"queue": "a", "runtime": 1, "cpus": 2}]},
            "jobs[0].cpus: unknown field",
        ),
        (
            {"queues": [{"name": "a"}], "jobs": [{"queue": "x", "runtime": 1}]},
            "queue 'x' is not in queues",
        ),
        (
            {"queues": [{"name": "a"}], "jobs": [{"queue": "a", "runtime": "soon"}]},
            "jobs[0].runtime: expected a duration",
        ),
        ({"queues": [], "jobs": []}, "queues: expected a non-empty list"),
        (
            {"queues": [{"name": "a", "priority_factor": 0}], "jobs": []},
            "queues[0].priority_factor: must be positive",
        ),
        (
            {
                "queues": [{"name": "a"}],
                "jobs": [{"queue": "a", "runtime": 1, "gang": {"cardinality": 2}, "roles": []}],
            },
            "jobs[0]: give gang or roles, not both",
        ),
        (
            {"queues": [{"name": "a"}], "nodes": ["2x4"], "jobs": [{"queue": "a", "runtime": 1}]},
            "nodes[0]",
        ),
    ],
)
def test_a_wrong_workload_is_refused_naming_the_field(document: object, message: str) -> None:
    with pytest.raises(WorkloadError) as refused:
        parse_workload(document)
    assert message in str(refused.value)


def test_generators_are_named_and_seeded() -> None:
    one = generate("steady,nodes=10,jobs=200,hours=1", seed=4)
    assert one == generate("steady,nodes=10,jobs=200,hours=1", seed=4)
    assert one.arrivals != generate("steady,nodes=10,jobs=200,hours=1", seed=5).arrivals
    assert one.nodes[0].count == 10 and len(one.queues) == 10
    with pytest.raises(WorkloadError, match="expected one of steady, latecomer"):
        generate("busy")
    with pytest.raises(WorkloadError, match="'size=3' is not KEY=VALUE with KEY one of"):
        generate("steady,size=3")


def test_one_workload_under_two_configurations(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(SMALL)
    (tmp_path / "plain.yaml").write_text("scheduling_period: 5\n")
    (tmp_path / "decayed.yaml").write_text(
        "scheduling_period: 5\nscheduling: {usage_half_life: 600}\n"
    )
    out, page = tmp_path / "out.json", tmp_path / "out.html"
    code = main(
        [
            "simulate",
            "--workload",
            str(tmp_path / "w.yaml"),
            "--config",
            str(tmp_path / "plain.yaml"),
            "--compare",
            str(tmp_path / "decayed.yaml"),
            "--json",
            str(out),
            "--html",
            str(page),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert [r["label"] for r in result["runs"]] == ["plain.yaml", "decayed.yaml"]
    for run in result["runs"]:
        fig = run["figures"]
        assert fig["queues"]["a"]["jobs_run"] == 6 and fig["queues"]["b"]["jobs_run"] == 6
        assert fig["queues"]["b"]["wait_seconds"]["max"] is not None
        assert set(fig["utilisation"]) == {"cpu", "memory"}
        assert 0 < fig["utilisation"]["cpu"]["mean"] <= 1
        times = fig["times"]
        assert (
            len(fig["queues"]["a"]["share"]) == len(fig["fairness_error"]["series"]) == len(times)
        )
    html = page.read_text()
    # Self-contained: the plots are inline SVG, nothing is fetched and nothing runs.
    assert html.count("<svg") == 2 * 4
    assert "<script" not in html and not re.search(r"""(src|href)=["']?https?:""", html)
    assert "plain.yaml" in html and "decayed.yaml" in html


def test_a_comparison_equals_each_configuration_run_alone(tmp_path: Path) -> None:
    """The two runs of --compare go side by side in processes of their own (on two cores or
    more): each must come back whole, under its own label and in its place."""
    assert cores() >= 2  # else this compares the one-after-another path only
    (tmp_path / "w.yaml").write_text(SMALL)
    (tmp_path / "plain.yaml").write_text("scheduling_period: 5\n")
    (tmp_path / "slow.yaml").write_text("scheduling_period: 40\n")
    workload = ["simulate", "--workload", str(tmp_path / "w.yaml")]

    def figures(*args: str) -> list[tuple[str, object]]:
        out = tmp_path / "out.json"
        assert main([*workload, *args, "--json", str(out)]) == 0
        return [(r["label"], r["figures"]) for r in json.loads(out.read_text())["runs"]]

    plain, slow = str(tmp_path / "plain.yaml"), str(tmp_path / "slow.yaml")
    side_by_side = figures("--config", plain, "--compare", slow)
    assert side_by_side == figures("--config", plain) + figures("--config", slow)
    assert side_by_side[0][1] != side_by_side[1][1]  # the two configurations differ


def test_the_command_says_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.yaml").write_text("queues: [{name: a}]\njobs: [{queue: a}]\n")
    out = str(tmp_path / "o.json")
    assert main(["simulate", "--workload", str(tmp_path / "w.yaml"), "--json", out]) == 2
    assert "jobs[0].runtime: is required" in capsys.readouterr().err
    assert main(["simulate", "--workload", "gen:steady"]) == 2
    assert "give --json FILE, --html FILE or both" in capsys.readouterr().err
    assert main(["simulate", "--workload", "gen:steady,load=-1", "--json", out]) == 2
    assert "load must be positive" in capsys.readouterr().err
    # Refused inside a comparison's runs, each in a process of its own, it is said the same.
    (tmp_path / "bare.yaml").write_text("queues: [{name: a}]\njobs: [{queue: a, runtime: 1}]\n")
    (tmp_path / "c.yaml").write_text("scheduling_period: 5\n")
    bare, config = str(tmp_path / "bare.yaml"), str(tmp_path / "c.yaml")
    compare = ["--config", config, "--compare", config, "--json", out]
    assert main(["simulate", "--workload", bare, *compare]) == 2
    assert "nodes: neither the workload nor the configuration gives any" in capsys.readouterr().err


def test_a_long_run_reports_its_progress_every_simulated_hour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "w.yaml").write_text(
        """
queues: [{name: a}]
nodes: [1x4x8Gi]
duration: 3h
jobs:
  - {queue: a, count: 5, every: 30m, runtime: 20m, cpu: "1"}
"""
    )
    out = tmp_path / "out.json"
    assert main(["simulate", "--workload", str(tmp_path / "w.yaml"), "--json", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if "jobs submitted" in line]
    # The last job ends at 2 h 20 min: the run stops there, before its duration.
    assert [line.split(" simulated hours")[0] for line in lines] == [
        "defaults: 1 of 3",
        "defaults: 2 of 3",
    ]
    assert "3/5 jobs submitted" in lines[0] and "5/5 jobs submitted" in lines[1]
    assert err[-1].startswith("defaults: 2.3 simulated hours, 5 jobs")


def test_a_run_collects_its_young_garbage_rarely_and_puts_the_threshold_back() -> None:
    workload = parse_workload(
        {
            "queues": [{"name": "a"}],
            "nodes": [{"count": 1, "cpu": "4", "memory": "8Gi"}],
            "jobs": [{"queue": "a", "count": 3, "every": 1800, "runtime": 600, "cpu": "1"}],
        }
    )
    during: list[tuple[int, ...]] = []
    before = gc.get_threshold()
    recording = simulate(
        workload, ServerConfig(), progress=lambda _: during.append(gc.get_threshold())
    )
    assert len(recording.jobs) == 3
    assert during and all(t[0] == YOUNG_THRESHOLD for t in during)
    assert gc.get_threshold() == before
