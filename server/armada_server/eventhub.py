"""Fans each job set's new events out to all its watchers from one read of the log.

Writers call `notify` from any thread after their transaction commits, and the PostgreSQL
listener does for other replicas' commits. The hub marks the watched job sets among them, and
its one reader reads the new events of every marked set in one statement, however many
watchers and sets there are: a set's events are decoded once, kept in memory (the newest
`keep` of each set) and every watcher of the set is woken to take them from there.

A watcher takes what it has not yet sent from that memory. One that is behind it (a client
starting from an old message id, or a slow client that fell more than `keep` events behind)
reads the log itself from its last id until it has caught up, so no event is ever lost and a
slow watcher holds up nobody: the hub never waits for a watcher.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import NamedTuple

from armada_core.api import event_pb2
from armada_core.api.wire import field, tag
from armada_server.storage.events import EventLog, StoredEvent

log = logging.getLogger("armada_server")

JobSetKey = tuple[str, str]
KEEP = 4096  # events kept per watched job set
READ_LIMIT = 10_000  # events per statement of one read
SWEEP_SECONDS = 30.0  # every watched set is read this often even without a notification


class Delivery(NamedTuple):
    """A stored event as every watcher sends it: `data` is its EventStreamMessage encoded,
    `created` its creation in seconds since the epoch (for the lag metric)."""

    seq: int
    data: bytes
    created: float


# The fields of an EventStreamMessage: its id, then the event as stored.
_ID = tag(event_pb2.EventStreamMessage, "id")
_MESSAGE = tag(event_pb2.EventStreamMessage, "message")


def delivery(stored: StoredEvent) -> Delivery:
    """A stored event as a watcher sends it, encoded once for all its watchers from the
    stored bytes (a thousand watchers of a set each serialised every event, job spec and
    all), and decoded once for its creation time."""
    message = event_pb2.EventMessage.FromString(stored.payload)
    kind = message.WhichOneof("events")
    if kind is None:
        raise ValueError(f"stored event {stored.seq} has no body")
    created = getattr(message, kind).created
    data = field(_ID, str(stored.seq).encode()) + field(_MESSAGE, stored.payload)
    return Delivery(stored.seq, data, created.seconds + created.nanos / 1e9)


class Feed:
    """What the hub holds of one watched job set: every event numbered after `base` up to
    `tail`, in order (`tail` is None until the set's newest number has been read)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.base = 0
        self.tail: int | None = None
        self.seqs: list[int] = []
        self.events: list[Delivery] = []
        self.waiters: set[asyncio.Event] = set()

    def start(self, last: int) -> None:
        self.base = self.tail = last

    def add(self, events: list[Delivery]) -> None:
        for event in events:
            self.seqs.append(event.seq)
            self.events.append(event)
        if events:
            self.tail = events[-1].seq
        if len(self.events) > 2 * self.keep:  # trimmed in steps: appending stays O(1)
            drop = len(self.events) - self.keep
            self.base = self.seqs[drop - 1]
            del self.seqs[:drop], self.events[:drop]

    def since(self, after: int, limit: int) -> list[Delivery] | None:
        """Up to `limit` events after `after`; None when memory does not reach back to it."""
        if self.tail is None or after < self.base:
            return None
        start = bisect.bisect_right(self.seqs, after)
        return self.events[start : start + limit]


class Watcher:
    """One stream's hold on a feed: `woken` is set whenever the feed gets new events."""

    def __init__(self, hub: EventHub, feed: Feed) -> None:
        self.hub = hub
        self.feed = feed
        self.woken = asyncio.Event()

    async def newest(self) -> int:
        """The newest message number of the set as the hub has read it (0: no events yet).
        A set new to the hub waits for its first read, which subscribing started: watchers
        that start together share that read instead of each reading the log."""
        while self.feed.tail is None:
            self.woken.clear()
            await self.woken.wait()
        return self.feed.tail

    def since(self, after: int, limit: int) -> list[Delivery] | None:
        """As Feed.since; a None counts in the hub's `behind`."""
        found = self.feed.since(after, limit)
        if found is None and self.feed.tail is not None:
            self.hub.behind += 1
        return found


class EventHub:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        keep: int | None = None,
        sweep_seconds: float = SWEEP_SECONDS,
    ) -> None:
        self._loop = loop
        self._keep = KEEP if keep is None else keep
        self._sweep_seconds = sweep_seconds
        self._log: EventLog | None = None
        self._feeds: dict[JobSetKey, Feed] = {}
        self._dirty: set[JobSetKey] = set()
        self._reader: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # Its own thread: reads never queue behind the RPCs' storage work.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="armada-events")
        # For tests and benchmarks: the hub's reads of the log, and the times a watcher asked
        # for events older than the hub keeps (and read the log itself).
        self.reads = 0
        self.behind = 0
        # Called on the loop with the job sets of each notification that names them (the web
        # UI's live feed): one wake-up of the loop per commit serves both.
        self.listeners: list[Callable[[tuple[JobSetKey, ...]], None]] = []

    def open(self, events: EventLog) -> None:
        """Start reading `events` for watchers (on the hub's loop)."""
        self._log = events
        self._sweeper = self._loop.create_task(self._sweep())
        self._kick()

    def close(self) -> None:
        for task in (self._reader, self._sweeper):
            if task is not None:
                task.cancel()
        self._thread.shutdown(wait=False)

    def reading(self) -> bool:
        """Whether a read is due or under way (for tests and benchmarks)."""
        return bool(self._dirty) or (self._reader is not None and not self._reader.done())

    def watchers(self) -> int:
        """Open subscriptions (for tests and benchmarks)."""
        return sum(len(feed.waiters) for feed in list(self._feeds.values()))

    def notify(self, keys: Iterable[JobSetKey] | None) -> None:
        """Thread-safe: these job sets (None: every set) got new events."""
        marked = None if keys is None else list(keys)
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._mark, marked)

    @contextmanager
    def subscribe(self, key: JobSetKey) -> Iterator[Watcher]:
        """A watcher of the job set, for as long as the context lasts."""
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = Feed(self._keep)
            self._dirty.add(key)
            self._kick()
        watcher = Watcher(self, feed)
        feed.waiters.add(watcher.woken)
        try:
            yield watcher
        finally:
            feed.waiters.discard(watcher.woken)
            if not feed.waiters and self._feeds.get(key) is feed:
                del self._feeds[key]
                self._dirty.discard(key)

    def _mark(self, keys: list[JobSetKey] | None) -> None:
        if keys is not None and self.listeners:
            named = tuple(keys)
            for listener in self.listeners:
                listener(named)
        feeds = self._feeds
        self._dirty.update(feeds if keys is None else (k for k in keys if k in feeds))
        self._kick()

    def _kick(self) -> None:
        if self._dirty and self._log is not None and (self._reader is None or self._reader.done()):
            self._reader = self._loop.create_task(self._read())

    async def _read(self) -> None:
        """Read until no watched set is marked: one read per round, whatever was marked."""
        while self._dirty and self._log is not None:
            marked, self._dirty = self._dirty, set()
            feeds = {key: self._feeds[key] for key in marked if key in self._feeds}
            try:
                found = await self._loop.run_in_executor(self._thread, self._fetch, feeds)
            except Exception as e:  # the database is away: try again, nothing is lost
                log.warning("reading new events for watchers failed (%s); retrying", e)
                self._dirty |= marked
                await asyncio.sleep(1.0)
                continue
            self.reads += 1
            for key, (feed, last, events, more) in found.items():
                if self._feeds.get(key) is not feed:
                    continue  # its last watcher left meanwhile
                if feed.tail is None:
                    feed.start(last)
                feed.add(events)
                if more:
                    self._dirty.add(key)
                for waiter in feed.waiters:
                    waiter.set()

    def _fetch(
        self, feeds: dict[JobSetKey, Feed]
    ) -> dict[JobSetKey, tuple[Feed, int, list[Delivery], bool]]:
        """On the hub's thread: the new events of every set (a new set's newest number)."""
        assert self._log is not None
        new = [key for key, feed in feeds.items() if feed.tail is None]
        lasts = self._log.last_seqs(new) if new else {}
        cursors = [
            (key, feed.tail if feed.tail is not None else lasts[key]) for key, feed in feeds.items()
        ]
        found = self._log.events_after_many(cursors, READ_LIMIT) if cursors else {}
        return {
            key: (
                feeds[key],
                after,
                [delivery(e) for e in found[key].events],
                found[key].more,
            )
            for key, after in cursors
        }

    async def _sweep(self) -> None:
        """A safety net under notifications (a listener reconnecting may miss some)."""
        while True:
            await asyncio.sleep(self._sweep_seconds)
            self._mark(None)
