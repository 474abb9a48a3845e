"""`ArmadaHook`: an Airflow connection of type ``armada`` turned into an armada_core client.

The hook also maps the operator's waiting options onto the task lifecycle's one wait
(`armada_core.client.lifecycle.wait`, and `wait_async` in the triggerer), so the worker
(non-deferrable mode) and the triggerer wait identically and return the result payload every
integration returns (`armada_core.client.lifecycle.result_payload`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from armada_core.client import (
    ArmadaClient,
    AsyncArmadaClient,
    ConnectionConfig,
    WatchOptions,
)
from armada_core.client.lifecycle import WaitSettings, wait, wait_async

DEFAULT_PORT = 50051
DEFAULT_JOB_URL_TEMPLATE = "http://localhost:8080/jobs/{job_id}"

_TRUE = ("1", "true", "yes", "on")
_KILLED = re.compile(r"Airflow task killed \(try (\d+)\)")


def kill_reason(try_number: int | None) -> str:
    """The cancel reason of the jobs a killed try cancels. It names the try, so a later try
    that reattached to the jobs before the kill reached the server (a deferred task cleared:
    the triggerer cancels while the next try starts) recognises the kill as not its own."""
    return (
        "Airflow task killed" if try_number is None else f"Airflow task killed (try {try_number})"
    )


def killed_by_try(cancel_reason: str) -> int | None:
    """The try whose kill cancelled a job, from the job's cancel reason (see `kill_reason`)."""
    match = _KILLED.fullmatch(cancel_reason)
    return int(match.group(1)) if match else None


class ConnectionNotDefined(AirflowFailException):
    """The task's ``armada_conn_id`` names a connection Airflow does not know (and not the
    default one, which falls back to the environment's defaults). The task fails without a
    retry: only someone creating the connection helps."""

    def __init__(self, conn_id: str) -> None:
        super().__init__(
            f"Airflow connection {conn_id!r} is not defined; create it with: airflow connections "
            f"add {conn_id} --conn-type armada --conn-host HOST --conn-port {DEFAULT_PORT} "
            f"(or set AIRFLOW_CONN_{conn_id.upper()})"
        )
        self.conn_id = conn_id


def _pem(value: str | None) -> bytes | None:
    """PEM text as given, or the contents of the file it names."""
    if not value:
        return None
    if "-----BEGIN" in value:
        return value.encode()
    return Path(value).expanduser().read_bytes()


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() in _TRUE


def config_from_connection(conn: Connection) -> ConnectionConfig:
    """How to reach Armada, from an ``armada`` connection.

    host/port give the address (port 50051 by default); login + password give basic
    authentication, the ``token`` extra (or a password without a login) a bearer token; the
    extras ``tls``, ``ca_cert``, ``client_cert``, ``client_key``, ``timeout``,
    ``logs_address`` and ``channel_options`` (a JSON object or list of pairs) the rest.
    """
    extra = conn.extra_dejson or {}
    host = conn.host or "localhost"
    if "://" in host:  # tolerate "grpc://host" or "https://host" in the host field
        scheme, host = host.split("://", 1)
        if scheme in ("https", "grpcs"):
            extra = {**extra, "tls": extra.get("tls", True)}
    address = host if ":" in host.rsplit("]", 1)[-1] else f"{host}:{conn.port or DEFAULT_PORT}"
    settings: dict[str, Any] = {"address": address}
    root = _pem(extra.get("ca_cert"))
    if _flag(extra.get("tls", False)) or root is not None:
        settings.update(
            tls=True,
            root_certificates=root,
            certificate_chain=_pem(extra.get("client_cert")),
            private_key=_pem(extra.get("client_key")),
        )
    token = extra.get("token")
    if token:
        settings["token"] = token
    elif conn.login:
        settings.update(username=conn.login, password=conn.password or "")
    elif conn.password:
        settings["token"] = conn.password
    if extra.get("timeout") not in (None, ""):
        settings["timeout"] = float(extra["timeout"])
    if extra.get("logs_address"):
        settings["logs_address"] = extra["logs_address"]
    options = extra.get("channel_options")
    if isinstance(options, str) and options.strip():
        options = json.loads(options)
    if options:
        pairs = options.items() if isinstance(options, Mapping) else options
        settings["options"] = tuple((str(k), v) for k, v in pairs)
    return ConnectionConfig(**settings)


