"""The event fold behind wait_for_jobs, on the events the real job lifecycle emits."""

from __future__ import annotations

from armada_core.api import event_pb2, submit_pb2
from armada_core.client import JobTracker
from armada_core.jobs import ContainerResult, Failure, lifecycle
from armada_core.retry import Outcome, map_outcome

from ..jobs.factories import T0, at


class Log:
    """Events of several jobs in one job set, numbered like a server's message ids."""

    def __init__(self) -> None:
        self.messages: list[event_pb2.EventStreamMessage] = []

    def add(self, transition: lifecycle.Transition):  # type: ignore[no-untyped-def]
        job, events = transition
        for e in events:
            self.messages.append(
                event_pb2.EventStreamMessage(id=str(len(self.messages) + 1), message=e)
            )
        return job


def new_job(job_id: str) -> submit_pb2.Job:
    return submit_pb2.Job(id=job_id, queue="q", job_set_id="s")


def run(log: Log, job_id: str, node: str = "node-1"):  # type: ignore[no-untyped-def]
    job = log.add(lifecycle.submit(new_job(job_id), T0))
    job = log.add(
        lifecycle.lease(
            job, run_id=f"{job_id}-run", cluster_id="c1", node=node, pool="default", now=at(1)
        )
    )
    job = log.add(lifecycle.mark_pending(job, now=at(2)))
    return log.add(lifecycle.mark_running(job, now=at(3)))


def test_ends_of_every_kind() -> None:
    log = Log()
    ok = run(log, "ok")
    log.add(lifecycle.succeed(ok, now=at(4)))
    # Fails once, is retried by the server, then fails for good.
    flaky = run(log, "flaky")
    oom = Failure(
        reason="OOM",
        condition="OOMKilled",
        category="oom",
        containers=(ContainerResult("main", 137, "out of memory", "OOMKilled"),),
    )
    flaky = log.add(lifecycle.fail(flaky, oom, retry=True, now=at(5)))
    flaky = log.add(
        lifecycle.lease(
            flaky, run_id="flaky-run-2", cluster_id="c1", node="node-2", pool="default", now=at(6)
        )
    )
    flaky = log.add(lifecycle.mark_running(flaky, now=at(7)))
    user = Failure(
        reason="bad input",
        category="user",
        containers=(ContainerResult("main", 2, "no such file"),),
    )
    log.add(lifecycle.fail(flaky, user, retry=False, now=at(8)))
    # Preempted, rejected, cancelled.
    victim = run(log, "victim")
    log.add(lifecycle.preempt(victim, reason="higher priority", now=at(9)))
    bad = log.add(lifecycle.submit(new_job("bad"), T0))
    log.add(lifecycle.reject(bad, reason="gang cannot fit", now=at(9)))
    gone = log.add(lifecycle.submit(new_job("gone"), T0))
    gone = log.add(lifecycle.request_cancel(gone, requestor="me", reason="oops", now=at(9)))
    log.add(lifecycle.cancel(gone, requestor="me", reason="oops", now=at(9)))

    tracker = JobTracker(["ok", "flaky", "victim", "bad", "gone"])
    waiting_seen = False
    for message in log.messages:
        tracker.apply(message)
        if tracker.jobs["flaky"].retryable_failures and not tracker.jobs["flaky"].terminal:
            waiting_seen = True
    assert tracker.done() and waiting_seen
    assert tracker.last_message_id == str(len(log.messages))
    r = tracker.jobs
    assert (r["ok"].state_name, r["ok"].run_id, r["ok"].node) == ("SUCCEEDED", "ok-run", "node-1")
    flaky_result = r["flaky"]
    assert flaky_result.state == submit_pb2.FAILED
    assert (flaky_result.run_id, flaky_result.node) == ("flaky-run-2", "node-2")
    assert flaky_result.exit_codes == {"main": 2}
    assert flaky_result.termination_messages == {"main": "no such file"}
    assert (flaky_result.failure_reason, flaky_result.failure_category) == ("bad input", "user")
    [retried] = flaky_result.retryable_failures
    assert retried.containers[0].exit_code == 137 and retried.category == "oom"
    assert map_outcome(flaky_result.job_end()).outcome is Outcome.USER_ERROR
    assert r["victim"].state_name == "PREEMPTED" and r["victim"].condition == "Preempted"
    assert map_outcome(r["victim"].job_end()).outcome is Outcome.INFRASTRUCTURE_FAILURE
    assert r["bad"].state_name == "REJECTED" and r["bad"].failure_reason == "gang cannot fit"
    assert map_outcome(r["bad"].job_end()).outcome is Outcome.REJECTED
    assert r["gone"].state_name == "CANCELLED" and r["gone"].cancel_reason == "oops"


def test_untracked_jobs_heartbeats_and_every_job_mode() -> None:
    log = Log()
    run(log, "a")
    run(log, "b")
    only_a = JobTracker(["a"])
    heartbeat = event_pb2.EventStreamMessage(id="99")
    for message in [*log.messages, heartbeat]:
        only_a.apply(message)
    assert set(only_a.jobs) == {"a"} and only_a.last_message_id == "99"
    assert only_a.jobs["a"].state_name == "RUNNING" and not only_a.done()
    everyone = JobTracker()
    for message in log.messages:
        everyone.apply(message)
    assert everyone.counts() == {"RUNNING": 2}
    # Polling saw the end first; later events add details but do not undo it.
    assert [
        r.job_id
        for r in everyone.apply_status({"a": submit_pb2.SUCCEEDED, "b": submit_pb2.RUNNING})
    ] == ["a"]
    assert everyone.jobs["a"].source == "status" and everyone.from_status() == ["a"]
    everyone.apply(log.messages[0])
    assert everyone.jobs["a"].state == submit_pb2.SUCCEEDED
