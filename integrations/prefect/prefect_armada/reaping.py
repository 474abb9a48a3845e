"""The reaper's Prefect adapter (armada_core.client.lifecycle.reaping), run by every `armada`
worker on each takeover round.

A flow run forced to a final state while its worker is dead, or while its flow process is gone,
tells nobody: its job, and the jobs its tasks started, would run on. The worker lists the live
jobs of Prefect tasks on the Armada servers its pool's credentials name (the base job
template's and its deployments'), reads each one's flow run through the Prefect API, and
cancels the jobs of flow runs that ended (Cancelled, Completed, Failed, Crashed) at least
`SETTLE_SECONDS` ago (a flow run's process reports its end and then exits, with its job). A
flow run Prefect does not know, or a job not started from a flow run, is left alone; with the
Prefect API unreachable nothing is cancelled, a warning is logged and a
`prefect-armada.reaper.unreachable` event emitted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx
from prefect.client.schemas.filters import WorkPoolFilter, WorkPoolFilterName
from prefect.events import emit_event
from prefect.exceptions import ObjectNotFound

from armada_core.client.lifecycle.reaping import (
    AsyncReaper,
    Counters,
    OrchestratorUnreachable,
    Round,
    TaskJob,
    TaskState,
    ended,
    running,
    settled,
    unknown,
)

from ._identity import ORCHESTRATOR
from .credentials import ArmadaCredentials

if TYPE_CHECKING:
    from prefect.client.orchestration import PrefectClient
    from prefect.workers.base import BaseWorker

log = logging.getLogger("prefect_armada.reaper")

UNREACHABLE_EVENT = "prefect-armada.reaper.unreachable"
CANCELLED_EVENT = "prefect-armada.reaper.cancelled"


def flow_run_of(task: str) -> uuid.UUID | None:
    """The flow run a job works for: the worker's job (the task is the flow run id) or a job
    started in a flow run (`flow-run/<id>/...`, prefect_armada._identity); else None."""
    head, _, rest = task.partition("/")
    candidate = rest.partition("/")[0] if head == "flow-run" else task if not rest else ""
    try:
        return uuid.UUID(candidate)
    except ValueError:
        return None


class PrefectFlowRunStates:
    """The state of each job's flow run through the Prefect API (`reaping.AsyncTaskStates`)."""

    orchestrator = ORCHESTRATOR

    def __init__(self, client: PrefectClient) -> None:
        self.client = client

    async def states(self, jobs: Sequence[TaskJob]) -> Mapping[tuple[str, str], TaskState]:
        by_run: dict[uuid.UUID, TaskState] = {}
        out: dict[tuple[str, str], TaskState] = {}
        for job in jobs:
            flow_run_id = flow_run_of(job.task)
            if flow_run_id is None:
                out[job.key] = unknown(f"prefect task {job.task}", "not in a flow run")
                continue
            if flow_run_id not in by_run:
                by_run[flow_run_id] = await self.flow_run_state(flow_run_id)
            out[job.key] = by_run[flow_run_id]
        return out

    async def flow_run_state(self, flow_run_id: uuid.UUID) -> TaskState:
        subject = f"prefect flow run {flow_run_id}"
        try:
            flow_run = await self.client.read_flow_run(flow_run_id)
        except ObjectNotFound:
            return unknown(subject, "not found")
        except (httpx.HTTPError, OSError) as e:
            raise OrchestratorUnreachable(f"Prefect API: {e!r}") from None
        state = flow_run.state
        if state is None:
            return unknown(subject)
        if state.is_final():
            if not settled(state.timestamp):
                return running(subject, f"{state.name}, its process exiting")
            return ended(subject, state.name or state.type.value)
        return running(subject, state.name or state.type.value)


class WorkerReaper:
    """The reaper of one worker: a round on each takeover round, on every Armada server the
    pool's base job template and its deployments name; decisions awaiting confirmation and
    counters carry over from round to round (`counters` is what the worker exposes)."""

    def __init__(self, worker: BaseWorker[Any, Any, Any]) -> None:
        self.worker = worker
        self.pending: dict[str, str] = {}
        self.counters = Counters()

    async def round(self) -> list[Round]:
        """One round on each Armada server the pool's jobs go to; a server (or the Prefect
        API) that cannot be asked is logged and skipped."""
        done: list[Round] = []
        fresh: dict[str, str] = {}
        try:
            servers = await self._servers()
        except Exception as e:
            log.warning("Could not read the pool's Armada servers to look for orphaned jobs: %s", e)
            return done
        for credentials in servers:
            try:
                async with credentials.get_async_client() as armada:
                    reaper = AsyncReaper(
                        armada, PrefectFlowRunStates(self.worker.client), pending=self.pending
                    )
                    reaper.counters = self.counters
                    done.append(await reaper.reap_once())
                    fresh.update(reaper.pending)
            except Exception as e:
                log.warning(
                    "Could not look for jobs of ended flow runs on %s: %s", credentials.address, e
                )
        self.pending = fresh
        for each in done:
            self._emit(each)
        return done

    async def _servers(self) -> list[ArmadaCredentials]:
        """The Armada credentials of the pool's base job template and of its deployments'
        job variables, each distinct connection once."""
        worker = self.worker
        template = worker.work_pool.base_job_template
        values: list[dict[str, Any]] = [{}]
        deployments = await worker.client.read_deployments(
            work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[worker.work_pool.name]))
        )
        values += [dict(d.job_variables or {}) for d in deployments]
        found: dict[str, ArmadaCredentials] = {}
        for each in values:
            configuration = await worker.job_configuration.from_template_and_values(
                template, each, client=worker.client
            )
            credentials = getattr(configuration, "credentials", None) or ArmadaCredentials()
            found.setdefault(repr(credentials.connection_config()), credentials)
        return list(found.values())

    def _emit(self, done: Round) -> None:
        """As Prefect events (the lines are logged by the reaper itself)."""
        resource = {"prefect.resource.id": f"prefect.worker.armada.{self.worker.name}"}
        if done.unreachable:
            emit_event(UNREACHABLE_EVENT, resource, payload={"error": done.unreachable})
        for job_id, reason in done.cancelled:
            emit_event(CANCELLED_EVENT, resource, payload={"job_id": job_id, "reason": reason})
