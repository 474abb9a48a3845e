"""Container logs: one timestamped line per output line, read back by time or tail."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from armada_server.executors.local import LocalPodRunner, PodPhase, format_timestamp, read_logs
from armada_server.executors.local.logs import MAX_RECORD_BYTES, LogWriter

from .helpers import pod, py, sh, start

pytestmark = pytest.mark.timeout(60)


async def test_output_is_captured_per_container_with_timestamps(runner: LocalPodRunner) -> None:
    before = datetime.now(UTC)
    script = "for i in 1 2 3; do echo out $i; echo err $i >&2; sleep 0.01; done"
    handle = start(runner, pod(sh("a", script), sh("b", "echo only b; printf 'no newline'")))
    assert (await handle.wait()).phase is PodPhase.SUCCEEDED
    lines = handle.read_logs("a")
    # Two pipes: the order within a stream is kept, the interleaving of streams is best-effort.
    assert [line.text for line in lines if line.stream == "stdout"] == ["out 1", "out 2", "out 3"]
    assert [line.text for line in lines if line.stream == "stderr"] == ["err 1", "err 2", "err 3"]
    times = [line.time for line in lines]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert before <= times[0] and times[-1] <= datetime.now(UTC)
    assert [line.text for line in handle.read_logs("b")] == ["only b", "no newline"]
    raw = handle.log_path("a").read_text().splitlines()[0]
    assert raw == f"{lines[0].timestamp} {lines[0].stream} F {lines[0].text}"


async def test_tail_and_since(runner: LocalPodRunner) -> None:
    handle = start(runner, pod(sh("main", "for i in 0 1 2 3 4; do echo line $i; done")))
    await handle.wait()
    lines = handle.read_logs("main")
    assert [line.text for line in handle.read_logs("main", tail=2)] == ["line 3", "line 4"]
    assert handle.read_logs("main", tail=0) == []
    assert handle.read_logs("main", tail=100) == lines
    assert handle.read_logs("main", since=lines[2].time) == lines[3:]
    assert handle.read_logs("main", since=lines[1].time, tail=2) == lines[3:]
    assert handle.read_logs("main", since=lines[-1].time) == []
    naive = lines[2].time.replace(tzinfo=None)
    assert handle.read_logs("main", since=naive) == lines[3:]
    # The same lines by pod name and run id, as a Logs RPC would ask after the pod is gone.
    assert runner.read_logs(handle.pod_name, handle.run_id, "main", tail=1) == lines[-1:]


async def test_follow_with_since_sees_every_line_once(runner: LocalPodRunner) -> None:
    code = "import time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(0.01)"
    handle = start(runner, pod(py("main", code)))
    seen: list[str] = []
    since = None
    while True:
        finished = handle.done
        batch = handle.read_logs("main", since=since)
        seen += [line.text for line in batch]
        since = batch[-1].time if batch else since
        if finished:
            break
        await asyncio.sleep(0.02)
    assert seen == [str(i) for i in range(30)]


async def test_long_lines_are_split_and_joined_again(runner: LocalPodRunner) -> None:
    # 90,000 bytes of 3-byte characters: split into 16 KiB records, mid-character.
    code = "import sys; sys.stdout.write('€' * 30000 + '\\nshort\\n')"
    handle = start(runner, pod(py("main", code)))
    await handle.wait()
    assert [line.text for line in handle.read_logs("main")] == ["€" * 30000, "short"]
    records = handle.log_path("main").read_bytes().splitlines()
    assert [r.split(b" ")[2] for r in records] == [b"P"] * 5 + [b"F", b"F"]
    assert handle.read_logs("main", tail=2)[0].text == "€" * 30000


def test_missing_log_reads_as_empty(tmp_path: Path) -> None:
    assert read_logs(tmp_path / "nothing.log") == []
    assert read_logs(tmp_path / "nothing.log", tail=3) == []


def test_tail_of_a_large_file_reads_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    writer = LogWriter(path)
    for i in range(10000):
        writer.write("stdout" if i % 2 else "stderr", f"line {i:05d}\n".encode())
    writer.write("stdout", b"x" * (MAX_RECORD_BYTES * 2 + 5))  # unfinished long line
    writer.close()
    assert path.stat().st_size > 5 * 64 * 1024  # more than the first two backward reads
    everything = read_logs(path)
    assert len(everything) == 10001 and everything[-1].text == "x" * (MAX_RECORD_BYTES * 2 + 5)
    assert read_logs(path, tail=3) == everything[-3:]
    assert read_logs(path, tail=5000) == everything[-5000:]
    since = everything[-10].time
    assert read_logs(path, since=since, tail=100) == everything[-9:]
    assert read_logs(path, since=since) == everything[-9:]


def test_a_record_still_being_written_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "half.log"
    writer = LogWriter(path)
    writer.write("stdout", b"first\n")
    writer.write("stdout", b"second line\n")
    writer.close()
    whole = path.read_bytes()
    path.write_bytes(whole[: whole.rindex(b"second") + 3])  # the writer is mid-record
    assert [line.text for line in read_logs(path)] == ["first"]
    assert [line.text for line in read_logs(path, tail=5)] == ["first"]
    path.write_bytes(whole)  # the record is complete: it reads whole, once
    assert [line.text for line in read_logs(path)] == ["first", "second line"]


def test_timestamps_are_rfc3339_utc() -> None:
    when = datetime(2024, 5, 1, 12, 30, 5, 123456, tzinfo=UTC)
    assert format_timestamp(when) == "2024-05-01T12:30:05.123456Z"
    elsewhere = when.astimezone(timezone(timedelta(hours=2)))
    assert format_timestamp(elsewhere) == "2024-05-01T12:30:05.123456Z"
