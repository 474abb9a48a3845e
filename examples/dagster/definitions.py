"""A small asset graph on Armada: an ingest job, a 2-pod gang that trains, and an evaluation
that reports its metrics back through Dagster Pipes.

The jobs' commands run this machine's Python because the example uses armada-server's local
executor (which ignores images); on Kubernetes they would run in the image named.
"""

import sys
from pathlib import Path

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    Definitions,
    EnvVar,
    MaterializeResult,
    RetryPolicy,
    asset,
)

from dagster_armada import ArmadaResource, PipesArmadaClient, armada_asset, container_pod_spec

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable

ingest = armada_asset(
    name="raw_events",
    command=[
        PYTHON,
        "-c",
        "import random; random.seed(7); print(f'ingested {random.randint(1000, 2000)} events')",
    ],
    cpu="250m",
    memory="256Mi",
    retry_policy=RetryPolicy(max_retries=2),  # preemptions and lost nodes are retried
    description="Ingest raw events (one Armada job).",
)

train = armada_asset(
    name="model",
    deps=["raw_events"],
    replicas=2,  # a gang: both ranks are scheduled together or not at all
    command=["sh", "-c", 'echo "rank $HOSTNAME training"; sleep 1; echo done'],
    cpu="500m",
    memory="256Mi",
    description="Train on two pods at once (a 2-member Armada gang).",
)


@asset(
    deps=["model"],
    check_specs=[AssetCheckSpec("accuracy_above_0_9", asset="evaluation")],
    description="Evaluate the model inside an Armada job that reports through Pipes.",
)
def evaluation(
    context: AssetExecutionContext, pipes_armada: PipesArmadaClient
) -> MaterializeResult:
    return pipes_armada.run(
        context=context,
        extras={"threshold": 0.9},
        pod_spec=container_pod_spec(
            [PYTHON, str(HERE / "evaluate_job.py")], cpu="250m", memory="512Mi"
        ),
    ).get_materialize_result()


armada = ArmadaResource(
    address=EnvVar("ARMADA_URL"), queue=EnvVar("ARMADA_QUEUE"), log_destination="both"
)

ASSETS = [ingest, train, evaluation]
RESOURCES = {"armada": armada, "pipes_armada": PipesArmadaClient(armada)}

defs = Definitions(assets=ASSETS, resources=RESOURCES)
