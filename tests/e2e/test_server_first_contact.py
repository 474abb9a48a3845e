"""What `armada-server` says at start-up, and its data directory: one server at a time.

Real `armada-server` processes with the user's data directory in a temporary XDG_DATA_HOME:
the start-up lines name the web UI, the pods' directory and the data directory; a second
server on the same data directory (or SQLite file, or pod sandbox) is refused with an error
naming it, the first server's pid and the way out; PostgreSQL replicas are not; a SIGKILLed
server leaves nothing that blocks the next start.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, job_item

from .processes import BIN, LISTENING, Process, kill_leftovers, wait_until

pytestmark = [pytest.mark.e2e]

Start = Callable[..., Process]


@pytest.fixture
def data_home(tmp_path: Path) -> Path:
    return tmp_path / "xdg"


@pytest.fixture
def armada_server(tmp_path: Path, data_home: Path) -> Iterator[Start]:
    """Starts `armada-server ARGS` (free ports, XDG_DATA_HOME in tmp_path; `http=False`:
    the HTTP port as ARGS say); stops them all."""
    started: list[Process] = []
    env = {**os.environ, "XDG_DATA_HOME": str(data_home)}

    def start(name: str, *argv: str, http: bool = True) -> Process:
        ports = ["--port", "0", *(["--http-port", "0"] if http else [])]
        command = [str(BIN / "armada-server"), *ports, *argv]
        process = Process(name, command, tmp_path, env=env)
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        process.stop()
    kill_leftovers(str(data_home))  # pods of a server a test SIGKILLed


def refused(process: Process) -> str:
    """The output of a server that must exit at once, with status 1."""
    assert process.popen.wait(60) == 1, process.output()
    return process.output()


def test_help_says_what_the_http_port_serves() -> None:
    out = subprocess.run(
        [str(BIN / "armada-server"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    help_text = " ".join(out.split())
    assert "port for metrics" not in help_text
    assert "HTTP port of the web UI, the REST API (/api/v1) and Prometheus metrics" in help_text
    assert "--data-dir DIR" in help_text
    assert "--ready-file PATH" in help_text


def test_start_up_names_the_web_ui_the_pods_and_the_data_directory(
    armada_server: Start, data_home: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready.json"
    server = armada_server("a", "--ready-file", str(ready))
    server.wait_for(r"data directory: .*\n")
    data_dir = data_home / "armada-server"
    lines = server.output().splitlines()
    listening = LISTENING.search(lines[0])
    assert listening is not None, lines
    assert lines[0].endswith(f"(database sqlite:///{data_dir / 'armada.db'})")
    assert lines[1].startswith("  web UI, REST API and metrics: http://127.0.0.1:")
    web_url = lines[1].split(": ", 1)[1]
    assert lines[2] == f"  pods of the local executor: {data_dir / 'pods'}"
    assert lines[3] == (
        f"  data directory: {data_dir} (kept between runs, used by one server at a time; "
        "choose another with --data-dir DIR)"
    )
    with urllib.request.urlopen(web_url, timeout=30) as page:  # the URL serves the UI
        assert page.status == 200
        assert "text/html" in page.headers["content-type"]
    # The same, for scripts: the bound addresses, written once the server accepts calls.
    assert json.loads(ready.read_text()) == {
        "pid": server.popen.pid,
        "grpc": f"{listening.group(1)}:{listening.group(2)}",
        "http": web_url,
        "database": f"sqlite:///{data_dir / 'armada.db'}",
        "data_dir": str(data_dir),
        "sandbox_dir": str(data_dir / "pods"),
    }
    server.stop()
    assert not ready.exists()  # a graceful stop takes it away


def test_without_http_and_executor_it_says_so_and_names_only_what_it_uses(
    armada_server: Start, tmp_path: Path
) -> None:
    config = tmp_path / "no-http.yaml"
    config.write_text(f"http_port: null\ndatabase_url: sqlite:///{tmp_path / 'a.db'}\n")
    server = armada_server("a", "--config", str(config), "--executor", "none", http=False)
    server.wait_for("web UI")
    lines = server.output().splitlines()
    assert lines[1] == "  web UI, REST API and metrics: off (http_port is null)"
    # Nothing of it is in the data directory: no line about it, and no lock there.
    assert not any("data directory" in line or "pods of" in line for line in lines), lines


def test_a_second_server_on_the_same_data_directory_is_refused(
    armada_server: Start, data_home: Path
) -> None:
    first = armada_server("first")
    first.wait_for(LISTENING)
    data_dir = data_home / "armada-server"
    out = refused(armada_server("second"))
    assert out.strip() == (
        f"armada-server: the data directory {data_dir} is in use by another armada-server "
        f"(pid {first.popen.pid}), which keeps its SQLite database and its pod sandbox there "
        f"(lock {data_dir / 'server.lock'}); stop that server, or give this one another data "
        "directory: --data-dir DIR (or data_dir: in the config file)"
    )
    assert first.popen.poll() is None  # the first one serves on
    # What the error says to do works.
    other = armada_server("other", "--data-dir", str(data_home / "other"))
    other.wait_for("data directory: " + str(data_home / "other"))
    # Without pods, the default database alone is enough to be refused ...
    assert "which keeps its SQLite database there" in refused(
        armada_server("no-pods", "--executor", "none")
    )
    # ... and a server that keeps nothing in the data directory starts.
    database = data_home / "elsewhere.db"
    armada_server(
        "nothing-there", "--executor", "none", "--database-url", f"sqlite:///{database}"
    ).wait_for(LISTENING)


def test_an_sqlite_file_or_a_sandbox_outside_the_data_directory_is_locked_too(
    armada_server: Start, tmp_path: Path
) -> None:
    database = tmp_path / "shared" / "armada.db"
    sandbox = tmp_path / "shared-pods"
    first = armada_server(
        "first", "--database-url", f"sqlite:///{database}", "--sandbox-dir", str(sandbox)
    )
    first.wait_for(LISTENING)
    out = refused(
        armada_server("same-db", "--database-url", f"sqlite:///{database}", "--executor", "none")
    )
    assert (
        f"the SQLite database {database} is in use by another armada-server "
        f"(pid {first.popen.pid}) (lock {database}.lock); stop that server, or give this one "
        "another: --database-url sqlite:///PATH"
    ) in out
    out = refused(
        armada_server(
            "same-pods",
            "--database-url",
            f"sqlite:///{tmp_path / 'own.db'}",
            "--sandbox-dir",
            str(sandbox),
        )
    )
    assert (
        f"the pod sandbox {sandbox} is in use by another armada-server (pid {first.popen.pid}) "
        f"(lock {sandbox}.lock); stop that server, or give this one another: --sandbox-dir DIR"
    ) in out
    # A database of its own and no pods: nothing is shared, it starts.
    armada_server(
        "own", "--database-url", f"sqlite:///{tmp_path / 'own.db'}", "--executor", "none"
    ).wait_for(LISTENING)


@pytest.mark.postgres
def test_replicas_on_one_postgresql_database_share_the_data_directory(
    armada_server: Start, data_home: Path, postgres_server
) -> None:  # type: ignore[no-untyped-def]
    """Replicas keep nothing in the data directory (no SQLite file, no pods): no lock."""
    database = postgres_server.new_database()
    for name in ("a", "b"):
        replica = armada_server(name, "--database-url", database, "--executor", "none")
        replica.wait_for(LISTENING)
        assert "data directory" not in replica.output()
    assert not (data_home / "armada-server" / "server.lock").exists()
    # A replica running the local executor keeps its pods in the data directory: one may.
    local = armada_server("local-1", "--database-url", database)
    local.wait_for("data directory: ")
    out = refused(armada_server("local-2", "--database-url", database))
    assert "which keeps its pod sandbox there" in out


@pytest.mark.slow
def test_a_sigkilled_server_leaves_no_lock_behind(armada_server: Start, data_home: Path) -> None:
    """SIGKILL gives the server no chance to clean up, and its pods live on: the next server
    on the data directory starts all the same (and adopts them)."""
    first = armada_server("first", "--scheduling-period", "0.2")
    match = first.wait_for(LISTENING)
    address = f"{match.group(1)}:{match.group(2)}"
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        spec = {
            "containers": [
                {
                    "name": "main",
                    "command": ["sleep", "600"],
                    "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
                }
            ]
        }
        [job_id] = client.submit_jobs("q", "s", [job_item(spec)])
        wait_until(
            lambda: client.get_job_status([job_id])[job_id] == submit_pb2.RUNNING,
            60,
            "the job to run",
        )
    first.kill()
    lock = data_home / "armada-server" / "server.lock"
    assert lock.read_text().strip() == str(first.popen.pid)  # the file stays: harmless
    second = armada_server("second", "--scheduling-period", "0.2")
    second.wait_for("data directory: ")
    second.wait_for("adopted 1 runs")
    assert lock.read_text().strip() == str(second.popen.pid)
