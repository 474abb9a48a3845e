"""The evaluation job's code: it runs as an Armada job and talks to Dagster through Pipes
(context from its environment, messages on its stderr, read back from its log)."""

from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    threshold = float(pipes.get_extra("threshold"))
    accuracy = 0.94
    pipes.log.info(f"evaluated the model: accuracy {accuracy}")
    pipes.report_asset_materialization(metadata={"accuracy": accuracy, "samples": 500})
    pipes.report_asset_check(
        check_name="accuracy_above_0_9",
        passed=accuracy > threshold,
        metadata={"threshold": threshold},
    )
