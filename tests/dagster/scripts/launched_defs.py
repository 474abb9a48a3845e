"""The code location of the run-launcher tests: loaded by the test and, through
`dagster api execute_run`, by the run worker the local executor starts."""

import os
import time
from pathlib import Path

from dagster import Definitions, OpExecutionContext, job, op


@op
def hello(context: OpExecutionContext) -> None:
    context.log.info(f"hello from the run worker in {os.environ.get('HOSTNAME')}")


@op
def wait_until_terminated(context: OpExecutionContext) -> None:
    Path(os.environ["MARKER_DIR"], "worker-started").write_text(os.environ["HOSTNAME"])
    time.sleep(120)


@job
def hello_job() -> None:
    hello()


@job
def slow_job() -> None:
    wait_until_terminated()


defs = Definitions(jobs=[hello_job, slow_job])
