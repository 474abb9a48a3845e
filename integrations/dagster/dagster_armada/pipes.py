"""Dagster Pipes on Armada: the external process runs as an Armada job (or gang), gets the
Pipes context through its environment and reports back through its own log.

The job writes Pipes messages to stderr (``open_dagster_pipes()`` does so when told by the
bootstrap variables); the step's wait (the task lifecycle's, which follows the job's log
through the Logs RPC) hands each line to the reader, which passes the messages to Dagster and
forwards every other line to the compute log. A gang's Pipes messages are read from its first
member (of a pod group: the first member of its first role, e.g. its coordinator); the other
members' lines are forwarded as output.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from dagster import PipesClient, PipesEnvContextInjector, open_pipes_session
from dagster._core.definitions.resource_annotation import TreatAsResourceParam
from dagster._core.pipes.client import (
    PipesClientCompletedInvocation,
    PipesContextInjector,
    PipesMessageReader,
)
from dagster._core.pipes.context import PipesLaunchedData, PipesMessageHandler
from dagster._core.pipes.utils import extract_message_or_forward_to_file
from dagster_pipes import PipesDefaultMessageWriter, PipesExtras, PipesParams

from armada_core.client import PodSpecLike, Role

from .job import (
    AnyContext,
    Items,
    build_items,
    container_pod_spec,
    run_items,
    step_identity,
)
from .resource import ArmadaResource


class PipesArmadaLogsMessageReader(PipesMessageReader):
    """Reads Pipes messages from an Armada job's log while it runs.

    `PipesArmadaClient` reports the launched job ids
    (`PipesSession.report_launched({"extras": {"job_ids": [...]}})`) and has its wait hand
    every log line of the jobs to `forward`.
    """

    def __init__(
        self,
        armada: ArmadaResource,
        *,
        context: AnyContext | None = None,
        forward_to_event_log: bool = False,
    ) -> None:
        self.armada = armada
        self.context = context
        self.forward_to_event_log = forward_to_event_log
        self._handler: PipesMessageHandler | None = None
        self._messenger: str | None = None

    @contextmanager
    def read_messages(self, handler: PipesMessageHandler) -> Iterator[PipesParams]:
        self._handler = handler
        try:
            yield {PipesDefaultMessageWriter.STDIO_KEY: PipesDefaultMessageWriter.STDERR}
        finally:
            self._handler = None
            self._messenger = None

    def on_launched(self, launched_payload: PipesLaunchedData) -> None:
        job_ids: Sequence[str] = launched_payload["extras"]["job_ids"]
        if job_ids:
            self._messenger = job_ids[0]

    def forward(self, job_id: str, line: str) -> None:
        """One log line of a launched job: a Pipes message of the first job goes to Dagster,
        anything else to the compute log (and the event log if asked)."""
        handler = self._handler
        if handler is not None and job_id == self._messenger:
            extract_message_or_forward_to_file(handler, line, sys.stdout)
        else:
            print(f"[{job_id}] {line}", file=sys.stdout, flush=True)
        if self.forward_to_event_log and self.context is not None and not _is_pipes_message(line):
            self.context.log.info(f"[armada {job_id}] {line}")

    def no_messages_debug_text(self) -> str:
        return (
            "Attempted to read messages from the Armada job's log through the Logs RPC. "
            "Does the job call open_dagster_pipes() with the default message writer, and "
            "does the server serve logs?"
        )


def _is_pipes_message(line: str) -> bool:
    return line.startswith("{") and '"__dagster_pipes_version"' in line


class PipesArmadaClient(PipesClient, TreatAsResourceParam):
    """Runs a Pipes process as an Armada job or gang and returns what it reported.

        @asset
        def evaluation(context, pipes_armada: PipesArmadaClient):
            return pipes_armada.run(context=context,
                                    command=["python", "evaluate.py"]).get_materialize_result()

    Submission follows the shared task lifecycle, as `execute_armada_job` does (a resumed run
    reattaches; a re-execution cancels the earlier runs' live jobs before submitting); a
    failed, cancelled or vanished job raises (see outcome.py) instead of leaving the step
    hanging, and run termination cancels the job.
    """

    def __init__(
        self,
        armada: ArmadaResource,
        *,
        env: Mapping[str, str] | None = None,
        context_injector: PipesContextInjector | None = None,
        message_reader: PipesMessageReader | None = None,
    ) -> None:
        self.armada = armada
        self.env = dict(env or {})
        self.context_injector = context_injector or PipesEnvContextInjector()
        self.message_reader = message_reader

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    def run(
        self,
        *,
        context: AnyContext,
        extras: PipesExtras | None = None,
        command: Sequence[str] | None = None,
        pod_spec: PodSpecLike | Sequence[PodSpecLike] | None = None,
        image: str = "python:3.11",
        cpu: str = "1",
        memory: str = "1Gi",
        env: Mapping[str, str] | None = None,
        replicas: int | None = None,
        roles: Sequence[Role | Mapping[str, Any]] | None = None,
        job_set_id: str | None = None,
        timeout: float | None = None,
        **job: Any,
    ) -> PipesClientCompletedInvocation:
        """Launch the job with the Pipes bootstrap variables in its environment, wait for it,
        and return the invocation (``.get_materialize_result()``, ``.get_results()``).

        Keyword arguments are those of `execute_armada_job`: a full `pod_spec` (or a list of
        them, a gang) or a `command`; `replicas` makes a gang of identical members; `roles`
        an elastic pod group (every member gets the Pipes variables; the first member of the
        first role reports through Pipes).
        """
        if roles is not None:
            if pod_spec is not None or command is not None:
                raise ValueError("give roles or a pod_spec/command, not both")
            job["roles"] = roles
        elif pod_spec is None:
            if command is None:
                raise ValueError("give a pod_spec, a command or roles")
            pod_spec = container_pod_spec(command, image=image, cpu=cpu, memory=memory)
        # Outside Dagster's resource system nothing resolves EnvVar fields: do it here.
        with self.armada.process_config_and_initialize_cm() as armada:
            return self._run(
                armada, context, extras, pod_spec, env, replicas, job_set_id, timeout, job
            )

    def _run(
        self,
        armada: ArmadaResource,
        context: AnyContext,
        extras: PipesExtras | None,
        pod_spec: Any,
        env: Mapping[str, str] | None,
        replicas: int | None,
        job_set_id: str | None,
        timeout: float | None,
        job: dict[str, Any],
    ) -> PipesClientCompletedInvocation:
        # An explicit client_id names this submission within the step (as in
        # execute_armada_job); the client ids sent are derived from it per attempt.
        identity = step_identity(
            context, armada, job_set_id=job_set_id, key=job.pop("client_id", None) or ""
        )
        _, to_event_log = armada.log_lines_to()
        reader = self.message_reader or PipesArmadaLogsMessageReader(
            armada, context=context, forward_to_event_log=to_event_log
        )
        with open_pipes_session(
            context=context,
            context_injector=self.context_injector,
            message_reader=reader,
            extras=extras,
        ) as session:
            variables = {**self.env, **(env or {}), **session.get_bootstrap_env_vars()}

            def build(client_id: str) -> Items:
                return build_items(
                    armada,
                    identity,
                    pod_spec,
                    replicas=replicas,
                    env=variables,
                    client_id=client_id,
                    **dict(job),
                )

            def launched(job_set: str, ids: list[str]) -> None:
                session.report_launched(
                    {"extras": {"job_ids": ids, "job_set_id": job_set, "queue": armada.queue}}
                )

            # Our reader gets the job's log lines from the wait; another reader reads them
            # its own way.
            forward = reader.forward if isinstance(reader, PipesArmadaLogsMessageReader) else None
            run = run_items(
                context,
                armada,
                build,
                identity=identity,
                job_set_id=job_set_id,
                follow_logs=False,
                on_submitted=launched,
                on_line=forward,
                timeout=timeout,
            )
        return PipesClientCompletedInvocation(session, metadata=run.metadata())
