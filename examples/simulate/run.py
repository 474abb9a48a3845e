"""Simulate one workload under two configurations and write the comparison.

    .venv/bin/python examples/simulate/run.py [OUT_DIR]

Runs `armada-server simulate` on workload.yaml under instant.yaml (instantaneous fair share)
and half_life.yaml (a one-hour usage half-life), writes comparison.json and comparison.html
to OUT_DIR (default: this folder), and prints how the latecomer queue fared under each.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from armada_server.cli import main as armada_server

HERE = Path(__file__).parent


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    code = armada_server(
        [
            "simulate",
            "--workload",
            str(HERE / "workload.yaml"),
            "--config",
            str(HERE / "instant.yaml"),
            "--compare",
            str(HERE / "half_life.yaml"),
            "--json",
            str(out / "comparison.json"),
            "--html",
            str(out / "comparison.html"),
        ]
    )
    if code:
        return code
    result = json.loads((out / "comparison.json").read_text())
    for run in result["runs"]:
        q = run["figures"]["queues"]["interactive"]
        print(
            f"{Path(run['label']).stem}: interactive waited p50 {q['wait_seconds']['p50']:.0f} s, "
            f"p95 {q['wait_seconds']['p95']:.0f} s; mean share {q['mean_share']:.1%} "
            f"(fair share {q['mean_fair_share']:.1%})"
        )
    print(f"wrote {out / 'comparison.json'} and {out / 'comparison.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE))
