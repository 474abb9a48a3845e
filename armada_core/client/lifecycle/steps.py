"""The lifecycle's logic is written once as generators of calls
(`armada_core.client.operations.Call`) and pauses; these drivers run them with the blocking
client or the asyncio one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from armada_core.api import job_pb2, submit_pb2

from .. import operations as ops
from ..errors import ArmadaError

Log = Callable[[str], None]


T = TypeVar("T")


class LifecycleError(ArmadaError):
    """Earlier attempts' jobs did not end in time after being cancelled."""


@dataclass(frozen=True)
class Pause:
    seconds: float


def _drive(
    client: Any, flow: Generator[Any, Any, T], other: Callable[[Any], Any] | None = None
) -> T:
    """Run a flow with the blocking client: calls are made (an ArmadaError is thrown into the
    flow, which may catch it), pauses slept, any other step answered by `other`."""
    try:
        step = next(flow)
        while True:
            try:
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    answer = None
                elif isinstance(step, ops.Call):
                    answer = client._run(step)
                else:
                    assert other is not None, step
                    answer = other(step)
            except ArmadaError as e:
                step = flow.throw(e)
                continue
            step = flow.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


async def _adrive(
    client: Any, flow: Generator[Any, Any, T], other: Callable[[Any], Awaitable[Any]] | None = None
) -> T:
    """`_drive` with the asyncio client."""
    try:
        step = next(flow)
        while True:
            try:
                if isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                    answer = None
                elif isinstance(step, ops.Call):
                    answer = await client._run(step)
                else:
                    assert other is not None, step
                    answer = await other(step)
            except ArmadaError as e:
                step = flow.throw(e)
                continue
            step = flow.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


def _ignore(_: str) -> None:
    pass


def processes_stopping(details: job_pb2.JobDetails | None) -> bool:
    """A run that ended without a finished time: the server ended it (a cancellation) and
    its executor has not yet confirmed that its processes are gone."""
    return details is not None and any(
        r.state >= job_pb2.RUN_STATE_SUCCEEDED and not r.HasField("finished_ts")
        for r in details.job_runs
    )


Items = list[submit_pb2.JobSubmitRequestItem]
Step = ops.Call[Any] | Pause
