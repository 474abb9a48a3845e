"""What SubmitJobs refuses, and what it says of what it accepts: a queue that does not exist
(with the command that creates it), a cordoned queue (with the command that lifts the cordon),
and jobs that fit no node the executors report, even an empty one (upstream Armada refuses
them too), unless the server is told to accept them; and what PreemptJobs says of jobs it
cannot preempt.

The tests speak the executor protocol themselves (as test_scheduling_loop.py does), over
loopback gRPC to a real server on each database backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from armada_core.api import event_pb2, executor_pb2, executor_pb2_grpc, job_pb2, submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.scheduling import reasons
from armada_server.app import EmbeddedServer
from armada_server.config import ConfigError, ServerConfig, build
from armada_server.services import node_fit
from armada_server.storage.base import Transactions
from armada_server.storage.queues import Queues

from ..jobs.factories import container, item
from .conftest import Stubs
from .test_scheduling_config import stubs
from .test_scheduling_loop import CLASSES, Executor

SETTING_HINT = (
    " (the server setting accept_jobs_that_fit_no_node accepts such jobs, for a cluster that "
    "adds nodes)"
)


def config(database_url: str, *, accept: bool = False) -> ServerConfig:
    return ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.1,
        lease_timeout=30.0,
        priority_classes=CLASSES,
        default_priority_class="low",
        accept_jobs_that_fit_no_node=accept,
    )


@pytest.fixture
def server(database_url: str) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(config(database_url)) as running:
        yield running


def job(cpu: str = "1", *, pod: dict[str, object] | None = None, **kw: object):
    spec = {"containers": [container(cpu=cpu)], "priorityClassName": "low", **(pod or {})}
    return item(spec, **kw)


def member(gang: str, cardinality: int, cpu: str = "4", **annotations: str):
    return job(
        cpu,
        annotations={
            ann.GANG_ID: gang,
            ann.GANG_CARDINALITY: str(cardinality),
            **annotations,
        },
    )


def send(
    api: Stubs, *items: submit_pb2.JobSubmitRequestItem, queue: str = "q", job_set: str = "s"
) -> submit_pb2.JobSubmitResponse:
    response: submit_pb2.JobSubmitResponse = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(queue=queue, job_set_id=job_set, job_request_items=items)
    )
    return response


def refusal(api: Stubs, *items: submit_pb2.JobSubmitRequestItem, queue: str = "q") -> tuple:
    with pytest.raises(grpc.RpcError) as raised:
        send(api, *items, queue=queue)
    return raised.value.code(), raised.value.details()


def stored(api: Stubs, queue: str = "q", job_set: str = "s") -> list[str]:
    """The kinds of events of the job set (none: nothing of it was stored)."""
    stream = api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue=queue, id=job_set))
    return [m.message.WhichOneof("events") for m in stream]


def details(api: Stubs, job_id: str) -> job_pb2.JobDetails:
    found = api.jobs.GetJobDetails(job_pb2.JobDetailsRequest(job_ids=[job_id]))
    return found.job_details[job_id]


# --- the queue ---------------------------------------------------------------------------


def test_a_missing_queue_is_named_with_the_command_that_creates_it(api: Stubs) -> None:
    code, said = refusal(api, job(), queue="x")
    assert code == grpc.StatusCode.NOT_FOUND
    assert said == "queue 'x' not found; create it with: armada queue create x"


def test_the_queue_is_read_in_the_transaction_that_stores(
    api: Stubs, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission reads its queue (to authorise and to see a cordon) in its write
    transaction, not in a read of its own before: on PostgreSQL that read was four round trips
    of a request of one job."""

    def not_read(self: Queues, name: str) -> submit_pb2.Queue:
        raise AssertionError(f"queue {name!r} read outside the submission's transaction")

    monkeypatch.setattr(Queues, "get_queue", not_read)
    assert len(send(api, job(), job(client_id="c")).job_response_items) == 2
    assert refusal(api, job(), queue="x")[0] == grpc.StatusCode.NOT_FOUND


