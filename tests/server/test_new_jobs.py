"""A request's new jobs (storage/new_jobs.py) are made once per kind of item alike: the kinds
validation found are taken as they are, and give exactly the jobs that finding the kinds
again (by each item's serialisation without its client id) gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from armada_core.jobs.submission import CheckedItems, SubmissionConfig, validate_request
from armada_server.storage import new_jobs as module
from armada_server.storage.new_jobs import JobRows, new_jobs

from ..jobs.factories import container, item, request

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_kinds_validation_found_make_the_same_jobs(
    dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = {"containers": [container(cpu="2")]}
    items = [
        item(client_id="a"),
        item(client_id="b"),
        item(big, client_id="c"),
        item(client_id="a"),  # a repeated client id: the first item's job
        item(),
        item(big),
        item(client_id="d", priority=2.0),
    ]
    checked = validate_request(request(*items), SubmissionConfig())
    assert isinstance(checked, CheckedItems)
    assert checked.alike == [0, 0, 2, 0, 0, 2, 6]

    def made(given: list) -> tuple[dict, int]:
        built = 0
        alike = module.AlikeJobs

        def counted(*args: object, **kwargs: object) -> module.AlikeJobs:
            nonlocal built
            built += 1
            return alike(*args, **kwargs)

        ids = iter(f"id-{n}" for n in range(100))
        with monkeypatch.context() as patch:
            patch.setattr(module, "AlikeJobs", counted)
            patch.setattr(module, "new_job_ids", lambda n: [next(ids) for _ in range(n)])
            if isinstance(given, CheckedItems):  # the kinds are not found again
                patch.setattr(module, "without_client_id", None)
            jobs = new_jobs(given, "q", "set", "owner", (), NOW, JobRows(dialect))
        return jobs, built

    from_validation, kinds = made(checked)
    found_again, _ = made(list(checked))
    assert kinds == 3
    assert sorted(from_validation) == [0, 1, 2, 4, 5, 6]
    assert from_validation == found_again