class ArmadaHook(BaseHook):
    """Connects to an Armada server through an Airflow connection of type ``armada``."""

    conn_name_attr = "armada_conn_id"
    default_conn_name = "armada_default"
    conn_type = "armada"
    hook_name = "Armada"

    def __init__(self, armada_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.armada_conn_id = armada_conn_id

    # --- connection -------------------------------------------------------------------------

    def get_connection_config(self) -> ConnectionConfig:
        """How to reach Armada: the connection's settings (`config_from_connection`), or the
        environment's when the default connection is not defined (`_without_connection`)."""
        try:
            conn = self.get_connection(self.armada_conn_id)
        except AirflowNotFoundException:
            return self._without_connection()
        return config_from_connection(conn)

    async def aget_connection_config(self) -> ConnectionConfig:
        """The async lookup: the sync one would block the triggerer's event loop."""
        try:
            conn = await self.aget_connection(self.armada_conn_id)
        except AirflowNotFoundException:
            return self._without_connection()
        return config_from_connection(conn)

    def _without_connection(self) -> ConnectionConfig:
        """No connection of that id. The default one falls back to armada_core's environment
        defaults (ARMADA_URL, else localhost:50051; ARMADA_TLS, ARMADA_TOKEN, ...), so a first
        DAG runs against a local server with nothing to set up; any other id is a mistake
        that fails the task (`ConnectionNotDefined`)."""
        if self.armada_conn_id != self.default_conn_name:
            raise ConnectionNotDefined(self.armada_conn_id) from None
        config = ConnectionConfig.from_env()
        self.log.warning(
            "Airflow connection %r is not defined: connecting to %s (ARMADA_URL, else "
            "localhost:50051)%s; to connect elsewhere: airflow connections add %s "
            "--conn-type armada --conn-host HOST --conn-port PORT",
            self.armada_conn_id,
            config.address,
            " with TLS" if config.tls else "",
            self.armada_conn_id,
        )
        return config

    def get_conn(self) -> ArmadaClient:
        """A blocking client; close it (or use it as a context manager) when done."""
        return ArmadaClient(config=self.get_connection_config())

    async def aget_client(self) -> AsyncArmadaClient:
        """An asyncio client bound to the running loop."""
        return AsyncArmadaClient(config=await self.aget_connection_config())

    def job_url_template(self) -> str:
        """The connection's ``job_url_template`` extra, or the default."""
        try:
            extra = self.get_connection(self.armada_conn_id).extra_dejson or {}
        except Exception:  # no connection: links still work with the default
            extra = {}
        return extra.get("job_url_template") or DEFAULT_JOB_URL_TEMPLATE

    def test_connection(self) -> tuple[bool, str]:
        """For the UI's Test button: the Submit service's health."""
        try:
            with self.get_conn() as client:
                client.health("Submit")
        except Exception as e:  # the UI shows the message
            return False, str(e)
        return True, "Connection successfully tested"

    # --- jobs -------------------------------------------------------------------------------

    def cancel(self, queue: str, job_set_id: str, job_ids: Sequence[str], reason: str) -> None:
        with self.get_conn() as client:
            client.cancel_jobs(queue, job_set_id, list(job_ids), reason=reason)

    async def acancel(
        self, queue: str, job_set_id: str, job_ids: Sequence[str], reason: str
    ) -> None:
        async with await self.aget_client() as client:
            await client.cancel_jobs(queue, job_set_id, list(job_ids), reason=reason)

    async def await_jobs(
        self,
        queue: str,
        job_set_id: str,
        job_ids: Sequence[str],
        *,
        log: logging.Logger | Any,
        stream_logs: bool = True,
        log_interval: float = 5.0,
        poll_interval: float = 5.0,
        member_labels: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Wait until every job has ended (the lifecycle's `wait_async`: events, log lines,
        waiting reasons, status checks) and return the result payload. Cancelling the
        awaiting task stops it and leaves the jobs running (a triggerer restart); the kill
        paths cancel them."""
        async with await self.aget_client() as client:
            end = await wait_async(
                client,
                queue,
                job_set_id,
                job_ids,
                log=log.info,
                warn=log.warning,
                labels=_labels(job_ids, member_labels),
                settings=wait_settings(stream_logs, log_interval, poll_interval),
            )
        return end.payload()

    def wait_jobs(
        self,
        queue: str,
        job_set_id: str,
        job_ids: Sequence[str],
        *,
        log: logging.Logger | Any,
        stream_logs: bool = True,
        log_interval: float = 5.0,
        poll_interval: float = 5.0,
        member_labels: Sequence[str] | None = None,
        client: ArmadaClient | None = None,
    ) -> dict[str, Any]:
        """`await_jobs` for the worker (the lifecycle's blocking `wait`)."""
        if client is None:
            with self.get_conn() as own:
                return self.wait_jobs(
                    queue,
                    job_set_id,
                    job_ids,
                    log=log,
                    stream_logs=stream_logs,
                    log_interval=log_interval,
                    poll_interval=poll_interval,
                    member_labels=member_labels,
                    client=own,
                )
        return wait(
            client,
            queue,
            job_set_id,
            job_ids,
            log=log.info,
            warn=log.warning,
            labels=_labels(job_ids, member_labels),
            settings=wait_settings(stream_logs, log_interval, poll_interval),
        ).payload()


def wait_settings(stream_logs: bool, log_interval: float, poll_interval: float) -> WaitSettings:
    """The operator's options as the lifecycle's: log lines every `log_interval` s, job
    details (waiting reasons, status check) and status polling while the event stream is down
    every `poll_interval` s."""
    return WaitSettings(
        stream_logs=stream_logs,
        log_interval=log_interval,
        check_interval=poll_interval,
        watch=WatchOptions(poll_interval=poll_interval),
    )


def _labels(job_ids: Sequence[str], member_labels: Sequence[str] | None) -> dict[str, str]:
    """The operator's labels (`lifecycle.job_labels`); `job <id>` each without them."""
    return dict(zip(job_ids, member_labels or [f"job {j}" for j in job_ids], strict=True))
