"""The `armada` command against a real server over loopback."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from armada_core.cli import main
from armada_server.app import EmbeddedServer


@dataclass
class Result:
    code: int
    out: str
    err: str


class Armada:
    """Runs `armada --url <server> ARGS...` in-process, capturing its output."""

    def __init__(self, address: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.address = address
        self.capsys = capsys

    def __call__(self, *args: str) -> Result:
        self.capsys.readouterr()
        out = io.StringIO()
        try:
            code = main(["--url", self.address, "--timeout", "10", *args], stdout=out)
        except SystemExit as e:  # argparse usage errors
            code = int(e.code or 0)
        captured = self.capsys.readouterr()
        return Result(code, out.getvalue() + captured.out, captured.err)

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.code == 0, result.err
        return result.out


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(
        database_url=f"sqlite:///{tmp_path / 'armada.db'}", http_port=None, heartbeat_seconds=0.2
    ) as running:
        yield running


@pytest.fixture
def armada(server: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> Armada:
    return Armada(server.address, capsys)
