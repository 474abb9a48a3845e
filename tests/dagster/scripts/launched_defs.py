"""The code location of the run-launcher tests: loaded by the test and, through
`dagster api execute_run`, by the run worker the local executor starts."""

import os
import signal
import time
from pathlib import Path

from dagster import Definitions, OpExecutionContext, in_process_executor, job, op


@op
def hello(context: OpExecutionContext) -> None:
    context.log.info(f"hello from the run worker in {os.environ.get('HOSTNAME')}")


@op
def wait_until_terminated(context: OpExecutionContext) -> None:
    Path(os.environ["MARKER_DIR"], "worker-started").write_text(os.environ["HOSTNAME"])
    time.sleep(120)


@op
def ignore_termination(context: OpExecutionContext) -> None:
    """Runs in the run worker's own process (in-process executor), so the worker cannot be
    interrupted: it never records its cancellation itself."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Path(os.environ["MARKER_DIR"], "worker-started").write_text(os.environ["HOSTNAME"])
    time.sleep(120)


@job
def hello_job() -> None:
    hello()


@job
def slow_job() -> None:
    wait_until_terminated()


@job(executor_def=in_process_executor)
def stubborn_job() -> None:
    ignore_termination()


defs = Definitions(jobs=[hello_job, slow_job, stubborn_job])
