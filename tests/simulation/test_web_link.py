"""The web UI links the simulator's pages written into its data directory."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from armada_server.app import EmbeddedServer
from armada_server.cli import main

pytestmark = pytest.mark.slow  # simulations of hours, through real storage

WORKLOAD = """
queues: [{name: a}]
nodes: [1x4x8Gi]
jobs: [{queue: a, count: 3, runtime: 1m, cpu: "2"}]
"""


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:
        text: str = response.read().decode()
    return text


def test_pages_in_the_data_directory_are_listed_and_served(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    (data / "simulations").mkdir(parents=True)
    page = data / "simulations" / "what-if.html"
    assert main(["simulate", "--workload", str(tmp_path / "w.yaml"), "--html", str(page)]) == 0
    with EmbeddedServer(executor="none", http_port=0, data_dir=str(data)) as server:
        base = f"http://127.0.0.1:{server.server.http_port}"
        assert 'href="/simulations"' in get(f"{base}/queues")
        assert 'href="/simulations/what-if.html"' in get(f"{base}/simulations")
        assert get(f"{base}/simulations/what-if.html") == page.read_text()
        for wrong in ("nothing.html", "..%2Farmada.db", "server.lock"):
            with pytest.raises(urllib.error.HTTPError) as missing:
                get(f"{base}/simulations/{wrong}")
            assert missing.value.code == 404
