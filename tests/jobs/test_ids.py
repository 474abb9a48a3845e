"""Job ids sort by creation time, also within one millisecond."""

from __future__ import annotations

import uuid

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


def test_run_ids_are_uuids_of_version_7_that_increase(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(ids._RUN_IDS, "last_ms", -1)  # whatever ids other tests made before
    made = [*ids.new_run_ids(500, now_ms=1_700_000_000_000), ids.new_run_id(1_700_000_000_000)]
    made += ids.new_run_ids(3, now_ms=1_700_000_000_001) + ids.new_run_ids(0)
    assert made == sorted(made) and len(set(made)) == 504
    for run_id in made:
        parsed = uuid.UUID(run_id)
        assert (parsed.version, parsed.variant, str(parsed)) == (7, uuid.RFC_4122, run_id)
    assert uuid.UUID(made[0]).int >> 80 == 1_700_000_000_000  # the time, in milliseconds
    assert uuid.UUID(made[-1]).int >> 80 == 1_700_000_000_001
    later = ids.new_run_id(now_ms=1_000)  # a clock set back
    assert later > made[-1]


def test_run_ids_count_on_across_the_random_parts_halves(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The random part's upper 12 bits sit apart from its lower 62 (version and variant lie
    # between): the count carries from one to the other.
    monkeypatch.setattr(ids._RUN_IDS, "last_ms", 2_100_000_000_000)
    monkeypatch.setattr(ids._RUN_IDS, "last_random", (5 << 62) + (1 << 62) - 3)
    made = ids.new_run_ids(4, now_ms=2_100_000_000_000)
    assert made == sorted(made)
    values = [uuid.UUID(r).int for r in made]
    assert [(v >> 64) & 0xFFF for v in values] == [5, 5, 6, 6]
    assert [v & ((1 << 62) - 1) for v in values] == [(1 << 62) - 2, (1 << 62) - 1, 0, 1]


def _random_part(job_id: str) -> int:
    value = 0
    for ch in job_id[10:]:
        value = value * 32 + ids._ALPHABET.index(ch)
    return value


def test_ids_made_in_batches_follow_on_from_single_ones() -> None:
    made = [ids.new_job_id(now_ms=2_000_000_000_000)]
    made += ids.new_job_ids(500, now_ms=2_000_000_000_000)
    made += [ids.new_job_id(now_ms=2_000_000_000_000)]
    made += ids.new_job_ids(3, now_ms=2_000_000_000_001)
    made += ids.new_job_ids(0) + ids.new_job_ids(1, now_ms=2_000_000_000_001)
    assert made == sorted(made) and len(set(made)) == len(made) == 506
    assert all(ids.is_job_id(i) for i in made)
    same_ms = [_random_part(i) for i in made[:502]]
    assert same_ms == list(range(same_ms[0], same_ms[0] + 502))


def test_a_batch_across_the_random_parts_halves_counts_on(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Four ids below the lower half's end and four past it: the upper half carries.
    monkeypatch.setattr(ids._JOB_IDS, "last_ms", 2_100_000_000_000)
    monkeypatch.setattr(ids._JOB_IDS, "last_random", (7 << 40) + (1 << 40) - 5)
    made = ids.new_job_ids(8, now_ms=2_100_000_000_000)
    assert [_random_part(i) for i in made] == list(range((8 << 40) - 4, (8 << 40) + 4))
    assert made == sorted(made)
    assert ids.job_id_time_ms(made[0]) == 2_100_000_000_000
