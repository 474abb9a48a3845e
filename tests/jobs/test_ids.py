"""Job ids sort by creation time, also within one millisecond."""

from __future__ import annotations

from armada_core.jobs import ids


def test_ids_increase_within_a_millisecond_and_across() -> None:
    made = [ids.new_job_id(now_ms=1_700_000_000_000) for _ in range(1000)]
    made += [ids.new_job_id(now_ms=1_700_000_000_001) for _ in range(10)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(ids.is_job_id(i) for i in made)


def test_id_time_round_trips() -> None:
    assert ids.job_id_time_ms(ids.new_job_id(now_ms=1_800_000_000_123)) >= 1_800_000_000_123


def test_a_clock_going_back_never_makes_a_smaller_id() -> None:
    first = ids.new_job_id(now_ms=1_900_000_000_000)
    assert ids.new_job_id(now_ms=1_000) > first


def test_run_ids_are_uuids() -> None:
    run = ids.new_run_id()
    assert len(run) == 36 and run.count("-") == 4
