"""A cycle that one job cannot stop: the scheduler's failure is traced to the job that
causes it (by running the pure scheduler on parts of the snapshot), which is left out."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from armada_core import scheduling as s
from armada_server.scheduling.isolation import schedule_isolating

from ..scheduling.helpers import PRIORITY_CLASSES, gang, job, jobs, node, running


def snapshot(*job_lists: list[s.Job]) -> s.Snapshot:
    return s.Snapshot(
        queues=(s.Queue("A", 1.0), s.Queue("B", 1.0)),
        priority_classes=PRIORITY_CLASSES,
        nodes=(node("n1", cpu=8), node("n2", cpu=8)),
        jobs=tuple(j for js in job_lists for j in js),
    )


def poisoned(*bad: str, always: bool = False):  # type: ignore[no-untyped-def]
    """The real scheduler, failing whenever one of `bad` is in its snapshot."""

    def scheduler(snap: s.Snapshot) -> s.SchedulingResult:
        present = {j.id for j in snap.jobs}
        if always or present & set(bad):
            raise ValueError(f"cannot handle {sorted(present & set(bad))}")
        return s.schedule(snap)

    return scheduler


def ids(result: s.SchedulingResult) -> Collection[str]:
    return set(result.scheduled)


@pytest.mark.parametrize(
    ("bad", "left_out"),
    [
        ((), set()),
        (("a3",), {"a3"}),
        (("a0",), {"a0"}),
        (("a9",), {"a9"}),
        (("a2", "b1"), {"a2", "b1"}),
        (("g1",), {"g0", "g1", "g2"}),  # a gang is left out whole
    ],
)
def test_the_jobs_the_scheduler_fails_on_are_left_out(bad, left_out) -> None:
    snap = snapshot(jobs("a", 10, "A"), jobs("b", 3, "B"), gang("g", 3, "B"))
    result, broken = schedule_isolating(snap, poisoned(*bad))
    assert set(broken) == left_out
    assert all("ValueError: cannot handle" in reason for reason in broken.values())
    expected = s.schedule(snapshot(*[[j for j in snap.jobs if j.id not in left_out]]))
    assert ids(result) == ids(expected) and not ids(result) & left_out


def test_a_failure_that_follows_no_job_is_raised() -> None:
    with pytest.raises(ValueError):
        schedule_isolating(snapshot(jobs("a", 4)), poisoned(always=True))


def test_a_running_job_is_never_left_out() -> None:
    snap = snapshot(running([job("r0")], "n1"), jobs("a", 3))
    with pytest.raises(ValueError):
        schedule_isolating(snap, poisoned("r0"))
