"""The room rule: an executor never starts a run on a node without room for it.

The server places a job by preempting another before the victim has stopped; the victim may
take its whole grace period to end. Every backend therefore counts, per node, the requests of
its live runs, including runs still terminating (a stop was requested but their processes or
pod have not ended yet), and holds a new lease (reported pending) until the node's allocatable
minus those requests fits it. Held leases start in the order they arrived, as soon as room
frees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from armada_core.api import executor_pb2
from armada_core.jobs.submission import job_requests
from armada_core.scheduling.model import parse_quantity

Requests = dict[str, int]


def quantities(values: Mapping[str, str]) -> Requests:
    """Kubernetes quantities as integers (CPU in thousandths); unparsable ones are skipped."""
    out: Requests = {}
    for name, text in values.items():
        try:
            out[name] = parse_quantity(text, milli=(name == "cpu"))
        except ValueError:
            continue
    return out


def lease_requests(lease: executor_pb2.Lease) -> Requests:
    """What the leased run needs from its node: the requests the scheduler placed it with."""
    job = lease.job
    requests = job.scheduling_resource_requirements.requests
    if requests:
        # Parsed once per distinct set: a sync brings thousands of leases of a few shapes.
        stored = tuple((name, requests[name].string) for name in requests)
        parsed = _PARSED.get(stored)
        if parsed is None:
            if len(_PARSED) >= 4096:
                _PARSED.clear()
            parsed = _PARSED[stored] = quantities(dict(stored))
        return dict(parsed)
    if job.pod_specs:
        try:
            return dict(job_requests(job.pod_specs[0]))
        except ValueError:
            return {}
    return {}


_PARSED: dict[tuple[tuple[str, str], ...], Requests] = {}


@dataclass
class _Node:
    allocatable: Requests
    used: Requests = field(default_factory=dict)
    runs: set[str] = field(default_factory=set)


class Room:
    """Per node: what it can hold, what the runs counted on it request, and the leases held
    for it in arrival order (a lease offered or a run released touches its node's leases
    only: an executor may hold thousands while preempted runs take their grace periods)."""

    def __init__(self, nodes: Sequence[executor_pb2.Node] = ()) -> None:
        self._nodes: dict[str, _Node] = {}
        self._claims: dict[str, tuple[str, Requests]] = {}  # run -> (node, requests)
        # node -> run -> (requests, start), in arrival order; run -> its node
        self._waiting: dict[str, dict[str, tuple[Requests, Callable[[], None]]]] = {}
        self._waiting_on: dict[str, str] = {}
        self.set_nodes(nodes)

    def set_nodes(self, nodes: Iterable[executor_pb2.Node]) -> None:
        """The nodes as last reported (allocatable may change); claims are kept."""
        fresh = {n.name: _Node(quantities(dict(n.allocatable))) for n in nodes}
        for run, (node, requests) in self._claims.items():
            if node in fresh:
                self._add(fresh[node], run, requests)
        self._nodes = fresh
        self.admit()

    @property
    def waiting(self) -> set[str]:
        """Runs whose lease is held for want of room."""
        return set(self._waiting_on)

    def counted(self, run_id: str) -> bool:
        return run_id in self._claims

    def offer(self, run_id: str, node: str, requests: Requests, start: Callable[[], None]) -> bool:
        """Start the run now (True: `start` was called) if its node has room and no earlier
        lease waits for that node; otherwise hold it until `admit` finds room."""
        self.withdraw(run_id, admit=False)  # offered again: it waits as a new arrival
        if node not in self._waiting and self._fits(node, requests):
            self.claim(run_id, node, requests)
            start()
            return True
        self._waiting.setdefault(node, {})[run_id] = (requests, start)
        self._waiting_on[run_id] = node
        return False

    def withdraw(self, run_id: str, *, admit: bool = True) -> bool:
        """Forget a held lease (it was stopped before it started); True if it was held. The
        leases behind it on its node start if they fit now."""
        node = self._waiting_on.pop(run_id, None)
        if node is None:
            return False
        held = self._waiting[node]
        del held[run_id]
        if not held:
            del self._waiting[node]
        elif admit:
            self._admit(node)
        return True

    def claim(self, run_id: str, node: str, requests: Requests) -> None:
        """Count a run on its node (one started, or adopted after a restart)."""
        if run_id in self._claims:
            return
        self._claims[run_id] = (node, requests)
        if node in self._nodes:
            self._add(self._nodes[node], run_id, requests)

    def release(self, run_id: str) -> None:
        """The run's processes (or pod) have ended: its node has that much more room."""
        claim = self._claims.pop(run_id, None)
        if claim is None:
            return
        node, requests = claim
        state = self._nodes.get(node)
        if state is not None and run_id in state.runs:
            state.runs.discard(run_id)
            for name, amount in requests.items():
                state.used[name] = state.used.get(name, 0) - amount
        self._admit(node)

    def admit(self) -> None:
        """Start held leases that fit now, in arrival order per node."""
        for node in list(self._waiting):
            self._admit(node)

    def _admit(self, node: str) -> None:
        """Start the node's held leases from the first, until one does not fit."""
        while held := self._waiting.get(node):  # read again: `start` may offer or release
            run_id, (requests, start) = next(iter(held.items()))
            if not self._fits(node, requests):
                return
            del held[run_id]
            del self._waiting_on[run_id]
            if not held:
                del self._waiting[node]
            self.claim(run_id, node, requests)
            start()

    def _fits(self, node: str, requests: Requests) -> bool:
        state = self._nodes.get(node)
        if state is None or not state.runs:
            # An unknown node is the backend's to refuse; a run too big for an empty node
            # would otherwise wait forever (the scheduler does not place such runs).
            return True
        used, allocatable = state.used, state.allocatable
        for name, amount in requests.items():
            if amount > 0 and used.get(name, 0) + amount > allocatable.get(name, 0):
                return False
        return True

    @staticmethod
    def _add(state: _Node, run_id: str, requests: Requests) -> None:
        state.runs.add(run_id)
        for name, amount in requests.items():
            state.used[name] = state.used.get(name, 0) + amount
