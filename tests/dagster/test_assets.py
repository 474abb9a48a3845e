"""Assets and ops backed by Armada jobs, materialized by real Dagster against a real server."""

import sys
from pathlib import Path

import pytest
from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    RetryPolicy,
    asset,
    materialize,
)

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, Role
from dagster_armada import (
    ArmadaResource,
    PipesArmadaClient,
    armada_asset,
    container_pod_spec,
)
from tests.dagster.conftest import compute_log, event_log

pytestmark = pytest.mark.e2e

SCRIPTS = Path(__file__).parent / "scripts"


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def materialization_metadata(result, key: str) -> dict:  # type: ignore[no-untyped-def]
    [event] = [
        e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def submitted(admin: ArmadaClient, queue: str, job_set: str) -> list[str]:
    """Every job id ever submitted to a job set (to prove nothing was submitted twice)."""
    return [
        m.message.submitted.job_id
        for m in admin.get_job_set_events(queue, job_set)
        if m.message.WhichOneof("events") == "submitted"
    ]


def test_asset_backed_by_a_job_reports_metadata_and_logs(
    armada: ArmadaResource, instance: DagsterInstance
) -> None:
    ingest = armada_asset(
        name="ingest", command=python("print('ingested 42 rows')"), cpu="100m", memory="128Mi"
    )
    result = materialize([ingest], resources={"armada": armada}, instance=instance)
    assert result.success
    metadata = materialization_metadata(result, "ingest")
    job_id = metadata["armada/job_id"]
    assert metadata["armada/exit_code"] == 0
    assert metadata["armada/outcome"] == "succeeded"
    assert metadata["armada/node"]
    assert metadata["armada/run_id"]
    assert metadata["armada/queue"] == armada.queue
    assert metadata["armada/job_set_id"] == f"dagster-{result.run_id}"
    assert 0 <= metadata["armada/duration_seconds"] < 60
    assert metadata["armada/link"] == f"http://lookout.test/jobs/{job_id}"
    # The job's output reached the event log and the step's compute log while it ran.
    assert any("ingested 42 rows" in line for line in event_log(instance, result.run_id))
    assert "ingested 42 rows" in compute_log(instance, result)


def test_gang_asset_runs_every_member(
    armada: ArmadaResource, admin: ArmadaClient, instance: DagsterInstance
) -> None:
    train = armada_asset(
        name="train",
        replicas=2,
        cpu="100m",
        memory="128Mi",
        command=["sh", "-c", "echo rank on $HOSTNAME; sleep 0.5"],
    )
    result = materialize([train], resources={"armada": armada}, instance=instance)
    assert result.success
    metadata = materialization_metadata(result, "train")
    assert len(metadata["armada/job_ids"]) == 2
    assert len(metadata["armada/nodes"]) == 2
    job_set = metadata["armada/job_set_id"]
    assert sorted(submitted(admin, armada.queue, job_set)) == sorted(metadata["armada/job_ids"])
    lines = "\n".join(event_log(instance, result.run_id))
    for job_id in metadata["armada/job_ids"]:
        assert f"rank on armada-{job_id}-0" in lines


def test_pod_group_asset_runs_every_role(
    armada: ArmadaResource, admin: ArmadaClient, instance: DagsterInstance
) -> None:
    def member(role: str, seconds: int) -> dict:  # type: ignore[type-arg]
        return container_pod_spec(
            ["sh", "-c", f"echo role {role} $GREETING; sleep {seconds}"], cpu="100m", memory="128Mi"
        )

    # The coordinator ends first, the workers after it.
    train = armada_asset(
        name="elastic_train",
        env={"GREETING": "hello"},
        roles=[
            Role("coordinator", member("coordinator", 0)),
            {"name": "worker", "minimum": 2, "maximum": 4, "pod_spec": member("worker", 2)},
        ],
    )
    result = materialize(
        [train], resources={"armada": armada}, instance=instance, raise_on_error=False
    )
    every = submitted(admin, armada.queue, f"dagster-{result.run_id}")
    # Every member up to each role's maximum, submitted once per attempt (an infrastructure
    # failure is retried with a new generation of the whole group).
    assert every and len(every) % 5 == 0
    ids = every[-5:]
    details = admin.get_job_details(every, expand_job_spec=True)
    roles = [details[j].job_spec.annotations["armadaproject.io/gangRole"] for j in ids]
    assert sorted(roles) == ["coordinator"] + ["worker"] * 4
    assert {details[j].job_spec.annotations["armadaproject.io/gangCardinality"] for j in every} == {
        "5"
    }
    # With room for everything, all five run, and the step follows them together.
    lines = "\n".join(event_log(instance, result.run_id))
    for job_id, role in zip(ids, roles, strict=True):
        assert f"[armada {job_id}] role {role} hello" in lines
    # A member that succeeded keeps its role (SEMANTICS.md, "Elastic pod groups"): the
    # workers run on after the coordinator, no member is preempted, and the step succeeds.
    assert result.success
    assert set(admin.get_job_status(ids).values()) == {submit_pb2.SUCCEEDED}
    assert submit_pb2.PREEMPTED not in set(admin.get_job_status(every).values())
    assert sorted(materialization_metadata(result, "elastic_train")["armada/job_ids"]) == sorted(
        ids
    )


def test_pipes_reports_a_materialization_from_inside_the_job(
    armada: ArmadaResource, instance: DagsterInstance
) -> None:
    @asset(check_specs=[AssetCheckSpec("enough_rows", asset="evaluation")])
    def evaluation(context: AssetExecutionContext, pipes_armada: PipesArmadaClient):  # type: ignore[no-untyped-def]
        return pipes_armada.run(
            context=context,
            extras={"rows": 5},
            pod_spec=container_pod_spec(
                [sys.executable, str(SCRIPTS / "pipes_report.py")], cpu="200m", memory="512Mi"
            ),
        ).get_materialize_result()

    result = materialize(
        [evaluation], resources={"pipes_armada": PipesArmadaClient(armada)}, instance=instance
    )
    assert result.success
    metadata = materialization_metadata(result, "evaluation")
    assert metadata["rows"] == 5
    assert metadata["accuracy"] == pytest.approx(0.93)
    assert metadata["armada/exit_code"] == 0
    assert metadata["armada/job_id"]
    [check] = result.get_asset_check_evaluations()
    assert check.passed
    log = "\n".join(event_log(instance, result.run_id))
    assert "pipes log from inside the job" in log
    assert "evaluating 5 rows" in log


def test_pipes_runs_a_pod_group_and_hears_its_coordinator(
    armada: ArmadaResource, admin: ArmadaClient, instance: DagsterInstance
) -> None:
    """An elastic pod group through Pipes: the coordinator (the first role's member) reports
    the materialization, the workers' output goes to the logs."""

    @asset(check_specs=[AssetCheckSpec("enough_rows", asset="grouped")])
    def grouped(context: AssetExecutionContext, pipes_armada: PipesArmadaClient):  # type: ignore[no-untyped-def]
        coordinator = container_pod_spec(
            [sys.executable, str(SCRIPTS / "pipes_report.py")], cpu="200m", memory="512Mi"
        )
        worker = container_pod_spec(
            ["sh", "-c", "echo worker has $DAGSTER_PIPES_CONTEXT"], cpu="100m", memory="64Mi"
        )
        return pipes_armada.run(
            context=context,
            extras={"rows": 4},
            roles=[Role("coordinator", coordinator), Role("worker", worker, minimum=1, maximum=2)],
        ).get_materialize_result()

    result = materialize(
        [grouped], resources={"pipes_armada": PipesArmadaClient(armada)}, instance=instance
    )
    assert result.success
    metadata = materialization_metadata(result, "grouped")
    assert metadata["rows"] == 4
    [check] = result.get_asset_check_evaluations()
    assert check.passed
    ids = submitted(admin, armada.queue, f"dagster-{result.run_id}")
    details = admin.get_job_details(ids, expand_job_spec=True)
    assert sorted(
        d.job_spec.annotations["armadaproject.io/gangRole"] for d in details.values()
    ) == ["coordinator", "worker", "worker"]
    log = "\n".join(event_log(instance, result.run_id))
    assert "pipes log from inside the job" in log
    # Every member got the Pipes variables; only the coordinator's messages were read.
    assert log.count("worker has ") == 2 and "worker has \n" not in log


def test_user_error_fails_without_retry(armada: ArmadaResource, admin: ArmadaClient) -> None:
    script = "echo 'bad input file' > /dev/termination-log; exit 3"
    broken = armada_asset(
        name="broken",
        command=["sh", "-c", script],
        cpu="100m",
        memory="64Mi",
        retry_policy=RetryPolicy(max_retries=3),
    )
    result = materialize([broken], resources={"armada": armada}, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
    data = failure.step_failure_data.user_failure_data
    metadata = {k: v.value for k, v in data.metadata.items()}
    assert metadata["armada/exit_code"] == 3
    assert "bad input file" in metadata["armada/termination_message"]
    assert metadata["armada/outcome"] == "user_error"
    assert "exit code 3" in data.description
    assert not [e for e in result.all_events if e.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(submitted(admin, armada.queue, f"dagster-{result.run_id}")) == 1


def test_definitions_accept_the_resource_with_env_secrets(server, queue) -> None:  # type: ignore[no-untyped-def]
    from dagster import EnvVar

    resource = ArmadaResource(address=server.address, queue=queue, token=EnvVar("NO_SUCH_VAR"))
    defs = Definitions(
        assets=[armada_asset(name="x", command=["true"])], resources={"armada": resource}
    )
    assert defs.resolve_asset_graph().get_all_asset_keys()
