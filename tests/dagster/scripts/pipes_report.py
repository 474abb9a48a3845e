"""Run by the local executor as an Armada job: reports a materialization and a check
through Dagster Pipes, on its stderr, which the Logs RPC serves."""

from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    rows = int(pipes.get_extra("rows"))
    print(f"evaluating {rows} rows")
    pipes.log.info("pipes log from inside the job")
    pipes.report_asset_materialization(metadata={"rows": rows, "accuracy": 0.93})
    pipes.report_asset_check(check_name="enough_rows", passed=rows >= 3)
