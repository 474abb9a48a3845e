"""The scheduler's views of the running jobs, kept by the leader between cycles and patched by
the jobs that changed.

A busy cluster's thousands of running jobs are mostly the very rows and views of the last
cycle, and every walk over them (their nodes, their views, their serials) cost a cache miss
per job: about a sixth of a what-if simulator's later steps. What a cycle changes is a few
jobs, found by the leader's held jobs (storage/held_jobs.py) since a change number: the views
are kept with the number they follow, and patched only from it.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from armada_core import scheduling as s
from armada_server.storage.scheduling_reads import RunningJob

T = TypeVar("T")


def serials_of(views: list[s.Job]) -> NDArray[np.int64]:
    return np.fromiter(map(attrgetter("serial"), views), dtype=np.int64, count=len(views))


def in_pod_group(view: s.Job) -> bool:
    """Whether the job is a pod group's member (it names its role in a gang)."""
    return view.gang_role is not None and view.gang_id is not None


def pod_group_members(views: list[s.Job]) -> list[int]:
    """Positions of the pod group members (`in_pod_group`) among `views`, found in C (a
    backlog's million jobs are seldom members)."""
    roles = map(attrgetter("gang_role"), views)
    return [
        i
        for i in compress(range(len(views)), map(operator.is_not, roles, repeat(None)))
        if views[i].gang_id is not None
    ]


@dataclass
class RunningViews:
    """The last cycle's views of the running jobs on known nodes, in order of id, with their
    ids and serials; which of them are pod groups' members; the nodes known then; and the
    change number of the leader's held jobs they follow (None: nothing is kept)."""

    ids: list[str] = field(default_factory=list)
    views: list[s.Job] = field(default_factory=list)
    serials: NDArray[np.int64] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    members: set[str] = field(default_factory=set)  # of `ids`
    in_groups: set[str] = field(default_factory=set)  # of `ids`: pod groups' members
    nodes: AbstractSet[str] | None = None
    mark: int | None = None

    def clear(self) -> None:
        self.ids, self.views, self.members, self.in_groups = [], [], set(), set()
        self.serials = np.empty(0, dtype=np.int64)
        self.nodes = self.mark = None

    def keep(
        self,
        ids: list[str],
        views: list[s.Job],
        serials: NDArray[np.int64],
        in_groups: list[int],
        nodes: AbstractSet[str],
        mark: int,
    ) -> None:
        """Keep a cycle's views made from every running job (`in_groups`: positions)."""
        self.ids, self.views, self.serials = ids, views, serials
        self.members = set(ids)
        self.in_groups = {ids[i] for i in in_groups}
        self.nodes, self.mark = set(nodes), mark

    def follows(self, since: int | None, placements: Mapping[str, object]) -> bool:
        """Whether the views kept are those of the jobs held at change number `since`, on
        the same nodes: then patching them by what changed since makes this cycle's."""
        return since is not None and self.mark == since and self.nodes == placements.keys()

    def places(self, ids: Collection[str]) -> list[int]:
        """Where the jobs `ids` (of `members`) are, in order."""
        return sorted(bisect_left(self.ids, job_id) for job_id in ids)

    def patch(
        self,
        changed: Collection[str],
        by_id: Mapping[str, RunningJob],
        placements: Mapping[str, object],
        view_of: Callable[[RunningJob], s.Job | None],
        mark: int,
    ) -> None:
        """Renew, drop or add the views of the `changed` jobs, as running on known nodes now
        (`by_id`), made by `view_of` (None: the job cannot be read; it is left out, and the
        next cycle makes every view again). Then the views follow `mark`."""
        self.mark = None  # until patched whole
        ids, views, members, in_groups = self.ids, self.views, self.members, self.in_groups
        drop: list[int] = []
        add: dict[str, s.Job] = {}
        whole = True
        for job_id in changed:
            j = by_id.get(job_id)
            if j is not None and j.node not in placements:
                j = None
            if j is None and job_id not in members and job_id not in add:
                continue  # most changed jobs are queued ones
            view = None if j is None else j.view or view_of(j)
            if view is None:
                whole = whole and j is None  # else a job that cannot be read
                add.pop(job_id, None)
                if job_id in members:
                    drop.append(bisect_left(ids, job_id))
                    members.discard(job_id)
                in_groups.discard(job_id)
                continue
            object.__setattr__(j, "view", view)  # a running job's view is its row's alone
            (in_groups.add if in_pod_group(view) else in_groups.discard)(job_id)
            if job_id in members:
                at = bisect_left(ids, job_id)
                views[at], self.serials[at] = view, view.serial
            else:
                add[job_id] = view
        if drop or add:
            self._rebuild(sorted(drop), sorted(add.items()))
        if whole:
            self.mark = mark

    def _rebuild(self, drop: list[int], add: list[tuple[str, s.Job]]) -> None:
        """Without the jobs at `drop`, with those of `add` (in order of id) in their places.
        A few in place (each a move of the lists' pointers); more by copying each list once
        in slices (a cycle that leases 80,000 jobs adds as many), which touches every job's
        reference count: a walk over every job, as costly as the patch was to spare."""
        ids, views = self.ids, self.views
        serials = np.delete(self.serials, drop) if drop else self.serials
        if len(drop) + len(add) <= _IN_PLACE:
            for i in reversed(drop):
                del ids[i], views[i]
        else:
            ids, views = _without(ids, drop), _without(views, drop)
        if add:
            at = [bisect_left(ids, job_id) for job_id, _ in add]
            new = [view for _, view in add]
            serials = np.insert(serials, at, serials_of(new))
            if len(drop) + len(add) <= _IN_PLACE:
                for shift, (i, (job_id, view)) in enumerate(zip(at, add, strict=True)):
                    ids.insert(i + shift, job_id)
                    views.insert(i + shift, view)
            else:
                ids = _with(ids, at, [job_id for job_id, _ in add])
                views = _with(views, at, new)
            self.members.update(job_id for job_id, _ in add)
        self.ids, self.views, self.serials = ids, views, serials


# Up to how many jobs dropped and added the lists are changed in place: each move of a
# list's pointers costs a thousandth of a walk over its jobs.
_IN_PLACE = 64


def _without(items: list[T], drop: list[int]) -> list[T]:
    out: list[T] = []
    start = 0
    for i in drop:
        out += items[start:i]
        start = i + 1
    out += items[start:]
    return out


def _with(items: list[T], at: list[int], new: list[T]) -> list[T]:
    out: list[T] = []
    start = 0
    for i, item in zip(at, new, strict=True):
        out += items[start:i]
        out.append(item)
        start = i
    out += items[start:]
    return out
