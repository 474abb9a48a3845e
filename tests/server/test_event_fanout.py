"""Event fan-out: one read of the log per batch of new events serves every watcher, on SQLite
and PostgreSQL; watchers resume from any message id; a slow watcher holds up nobody."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from armada_core.api import event_pb2, event_pb2_grpc, submit_pb2, submit_pb2_grpc
from armada_server import eventhub
from armada_server.app import EmbeddedServer
from armada_server.eventhub import Delivery, EventHub, Feed, delivery
from armada_server.storage import open_storage
from armada_server.storage.events import StoredEvent

from ..jobs.factories import item


def event(queue: str, job_set: str, job_id: str) -> event_pb2.EventMessage:
    created = Timestamp(seconds=1_800_000_000)
    return event_pb2.EventMessage(
        submitted=event_pb2.JobSubmittedEvent(
            queue=queue, job_set_id=job_set, job_id=job_id, created=created
        )
    )


def job_ids(deliveries: Iterable[Delivery]) -> list[str]:
    return [
        event_pb2.EventStreamMessage.FromString(d.data).message.submitted.job_id for d in deliveries
    ]


async def settle(hub: EventHub) -> None:
    """Until the hub has read everything it was told of."""
    for _ in range(10_000):
        await asyncio.sleep(0.001)
        if not hub.reading():
            return
    raise AssertionError("the hub never finished reading")


async def hub_reads_per_commit(database_url: str, sets: list[str], watchers: int) -> None:
    """`watchers` watchers spread over `sets`; two commits, each appending to every set."""
    loop = asyncio.get_running_loop()
    hub = EventHub(loop, sweep_seconds=3600)
    storage = open_storage(database_url, on_commit=hub.notify)
    hub.open(storage.events)
    tx = storage.transactions
    try:
        with tx.write() as (conn, touched):  # history from before the watchers
            tx.append(conn, touched, [event("q", s, f"old-{s}") for s in sets])
        subscriptions = [hub.subscribe(("q", sets[i % len(sets)])) for i in range(watchers)]
        held = [s.__enter__() for s in subscriptions]
        await settle(hub)
        for round in range(2):
            before = hub.reads
            with tx.write() as (conn, touched):
                tx.append(
                    conn, touched, [event("q", s, f"{round}-{s}-{k}") for s in sets for k in (0, 1)]
                )
            await settle(hub)
            assert hub.reads == before + 1  # one read, whatever the number of watchers
        for i, watcher in enumerate(held):
            s = sets[i % len(sets)]
            assert watcher.since(0, 100) is None  # memory starts after the history
            got = watcher.since(1, 100)
            assert got is not None
            assert [d.seq for d in got] == [2, 3, 4, 5]
            assert job_ids(got) == [f"0-{s}-0", f"0-{s}-1", f"1-{s}-0", f"1-{s}-1"]
            assert job_ids(watcher.since(3, 100) or []) == [f"1-{s}-0", f"1-{s}-1"]  # mid-batch
        for subscription in subscriptions:
            subscription.__exit__(None, None, None)
    finally:
        hub.close()
        storage.engine.dispose()


def test_one_read_serves_watchers_over_many_sets(database_url: str) -> None:
    asyncio.run(hub_reads_per_commit(database_url, [f"set-{i}" for i in range(1000)], 1000))


def test_one_read_serves_many_watchers_of_one_set(database_url: str) -> None:
    asyncio.run(hub_reads_per_commit(database_url, ["one"], 1000))


def test_reads_over_many_sets_return_a_prefix_of_each_and_say_when_cut(database_url: str) -> None:
    storage = open_storage(database_url)
    tx = storage.transactions
    with tx.write() as (conn, touched):
        tx.append(
            conn, touched, [event("q", s, f"{s}-{k}") for s in ("a", "b", "c") for k in range(3)]
        )
    cursors = [(("q", "a"), 1), (("q", "b"), 0), (("q", "c"), 0), (("q", "none"), 0)]
    whole = storage.events.events_after_many(cursors, limit=100)
    assert {k: [e.seq for e in v.events] for k, v in whole.items()} == {
        ("q", "a"): [2, 3],
        ("q", "b"): [1, 2, 3],
        ("q", "c"): [1, 2, 3],
        ("q", "none"): [],
    }
    assert not any(v.more for v in whole.values())
    cut = storage.events.events_after_many(cursors, limit=4)
    assert [e.seq for e in cut[("q", "a")].events] == [2, 3]
    assert [e.seq for e in cut[("q", "b")].events] == [1, 2]
    assert cut[("q", "c")].events == [] and all(v.more for v in cut.values())
    assert storage.events.last_seqs([("q", "a"), ("q", "none")]) == {
        ("q", "a"): 3,
        ("q", "none"): 0,
    }
    storage.engine.dispose()


def test_a_feed_keeps_the_newest_events_and_sends_older_ids_to_the_log() -> None:
    feed = Feed(keep=10)
    feed.start(5)
    stored = [
        StoredEvent(seq, event("q", "s", f"j{seq}").SerializeToString()) for seq in range(6, 36)
    ]
    for start in range(0, 30, 3):
        feed.add([delivery(e) for e in stored[start : start + 3]])
    assert feed.tail == 35 and len(feed.events) <= 20
    assert feed.since(feed.base - 1, 100) is None  # too far behind: read the log
    assert job_ids(feed.since(33, 100) or []) == ["j34", "j35"]
    assert job_ids(feed.since(feed.base, 2) or []) == [f"j{feed.base + 1}", f"j{feed.base + 2}"]
    assert feed.since(35, 100) == []


# --- over gRPC ------------------------------------------------------------------------------


def submit(address: str, job_set: str, count: int = 1, **fields: object) -> None:
    with grpc.insecure_channel(address) as channel:
        submit_pb2_grpc.SubmitStub(channel).SubmitJobs(
            submit_pb2.JobSubmitRequest(
                queue="q",
                job_set_id=job_set,
                job_request_items=[item(**fields) for _ in range(count)],
            ),
            timeout=120,
        )


async def watch_all(
    address: str, wanted: dict[str, int], after: dict[str, str], submitter: threading.Thread
) -> dict[str, list[list[int]]]:
    """Every watcher (a job set per watcher, `after` its from_message_id) until it has seen
    `wanted[job set]` as its last id; the message ids each watcher received."""
    channel = grpc.aio.insecure_channel(address)
    stub = event_pb2_grpc.EventStub(channel)
    started = asyncio.Event()
    subscribed = 0

    async def one(key: str) -> list[int]:
        nonlocal subscribed
        job_set = key.split("#")[0]
        stream = stub.GetJobSetEvents(
            event_pb2.JobSetRequest(
                queue="q", id=job_set, watch=True, from_message_id=after.get(key, "")
            ),
            timeout=120,
        )
        subscribed += 1
        if subscribed == len(keys):
            started.set()
        ids = []
        async for message in stream:
            ids.append(int(message.id))
            if ids[-1] >= wanted[job_set]:
                stream.cancel()
                break
        return ids

    keys = list(after)
    tasks = [asyncio.create_task(one(k)) for k in keys]
    await started.wait()
    await asyncio.sleep(0.5)  # the streams reach the server; a late one still reads the log
    submitter.start()
    results = await asyncio.gather(*tasks)
    submitter.join()
    await channel.close()
    by_set: dict[str, list[list[int]]] = {}
    for key, ids in zip(keys, results, strict=True):
        by_set.setdefault(key.split("#")[0], []).append(ids)
    return by_set


@pytest.fixture
def two_servers(database_url: str):  # type: ignore[no-untyped-def]
    """Two replicas on PostgreSQL; on SQLite, one server standing for both."""
    with EmbeddedServer(database_url=database_url, heartbeat_seconds=120) as a:
        with grpc.insecure_channel(a.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        if database_url.startswith("sqlite"):
            yield a, a
            return
        with EmbeddedServer(database_url=database_url, heartbeat_seconds=120) as b:
            yield a, b


def test_many_watchers_get_every_event_once_in_order(two_servers) -> None:  # type: ignore[no-untyped-def]
    """40 watchers of one set and 40 watchers of 40 sets, on replica B, while replica A (on
    PostgreSQL another server of the same database) appends events in batches."""
    a, b = two_servers
    sets = [f"s{i}" for i in range(40)]
    after = {f"one#{w}": "" for w in range(40)} | {s: "" for s in sets}

    def appends() -> None:
        for _ in range(3):
            submit(a.address, "one", 5)
            for s in sets:
                submit(a.address, s, 2)

    by_set = asyncio.run(
        watch_all(
            b.address,
            {"one": 30} | dict.fromkeys(sets, 12),
            after,
            threading.Thread(target=appends),
        )
    )
    assert by_set["one"] == [list(range(1, 31))] * 40
    for s in sets:
        assert by_set[s] == [list(range(1, 13))]


def test_watchers_resume_from_an_id_in_the_middle_of_a_batch(two_servers) -> None:  # type: ignore[no-untyped-def]
    """A batch of 20 events (10 jobs, one commit); watchers resume from ids inside it, both
    from the log (the batch is history) and from the hub's memory (read for a watcher that
    was there when it was appended), then get what follows."""
    a, b = two_servers
    submit(a.address, "history", 10)  # ids 1-20, one commit
    after = {"history#7": "7", "history#0": "", "live#first": "", "live#13": "13", "live#20": "20"}

    def appends() -> None:
        submit(a.address, "live", 10)  # ids 1-20 of "live", read by the hub for live#first
        submit(a.address, "history", 1)  # 21, 22
        submit(a.address, "live", 1)  # 21, 22

    by_set = asyncio.run(
        watch_all(b.address, {"history": 22, "live": 22}, after, threading.Thread(target=appends))
    )
    history_from_7, history_all = by_set["history"]
    assert history_from_7 == list(range(8, 23)) and history_all == list(range(1, 23))
    live_first, live_13, live_20 = by_set["live"]
    assert live_first == list(range(1, 23))
    assert live_13 == list(range(14, 23)) and live_20 == [21, 22]
    with grpc.insecure_channel(b.address) as channel:
        stored = event_pb2_grpc.EventStub(channel).GetJobSetEvents(
            event_pb2.JobSetRequest(queue="q", id="live", from_message_id="13"), timeout=60
        )
        assert [int(m.id) for m in stored] == list(range(14, 23))


def read_until(stream, last: int, into: list[int]) -> None:  # type: ignore[no-untyped-def]
    for message in stream:
        into.append(int(message.id))
        if into[-1] >= last:
            return


def test_a_slow_watcher_holds_up_nobody_and_loses_nothing(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher that stops reading while its set gets far more than gRPC buffers and the hub
    keeps (20 events here; large events fill gRPC's buffers) delays no watcher of its set or of
    another; when it reads again it gets every event once, in order, those the hub no longer
    keeps from the log."""
    monkeypatch.setattr(eventhub, "KEEP", 20)
    big = {"note": "x" * 100_000}  # every event carries its job, annotations and all
    batches, per_batch = 20, 20
    total = 1 + 2 * batches * per_batch
    with EmbeddedServer(database_url=database_url, heartbeat_seconds=120) as server:
        hub = server.server.hub
        assert hub is not None
        with grpc.insecure_channel(server.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        submit(server.address, "busy")
        channels = [grpc.insecure_channel(server.address) for _ in range(3)]
        try:
            slow, fast, other = (
                event_pb2_grpc.EventStub(c).GetJobSetEvents(
                    event_pb2.JobSetRequest(queue="q", id=job_set, watch=True), timeout=300
                )
                for c, job_set in zip(channels, ["busy", "busy", "quiet"], strict=True)
            )
            slow_ids = [int(next(slow).id)]  # then it stops reading
            fast_ids: list[int] = []
            other_ids: list[int] = []
            readers = [
                threading.Thread(target=read_until, args=(fast, total, fast_ids)),
                threading.Thread(target=read_until, args=(other, 2, other_ids)),
            ]
            for reader in readers:
                reader.start()
            for _ in range(batches):
                submit(server.address, "busy", per_batch, annotations=big)
            submit(server.address, "quiet")
            for reader in readers:
                reader.join(240)
            assert fast_ids == list(range(1, total + 1))
            assert other_ids == [1, 2]
            behind = hub.behind
            read_until(slow, total, slow_ids)
            assert slow_ids == list(range(1, total + 1))
            assert hub.behind > behind  # it did fall behind what the hub keeps
        finally:
            for c in channels:
                c.close()


def test_watchers_starting_together_share_the_hubs_read(database_url: str) -> None:
    """300 watchers of a set without events and 300 of a set with history start at once: the
    first take where the set stands from the hub's one read, not each from the log; the
    others read the history, which the hub does not hold, and then share the hub's reads."""
    with EmbeddedServer(database_url=database_url, heartbeat_seconds=120) as server:
        with grpc.insecure_channel(server.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        submit(server.address, "old")
        log = server.server.context.events
        reads: dict[tuple[str, str], int] = {}
        for name in ("last_seq", "events_after"):
            real = getattr(log, name)

            def counted(queue: str, job_set: str, *args: object, _real=real, _name=name):  # type: ignore[no-untyped-def]
                reads[(_name, job_set)] = reads.get((_name, job_set), 0) + 1
                return _real(queue, job_set, *args)

            setattr(log, name, counted)
        after = {f"new#{w}": "" for w in range(300)} | {f"old#{w}": "" for w in range(300)}
        hub = server.server.context.hub

        def appends() -> None:
            # Once every watcher is in and the hub has read where both sets stand: events
            # committed before that are history to a watcher, which it reads from the log.
            for _ in range(6000):
                if hub.watchers() == len(after) and not hub.reading():
                    break
                time.sleep(0.01)
            submit(server.address, "new")
            submit(server.address, "old")

        by_set = asyncio.run(
            watch_all(server.address, {"new": 2, "old": 4}, after, threading.Thread(target=appends))
        )
    assert by_set["new"] == [[1, 2]] * 300
    assert by_set["old"] == [[1, 2, 3, 4]] * 300
    assert not [key for key in reads if key[1] == "new"]
    assert reads.get(("events_after", "old"), 0) >= 300  # history: each its own


def test_a_watch_that_needs_its_set_sees_events_the_hub_has_not_read(database_url: str) -> None:
    """errorIfMissing on a watch: refused while the set has no events, even though the hub
    already holds the set for another watcher; then, with events the hub was not told of (a
    writer it does not hear: on SQLite nothing tells it), accepted and sent them."""
    with EmbeddedServer(database_url=database_url, heartbeat_seconds=120) as server:
        with grpc.insecure_channel(server.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        hub = server.server.context.hub

        async def run() -> None:
            channel = grpc.aio.insecure_channel(server.address)
            stub = event_pb2_grpc.EventStub(channel)
            holder = stub.GetJobSetEvents(event_pb2.JobSetRequest(queue="q", id="late", watch=True))
            for _ in range(1000):
                if hub.watchers() and not hub.reading():
                    break
                await asyncio.sleep(0.01)
            needs = event_pb2.JobSetRequest(queue="q", id="late", watch=True, errorIfMissing=True)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetJobSetEvents(needs).read()
            assert refused.value.code() == grpc.StatusCode.NOT_FOUND
            other = open_storage(database_url)
            try:
                with other.transactions.write() as (conn, touched):
                    other.transactions.append(conn, touched, [event("q", "late", "j1")])
            finally:
                other.engine.dispose()
            got = await asyncio.wait_for(stub.GetJobSetEvents(needs).read(), 10)  # sweep: 30 s
            assert got.id == "1" and got.message.submitted.job_id == "j1"
            holder.cancel()
            await channel.close()

        asyncio.run(run())


def test_a_delivery_is_the_stream_message_of_its_stored_event() -> None:
    """Encoded once from the stored bytes, it parses as the message a watcher would have
    built from them, and carries the event's creation for the lag metric."""
    event = event_pb2.EventMessage(
        submitted=event_pb2.JobSubmittedEvent(
            job_id="j1", job_set_id="s", queue="q", job=submit_pb2.Job(id="j1", priority=2)
        )
    )
    event.submitted.created.FromNanoseconds(1_764_000_000_250_000_000)
    sent = delivery(StoredEvent(300, event.SerializeToString()))
    assert sent.seq == 300 and sent.created == 1_764_000_000.25
    assert event_pb2.EventStreamMessage.FromString(sent.data) == event_pb2.EventStreamMessage(
        id="300", message=event
    )
    with pytest.raises(ValueError, match="no body"):
        delivery(StoredEvent(301, b""))


def test_the_web_feed_hears_what_the_hub_is_told_by_one_wake_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The web UI's live feed listens to the hub: a commit's job sets reach both with one
    wake-up of the loop, and so do other replicas' notifications; "every set" (a listener
    that reconnected) names none to the feed."""
    from armada_server.web.live import ChangeFeed

    async def run() -> None:
        loop = asyncio.get_running_loop()
        hub = EventHub(loop, sweep_seconds=3600)
        feed = ChangeFeed(loop)
        feed.attach(hub)
        storage = open_storage(f"sqlite:///{tmp_path / 'feed.db'}", on_commit=hub.notify)
        hub.open(storage.events)
        wakeups: list[object] = []
        real = loop.call_soon_threadsafe

        def counted(callback, *args):  # type: ignore[no-untyped-def]
            wakeups.append(callback)
            return real(callback, *args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        try:
            tx = storage.transactions

            def commit() -> None:
                with tx.write() as (conn, touched):
                    tx.append(conn, touched, [event("q", "a", "j1"), event("q", "b", "j2")])

            await loop.run_in_executor(None, commit)
            await settle(hub)
            ours = [w for w in wakeups if getattr(w, "__self__", None) in (hub, feed)]
            assert ours == [hub._mark]  # not one more for the feed
            assert feed.since(0) == {("q", "a"), ("q", "b")}
            await loop.run_in_executor(None, hub.notify, [("q", "c")])  # another replica's
            await loop.run_in_executor(None, hub.notify, None)
            await settle(hub)
            assert feed.since(1) == {("q", "c")} and feed.version == 2
        finally:
            loop.call_soon_threadsafe = real  # type: ignore[method-assign]
            hub.close()
            storage.engine.dispose()

    asyncio.run(run())
