"""Failure texts an executor reports are cleaned before they are stored.

A NUL in a termination message made PostgreSQL refuse the executor's whole sync, so none of
its news was stored and the job hopped between executors; 100 KB of text would be repeated in
every event and error message. Both backends store the same cleaned, bounded text.
"""

from __future__ import annotations

import pytest

from armada_core.api import executor_pb2, job_pb2, submit_pb2
from armada_core.jobs.text import MAX_FAILURE_TEXT, TRUNCATED
from armada_server.app import EmbeddedServer

from .conftest import Stubs
from .test_scheduling_loop import Executor, low, state, submit


@pytest.fixture
def server(executorless_server: EmbeddedServer) -> EmbeddedServer:
    return executorless_server


def test_hostile_failure_text_is_cleaned_and_the_sync_succeeds(
    server: EmbeddedServer, api: Stubs, queue: str
) -> None:
    ex = Executor(api.channel)
    ex.sync()
    bad, other = submit(api, low(), low())
    ex.wait_leases(2)
    a, b = ex.lease_of(bad), ex.lease_of(other)
    hostile = "bad\x00input\x1b[31m " + "x" * 100_000
    ex.sync(
        ex.update(
            a,
            failed=executor_pb2.RunUpdate.Failed(
                reason="Err\x00or\x07" + "r" * 100_000,
                condition="Ev\x00icted",
                category="cat\x00",
                subcategory="sub\x01",
                containers=[
                    executor_pb2.ContainerResult(
                        name="main\x00", exit_code=3, message=hostile, reason="Error\x00"
                    )
                ],
            ),
        ),
        ex.update(b, succeeded=executor_pb2.RunUpdate.Succeeded()),
    )
    # The whole sync was stored: the other job's news too.
    assert state(api, bad) == submit_pb2.FAILED
    assert state(api, other) == submit_pb2.SUCCEEDED
    [job] = server.server.storage.job_reads.jobs([bad])
    run = job.latest_run
    assert run.reason.startswith("Error") and run.reason.endswith(TRUNCATED)
    assert len(run.reason) == MAX_FAILURE_TEXT
    assert (run.condition, run.category, run.subcategory) == ("Evicted", "cat", "sub")
    [container] = run.containers
    assert (container.name, container.reason) == ("main", "Error")
    assert container.message.startswith("badinput[31m xxx")
    assert len(container.message) == MAX_FAILURE_TEXT
    errors = api.jobs.GetJobErrors(job_pb2.JobErrorsRequest(job_ids=[bad])).job_errors
    assert "\x00" not in errors[bad] and len(errors[bad]) < 3 * MAX_FAILURE_TEXT
    # The executor goes on syncing, and new work is still handed out.
    [after] = submit(api, low(), job_set="after")
    ex.wait_leases(1)
    assert ex.lease_of(after)