def test_a_cordoned_queue_refuses_new_jobs_and_says_how_to_lift_the_cordon(
    api: Stubs, queue: str
) -> None:
    [before] = send(api, job(client_id="once")).job_response_items
    api.queues.CordonQueue(submit_pb2.QueueCordonRequest(name="q"))
    code, said = refusal(api, job(), job(client_id="new"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert said == (
        "queue 'q' is cordoned: it takes no new jobs and its queued jobs are not scheduled "
        "(jobs already running go on); lift the cordon with: armada queue uncordon q"
    )
    assert stored(api) == ["submitted", "queued"]  # the first job's, nothing of the refused
    # A job already stored is named again by its client id: nothing new is stored.
    [again] = send(api, job(client_id="once")).job_response_items
    assert again.job_id == before.job_id
    api.queues.UncordonQueue(submit_pb2.QueueUncordonRequest(name="q"))
    assert len(send(api, job()).job_response_items) == 1


# --- jobs that fit no node ---------------------------------------------------------------


def test_with_no_executor_connected_jobs_are_accepted_and_the_response_says_so(
    api: Stubs, queue: str
) -> None:
    response = send(api, job("1000"))
    assert len(response.job_response_items) == 1
    assert list(response.notes) == [
        "no executor has connected yet, so whether the jobs fit a node could not be checked; "
        "they wait until one connects"
    ]


def test_with_no_executor_a_submission_reads_the_nodes_once_and_sees_one_that_joins(
    api: Stubs, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until an executor connects each submission reads the executors' nodes (one that
    connects is seen by the next submission), once: the read it made is the fresh one."""
    reads = 0
    read = node_fit.NodeFit._read

    def counted(self: node_fit.NodeFit) -> Any:
        nonlocal reads
        reads += 1
        return read(self)

    monkeypatch.setattr(node_fit.NodeFit, "_read", counted)
    for _ in range(3):
        assert len(send(api, job("1000")).job_response_items) == 1
    assert reads == 3
    Executor(api.channel, nodes=2, cpu="4", memory="16Gi").sync()
    code, _ = refusal(api, job("1000"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert reads == 4


def test_a_job_larger_than_every_node_is_refused_naming_the_largest(api: Stubs, queue: str) -> None:
    Executor(api.channel, nodes=2, cpu="4", memory="16Gi").sync()
    code, said = refusal(api, job(), job("1000"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert said == (
        "job_request_items[1]: requests cpu 1000 but no node can hold it "
        f"(largest matching node: cpu 4, memory 16Gi){SETTING_HINT}"
    )
    assert stored(api) == []
    big = job(pod={"containers": [container(cpu="2", memory="64Gi")]})
    assert refusal(api, big)[1].startswith(
        "job_request_items[0]: requests memory 64Gi but no node can hold it (largest matching "
        "node: cpu 4, memory 16Gi)"
    )
    response = send(api, job("4"))  # a whole node is fine
    assert len(response.job_response_items) == 1 and not response.notes


def tainted(channel: grpc.Channel, name: str, pool: str = "default", cpu: str = "64") -> None:
    """An executor of one large node that only jobs tolerating `dedicated=big` may use."""
    executor_pb2_grpc.ExecutorApiStub(channel).Sync(
        executor_pb2.SyncRequest(
            executor_id=name,
            pool=pool,
            nodes=[
                executor_pb2.Node(
                    name=f"{name}-n0",
                    allocatable={"cpu": cpu, "memory": "256Gi"},
                    labels={"size": "big"},
                    taints=[executor_pb2.Taint(key="dedicated", value="big", effect="NoSchedule")],
                )
            ],
        )
    )


def test_selectors_tolerations_and_pools_decide_which_nodes_count(api: Stubs, queue: str) -> None:
    Executor(api.channel, nodes=2, cpu="4", memory="16Gi").sync()
    tainted(api.channel, "big")
    tolerates = {"tolerations": [{"key": "dedicated", "value": "big", "effect": "NoSchedule"}]}
    # The large node holds a job that tolerates its taint, and only such a job.
    assert send(api, job("32", pod=tolerates)).job_response_items
    code, said = refusal(api, job("32"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "(largest matching node: cpu 4, memory 16Gi)" in said
    # A selector that only the small nodes match leaves the large one out.
    rack = {**tolerates, "nodeSelector": {"rack": "r0"}}
    assert "requests cpu 32 but" in refusal(api, job("32", pod=rack))[1]
    missing = {"nodeSelector": {"zone": "nowhere"}}
    assert refusal(api, job(pod=missing))[1] == (
        "job_request_items[0]: no node matches its node selector, affinity and tolerations"
        + SETTING_HINT
    )
    # A pool's nodes only: the large node is in pool default, not in pool small.
    tainted(api.channel, "small", pool="small", cpu="2")
    in_small = job("32", pod=tolerates, annotations={ann.POOL: "small"})
    assert refusal(api, in_small)[1].startswith(
        "job_request_items[0]: requests cpu 32 but no node can hold it (largest matching "
        "node: cpu 2, memory 256Gi)"
    )
    # A pool no executor serves yet: accepted, and said.
    response = send(api, job(annotations={ann.POOL: "gpu"}), job(annotations={ann.POOL: "gpu"}))
    assert list(response.notes) == [
        "no executor of pool 'gpu' has connected, so whether job_request_items[0] (and 1 more "
        "like it) fit a node could not be checked; they wait until one connects"
    ]


def test_a_gang_needs_room_for_its_members_at_once(api: Stubs, queue: str) -> None:
    Executor(api.channel, nodes=2, cpu="4", memory="16Gi").sync()
    # Two nodes hold two members of 4 CPUs, not three.
    assert send(api, *(member("pair", 2) for _ in range(2))).job_response_items
    code, said = refusal(api, *(member("three", 3) for _ in range(3)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert said == (
        "job_request_items[0]: gang 'three' needs 3 members requesting cpu 4, memory 1Gi each "
        "at once, but the nodes that can hold one hold at most 2 (largest matching node: cpu 4, "
        f"memory 16Gi){SETTING_HINT}"
    )
    # Placed down to two members, it fits.
    elastic = {ann.GANG_MINIMUM_CARDINALITY: "2"}
    assert send(api, *(member("elastic", 3, **elastic) for _ in range(3))).job_response_items
    # Members of a gang submitted apart: those in the request must fit with the others unknown.
    assert send(api, member("apart", 3)).job_response_items
    # Small members share nodes: four of 2 CPUs fit two nodes of 4, five do not.
    assert send(api, *(member("four", 4, cpu="2") for _ in range(4))).job_response_items
    assert "gang 'five'" in refusal(api, *(member("five", 5, cpu="2") for _ in range(5)))[1]


def test_a_pod_group_needs_room_for_each_roles_minimum(api: Stubs, queue: str) -> None:
    Executor(api.channel, nodes=2, cpu="4", memory="16Gi").sync()

    def role(name: str, minimum: int, cpu: str) -> submit_pb2.JobSubmitRequestItem:
        return member(
            "group", 4, cpu=cpu, **{ann.GANG_ROLE: name, ann.GANG_ROLE_MINIMUM: str(minimum)}
        )

    # A coordinator and workers: three workers of 4 CPUs at once cannot fit two nodes.
    code, said = refusal(api, role("lead", 1, "1"), *(role("worker", 3, "4") for _ in range(3)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert said.startswith("job_request_items[1]: gang 'group' needs 3 members requesting cpu 4")
    # Two workers at least: placeable (the third is elastic).
    group = [role("lead", 1, "1"), *(role("worker", 2, "2") for _ in range(3))]
    assert send(api, *group).job_response_items


def test_a_uniform_gang_needs_room_on_the_nodes_of_one_label_value(api: Stubs, queue: str) -> None:
    # Four nodes of 4 CPUs, two per rack (the helper labels them rack r0, r1, r0, r1).
    Executor(api.channel, nodes=4, cpu="4", memory="16Gi").sync()
    uniform = {ann.GANG_NODE_UNIFORMITY_LABEL: "rack"}
    assert send(api, *(member("two", 2, **uniform) for _ in range(2))).job_response_items
    code, said = refusal(api, *(member("three", 3, **uniform) for _ in range(3)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert said == (
        "job_request_items[0]: gang 'three' needs 3 members requesting cpu 4, memory 1Gi each "
        "on nodes sharing one value of label 'rack', but the nodes of any one value hold too "
        f"few (at most 2, rack=r0){SETTING_HINT}"
    )
    # Without the label, the four nodes hold three.
    assert send(api, *(member("spread", 3) for _ in range(3))).job_response_items
    other = {ann.GANG_NODE_UNIFORMITY_LABEL: "zone"}
    assert refusal(api, *(member("zoned", 2, **other) for _ in range(2)))[1].startswith(
        "job_request_items[0]: gang 'zoned' needs 2 members requesting cpu 4, memory 1Gi each "
        "on nodes sharing one value of label 'zone', but no node that can hold one has that "
        "label"
    )


def test_a_large_request_on_a_large_cluster_matches_each_shape_once_per_node_type(
    api: Stubs, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes differing only in labels no job names (host names) are one type; identical
    jobs are one shape: 1,000 jobs on 1,000 nodes cost one match, not a million. Jobs that
    differ only in their ids, client ids, job sets and creation times are converted to the
    scheduler's view once, also across requests."""
    monkeypatch.setattr(node_fit, "_VIEWS", {})  # none converted by earlier tests
    ex = Executor(api.channel, nodes=1000, cpu="4", memory="16Gi")
    for n in ex.nodes:
        n.labels["kubernetes.io/hostname"] = n.name
    ex.sync()
    matched = []
    real = node_fit.node_admits
    monkeypatch.setattr(node_fit, "node_admits", lambda *a: matched.append(a) or real(*a))
    viewed = []
    view = node_fit.spec_view
    monkeypatch.setattr(node_fit, "spec_view", lambda spec: viewed.append(spec.id) or view(spec))
    items = [job() for _ in range(1000)]
    for i, one in enumerate(items):
        one.client_id = f"c{i}"
    response = send(api, *items)
    assert len(response.job_response_items) == 1000 and not response.notes
    assert len(matched) == 1, len(matched)
    assert len(viewed) == 1, len(viewed)
    # The same job later, in another job set: converted already.
    again = job(client_id="another")
    assert len(send(api, again, job_set="other").job_response_items) == 1
    assert len(viewed) == 1, len(viewed)
    # A job that differs in what the view reads is converted apart, and named by its index.
    code, said = refusal(api, job(), job(), job(), job("1000"))
    assert (code, said.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "job_request_items[3]")
    assert len(viewed) == 2, len(viewed)
    # As is one that differs in its tolerations only (the view reads them), and it is
    # judged on them: no node of this cluster is tainted, so a toleration changes nothing.
    tolerant = job(pod={"tolerations": [{"key": "gpu", "operator": "Exists"}]})
    assert len(send(api, tolerant, job_set="other").job_response_items) == 1
    assert len(viewed) == 3, len(viewed)


def test_the_check_runs_before_the_transaction_and_refuses_after_the_cordon(
    api: Stubs, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request's new jobs are checked before the transaction that stores them opens (on
    SQLite every other writer waits for that transaction); the refusal still comes where
    the transaction asked before: a cordoned queue is named first."""
    Executor(api.channel, nodes=2, cpu="4").sync()
    writing = threading.local()
    real_write = Transactions.write

    @contextmanager
    def write(self: Transactions) -> Iterator[tuple[Any, set[Any]]]:
        writing.open = True
        try:
            with real_write(self) as opened:
                yield opened
        finally:
            writing.open = False

    checked_in_a_write: list[bool] = []
    real_check = node_fit.NodeFit.check

    def check(self: node_fit.NodeFit, specs: Any, *, accept: bool) -> list[str]:
        checked_in_a_write.append(getattr(writing, "open", False))
        return real_check(self, specs, accept=accept)

    monkeypatch.setattr(Transactions, "write", write)
    monkeypatch.setattr(node_fit.NodeFit, "check", check)
    assert len(send(api, job(), job()).job_response_items) == 2
    api.queues.CordonQueue(submit_pb2.QueueCordonRequest(name="q"))
    code, _ = refusal(api, job("1000"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    api.queues.UncordonQueue(submit_pb2.QueueUncordonRequest(name="q"))
    code, said = refusal(api, job(), job("1000"))
    assert (code, said.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "job_request_items[1]")
    assert stored(api).count("submitted") == 2
    assert checked_in_a_write == [False, False, False]


def test_a_job_stored_already_is_not_checked_again(api: Stubs, queue: str) -> None:
    """A request naming a stored job by its client id is checked on its new jobs only, even
    when the stored one would fit no node now: what the check said of every job the request
    built is not what the transaction stores."""
    ex = Executor(api.channel, nodes=2, cpu="4")
    ex.sync()
    [big] = send(api, job("3", client_id="big")).job_response_items
    ex.nodes = [executor_pb2.Node(name="e1-small", allocatable={"cpu": "2", "memory": "8Gi"})]
    ex.sync()
    code, _ = refusal(api, job("5"))  # fitting no node known, the check reads them again
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    code, _ = refusal(api, job("3"))  # the big job would be refused now
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    response = send(api, job("3", client_id="big"), job("1", client_id="small"))
    again, small = response.job_response_items
    assert again.job_id == big.job_id and small.job_id != big.job_id
    assert not response.notes
    assert stored(api).count("submitted") == 2


# --- accepting them anyway ---------------------------------------------------------------


@pytest.fixture
def accepting(database_url: str) -> Iterator[Stubs]:
    with (
        EmbeddedServer(config(database_url, accept=True)) as running,
        grpc.insecure_channel(running.address) as channel,
    ):
        api = stubs(channel)
        api.queues.CreateQueue(submit_pb2.Queue(name="q", priority_factor=1))
        yield api


def test_the_server_can_accept_them_and_leave_them_out_of_the_line(accepting: Stubs) -> None:
    api = accepting
    ex = Executor(api.channel, nodes=1, cpu="4", memory="16Gi")
    ex.sync()
    [running] = send(api, job("4")).job_response_items
    ex.wait_leases(1)
    response = send(api, job("1000"), job("1000"), job("2"))
    huge, _, small = (i.job_id for i in response.job_response_items)
    assert list(response.notes) == [
        "job_request_items[0] (and 1 more like it): requests cpu 1000 but no node can hold it "
        "(largest matching node: cpu 4, memory 16Gi); accepted (accept_jobs_that_fit_no_node): "
        "it waits until a node that can hold it joins"
    ]
    deadline = time.monotonic() + 20
    while not (details(api, huge).scheduling_reason and details(api, small).scheduling_reason):
        assert time.monotonic() < deadline, "the scheduler gave no reasons"
        ex.sync()
        time.sleep(0.05)
    # The job that fits no node has the scheduler's reason and no place in line; the one
    # that waits for room is 3rd, in a line of three (both huge ones, in their turn, are
    # before it).
    said = details(api, huge).scheduling_reason
    assert said.startswith(reasons.TOO_LARGE + "; queue q at ") and "in line" not in said
    assert details(api, small).scheduling_reason.endswith("; 3rd in line of 3 queued")
    assert running.job_id


# --- preempt refusals ----------------------------------------------------------------------


def test_a_preempt_refusal_says_where_the_job_is(api: Stubs, queue: str) -> None:
    api.queues.CreateQueue(submit_pb2.Queue(name="other", priority_factor=1))
    ex = Executor(api.channel, nodes=2, cpu="4", memory="16Gi")  # racks r0 and r1
    ex.sync()
    [done] = (i.job_id for i in send(api, job("4")).job_response_items)
    [lease] = ex.wait_leases(1)
    ex.sync(ex.update(lease, succeeded=executor_pb2.RunUpdate.Succeeded()))
    # One job holds rack r0's node: the next one for r0 waits.
    on_r0 = {"nodeSelector": {"rack": "r0"}}
    [busy] = (i.job_id for i in send(api, job("4", pod=on_r0)).job_response_items)
    ex.wait_leases(1)
    [waiting] = (i.job_id for i in send(api, job("4", pod=on_r0)).job_response_items)
    [elsewhere] = (i.job_id for i in send(api, job(), queue="other").job_response_items)
    [other_set] = (i.job_id for i in send(api, job(), job_set="t").job_response_items)
    asked = [done, elsewhere, other_set, waiting, "ghost", busy]
    results = api.submit.PreemptJobs(
        submit_pb2.JobPreemptRequest(queue="q", job_set_id="s", job_ids=asked)
    ).preemption_results
    assert results[done] == f"job {done} has ended (succeeded)"
    assert results[elsewhere] == f"job {elsewhere} is in queue other, not q"
    assert results[other_set] == f"job {other_set} is in job set t, not s"
    assert results[waiting] == f"job {waiting} is queued, not running"
    assert results["ghost"] == "job ghost not found"
    assert results[busy] == ""


def test_the_setting_must_be_true_or_false(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text("accept_jobs_that_fit_no_node: maybe\n")
    with pytest.raises(ConfigError) as raised:
        build(path)
    assert str(raised.value) == "accept_jobs_that_fit_no_node: must be true or false, got 'maybe'"
