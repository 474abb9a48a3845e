"""Following events across disconnects, heartbeats, silence, polling fallback, cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from armada_core.api import event_pb2, submit_pb2
from armada_core.client import (
    ArmadaClient,
    AsyncArmadaClient,
    JobResult,
    Notice,
    WaitTimeout,
    WatchOptions,
    job_item,
    queue,
)

from .conftest import Servers, pod
from .flavours import AsyncOnThread

# Fast channel reconnects, so that a restarted server is found again quickly.
FAST = (
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 200),
)
QUICK = WatchOptions(
    reconnect_delay=0.02, max_reconnect_delay=0.1, poll_interval=0.1, silence_timeout=5.0
)


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)


def watchers(servers: Servers) -> int:
    """Open event streams on the server (its event hub's subscribers)."""
    assert servers.current is not None
    hub = servers.current.server.storage.transactions.on_commit.__self__  # type: ignore[union-attr]
    return hub.watchers()


def ids_of(messages: list[event_pb2.EventStreamMessage]) -> list[int]:
    return [int(m.id) for m in messages]


def kinds(messages) -> list[str]:
    return [m.message.WhichOneof("events") for m in messages]


@pytest.fixture
def fast_client(servers: Servers):  # type: ignore[no-untyped-def]
    with ArmadaClient(servers.address, timeout=5, options=FAST, wait_for_ready=True) as c:
        c.create_queue(queue("q"))
        yield c


def test_follow_resumes_after_a_server_restart(servers: Servers, fast_client: ArmadaClient) -> None:
    a, b = fast_client.submit_jobs("q", "s", [job_item(pod()), job_item(pod())])
    got: list[event_pb2.EventStreamMessage] = []
    notices: list[Notice] = []

    def follow() -> None:
        for message in fast_client.follow_events("q", "s", options=QUICK, on_notice=notices.append):
            got.append(message)
            if len(got) == 10:
                break

    reader = threading.Thread(target=follow)
    reader.start()
    eventually(lambda: len(got) == 4)
    servers.restart()
    fast_client.cancel_jobs("q", "s", [a, b])
    fast_client.submit_jobs("q", "s", [job_item(pod())])
    reader.join(10)
    assert not reader.is_alive()
    assert ids_of(got) == list(range(1, 11))  # no gap, no duplicate
    assert kinds(got)[4:] == [
        "cancelling",
        "cancelled",
        "cancelling",
        "cancelled",
        "submitted",
        "queued",
    ]
    assert {"reconnecting", "connected"} <= {n.kind for n in notices}
    eventually(lambda: watchers(servers) == 0)  # leaving the loop closed the stream


async def test_async_follow_resumes_after_a_server_restart(servers: Servers) -> None:
    async with AsyncArmadaClient(
        servers.address, timeout=5, options=FAST, wait_for_ready=True
    ) as c:
        await c.create_queue(queue("q"))
        [a] = await c.submit_jobs("q", "s", [job_item(pod())])
        got: list[event_pb2.EventStreamMessage] = []
        notices: list[Notice] = []
        async with contextlib.aclosing(
            c.follow_events("q", "s", options=QUICK, on_notice=notices.append)
        ) as events:
            async for message in events:
                got.append(message)
                if len(got) == 2:
                    await asyncio.to_thread(servers.restart)
                    await c.cancel_jobs("q", "s", [a])
                if len(got) == 4:
                    break
        assert ids_of(got) == [1, 2, 3, 4]
        assert kinds(got) == ["submitted", "queued", "cancelling", "cancelled"]
        assert "reconnecting" in {n.kind for n in notices}
        eventually(lambda: watchers(servers) == 0)


def test_heartbeats_are_swallowed_and_keep_the_stream(
    servers: Servers, fast_client: ArmadaClient
) -> None:
    # The server sends a heartbeat every 0.2 s; 1 s of silence would count as a dead stream.
    fast_client.submit_jobs("q", "s", [job_item(pod())])
    options = WatchOptions(silence_timeout=1.0)
    got: list[event_pb2.EventStreamMessage] = []
    notices: list[Notice] = []
    events = fast_client.follow_events("q", "s", options=options, on_notice=notices.append)
    got += [next(events), next(events)]
    time.sleep(1.5)  # about seven heartbeats arrive meanwhile
    fast_client.submit_jobs("q", "s", [job_item(pod())])
    got += [next(events), next(events)]
    events.close()
    assert kinds(got) == ["submitted", "queued", "submitted", "queued"]
    assert ids_of(got) == [1, 2, 3, 4]
    assert notices == []  # never reconnected
    eventually(lambda: watchers(servers) == 0)


def test_silent_streams_are_reopened_without_heartbeats(
    servers: Servers, fast_client: ArmadaClient
) -> None:
    # Upstream Armada sends nothing while a job set is idle: silence just reopens the stream.
    fast_client.submit_jobs("q", "s", [job_item(pod())])
    options = WatchOptions(heartbeats=False, silence_timeout=0.25)
    notices: list[Notice] = []
    got: list[event_pb2.EventStreamMessage] = []

    def follow() -> None:
        for message in fast_client.follow_events(
            "q", "s", options=options, on_notice=notices.append
        ):
            got.append(message)
            if len(got) == 4:
                break

    reader = threading.Thread(target=follow)
    reader.start()
    eventually(lambda: len(got) == 2)
    time.sleep(1.0)  # the reader waits on a silent stream meanwhile
    fast_client.submit_jobs("q", "s", [job_item(pod())])
    reader.join(10)
    assert ids_of(got) == [1, 2, 3, 4]
    assert "silent" in {n.kind for n in notices}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_wait_for_jobs_returns_each_jobs_end(servers: Servers, flavour: str) -> None:
    c: Any = (
        ArmadaClient(servers.address, timeout=5)
        if flavour == "sync"
        else AsyncOnThread(servers.address, timeout=5)
    )
    try:
        c.create_queue(queue("q"))
        a, b, x = c.submit_jobs("q", "s", [job_item(pod()) for _ in range(3)])
        c.cancel_jobs("q", "s", [a], reason="first")  # already over before waiting starts
        seen: list[tuple[str, str]] = []
        started = threading.Event()

        def on_event(message: event_pb2.EventStreamMessage, result: JobResult) -> None:
            seen.append((result.job_id, message.message.WhichOneof("events")))
            if len(seen) >= 6:
                started.set()

        def later() -> None:
            started.wait(10)
            c.reprioritize_jobs("q", "s", 5, [b])
            c.cancel_job_set("q", "s", reason="rest")

        helper = threading.Thread(target=later)
        helper.start()
        results = c.wait_for_jobs("q", "s", [a, b, x], timeout=20, on_event=on_event)
        helper.join(10)
        assert set(results) == {a, b, x}
        assert all(r.state == submit_pb2.CANCELLED and r.terminal for r in results.values())
        assert results[a].cancel_reason == "first"
        assert results[b].cancel_reason == results[x].cancel_reason == "rest"
        assert all(r.source == "events" for r in results.values())
        assert (b, "reprioritized") in seen
        assert results[a].job_end().state == submit_pb2.CANCELLED
        # Jobs of other job sets and unknown ids are never waited on forever.
        assert c.wait_for_jobs("q", "s", []) == {}
        with pytest.raises(WaitTimeout):
            c.wait_for_jobs("q", "s", ["not-a-job"], timeout=0.3)
    finally:
        c.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_wait_falls_back_to_polling_while_the_stream_is_down(
    servers: Servers, flavour: str
) -> None:
    c: Any = (
        ArmadaClient(servers.address, timeout=2, options=FAST)
        if flavour == "sync"
        else AsyncOnThread(servers.address, timeout=2, options=FAST)
    )
    try:
        c.create_queue(queue("q"))
        ids = c.submit_jobs("q", "s", [job_item(pod()), job_item(pod())])
        options = WatchOptions(
            reconnect_delay=0.02,
            max_reconnect_delay=0.05,
            fallback_after=2,
            poll_interval=0.1,
            silence_timeout=5,
        )
        notices: list[Notice] = []
        seen = threading.Event()
        outcome: dict[str, Any] = {}

        def wait() -> None:
            try:
                outcome["results"] = c.wait_for_jobs(
                    "q",
                    "s",
                    ids,
                    timeout=30,
                    options=options,
                    on_notice=notices.append,
                    on_event=lambda m, r: seen.set() if m.id == "4" else None,
                )
            except BaseException as e:  # reported by the assertion below
                outcome["error"] = e

        waiter = threading.Thread(target=wait)
        waiter.start()
        assert seen.wait(10)
        servers.stop()
        eventually(lambda: "polling" in {n.kind for n in notices})
        # While the client's server is down the jobs end elsewhere: another server on the
        # same database cancels them. Then the client's server comes back.
        other = servers.start(port=0)
        with ArmadaClient(other.address, timeout=5) as admin:
            admin.cancel_jobs("q", "s", ids, reason="cancelled meanwhile")
        other.stop()
        servers.start()
        waiter.join(20)
        assert "error" not in outcome, outcome.get("error")
        results: dict[str, JobResult] = outcome["results"]
        assert {r.state for r in results.values()} == {submit_pb2.CANCELLED}
        # Once the server is back, its next poll or its resumed stream may tell first (a
        # race on a loaded machine); either way the outcome is complete: catching up on the
        # events fills in what polling cannot tell.
        assert {r.source for r in results.values()} <= {"status", "events"}
        assert {r.cancel_reason for r in results.values()} == {"cancelled meanwhile"}
        kinds_seen = [n.kind for n in notices]
        assert "reconnecting" in kinds_seen and "polling" in kinds_seen
    finally:
        c.close()


async def test_cancelling_the_waiting_task_closes_the_stream(servers: Servers) -> None:
    async with AsyncArmadaClient(servers.address, timeout=5) as c:
        await c.create_queue(queue("q"))
        [job] = await c.submit_jobs("q", "s", [job_item(pod())])
        task = asyncio.create_task(c.wait_for_jobs("q", "s", [job]))
        for _ in range(500):
            if watchers(servers) == 1:
                break
            await asyncio.sleep(0.01)
        assert watchers(servers) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(500):
            if watchers(servers) == 0:
                break
            await asyncio.sleep(0.01)
        assert watchers(servers) == 0

        # The same for a follow_events task.
        async def follow() -> None:
            async for _ in c.follow_events("q", "s"):
                pass

        task = asyncio.create_task(follow())
        for _ in range(500):
            if watchers(servers) == 1:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(500):
            if watchers(servers) == 0:
                break
            await asyncio.sleep(0.01)
        assert watchers(servers) == 0
        assert (await c.get_job_status([job]))[job] == submit_pb2.QUEUED


async def test_a_cancelled_call_raises_the_cancellation_it_was_given(servers: Servers) -> None:
    """Callers read why they were cancelled from the CancelledError (Airflow's triggerer
    cancels the jobs only on a user action's message). A unary call in flight (here one
    waiting for a server that is down) and a wait on the event stream both keep it."""
    address = servers.address
    async with AsyncArmadaClient(servers.address, timeout=5) as c:
        await c.create_queue(queue("q"))
        [job] = await c.submit_jobs("q", "s", [job_item(pod())])
        waiting = asyncio.create_task(c.wait_for_jobs("q", "s", [job]))
        for _ in range(500):
            if watchers(servers) == 1:
                break
            await asyncio.sleep(0.01)
        waiting.cancel("user action")
        with pytest.raises(asyncio.CancelledError) as stream_cancelled:
            await waiting
        assert stream_cancelled.value.args == ("user action",)
    servers.stop()
    async with AsyncArmadaClient(address, timeout=30, wait_for_ready=True) as c:
        calling = asyncio.create_task(c.get_job_status([job]))
        await asyncio.sleep(0.3)
        assert not calling.done()
        calling.cancel("user action")
        with pytest.raises(asyncio.CancelledError) as call_cancelled:
            await calling
        assert call_cancelled.value.args == ("user action",)


def test_follow_gives_up_after_max_failures(servers: Servers) -> None:
    address = servers.address
    servers.stop()
    with ArmadaClient(address, timeout=2) as c:
        options = WatchOptions(max_failures=2, reconnect_delay=0.01)
        notices: list[Notice] = []
        from armada_core.client import Unavailable

        with pytest.raises(Unavailable):
            list(c.follow_events("q", "s", options=options, on_notice=notices.append))
        assert [n.kind for n in notices] == ["reconnecting"]
