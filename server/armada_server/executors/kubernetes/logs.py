"""Container logs of the executor's pods: read from the Kubernetes API while the pod exists,
and from the executor's own archive once it is gone.

Kubernetes deletes a pod's log with the pod, and the executor deletes finished pods (after
`finished_pod_retention`) and stopped ones at once. So just before it deletes a pod the
executor saves every container's log (`archive`); the last `log_retention` runs are kept, each
container's at most `log_max_bytes` (its end), in `log_dir` (surviving executor restarts) or,
without one, in memory. A log asked for after that answers NOT_FOUND.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from armada_server.executors.kubernetes.api import ApiException, ClusterApi
from armada_server.executors.kubernetes.runs import Run
from armada_server.executors.kubernetes.settings import KubernetesSettings
from armada_server.executors.logs import LogQuery, LogUnavailable, parse_time_ns

log = logging.getLogger("armada_server.executor.kubernetes")

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


@dataclass(frozen=True)
class PodLogLine:
    timestamp: str  # as Kubernetes wrote it (RFC 3339, nanoseconds)
    text: str
    ns: int


def parse_log(text: str) -> list[PodLogLine]:
    """Lines of a log read with `timestamps=true` ("<RFC 3339> <line>")."""
    lines: list[PodLogLine] = []
    for raw in text.splitlines():
        stamp, _, rest = raw.partition(" ")
        try:
            ns = parse_time_ns(stamp)
        except ValueError:
            continue  # not a line the kubelet wrote (e.g. a cut first line)
        lines.append(PodLogLine(stamp, rest, ns))
    return lines


def select(lines: Iterable[PodLogLine], query: LogQuery) -> list[PodLogLine]:
    """The lines strictly after `query.since_ns`, the last `query.tail` of them if set."""
    found = [line for line in lines if query.since_ns is None or line.ns > query.since_ns]
    if query.tail is not None:
        found = found[-query.tail :] if query.tail > 0 else []
    return found


class LogArchive:
    """Finished runs' container logs, the newest `retention` runs."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        retention: int = 1000,
        max_bytes: int = 10 * 1024 * 1024,
    ) -> None:
        self.directory = Path(directory) if directory else None
        self.retention = max(retention, 0)
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, dict[str, str] | None] = OrderedDict()  # None: on disk
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            kept = sorted(
                (p for p in self.directory.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime
            )
            for path in kept:
                self._runs[path.name] = None
            self._evict()

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._runs

    def put(self, run_id: str, logs: dict[str, str]) -> None:
        """Keep `logs` (container -> log text with timestamps) for the run."""
        if not _SAFE.match(run_id) or not all(_SAFE.match(c) for c in logs):
            raise ValueError(f"unsafe run or container name in {run_id!r}, {list(logs)}")
        trimmed = {c: self._trim(text) for c, text in logs.items()}
        if self.directory is None:
            self._runs[run_id] = trimmed
        else:
            folder = self.directory / run_id
            folder.mkdir(exist_ok=True)
            for container, text in trimmed.items():
                (folder / f"{container}.log").write_text(text, encoding="utf-8")
            self._runs[run_id] = None
        self._runs.move_to_end(run_id)
        self._evict()

    def get(self, run_id: str, container: str) -> str | None:
        """The container's kept log; None when the run is not kept. A container the run had
        but that never logged reads as ""."""
        if run_id not in self._runs:
            return None
        held = self._runs[run_id]
        if held is not None:
            return held.get(container, "")
        if not _SAFE.match(container):
            return ""
        try:
            assert self.directory is not None
            return (self.directory / run_id / f"{container}.log").read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def _trim(self, text: str) -> str:
        data = text.encode("utf-8", errors="replace")
        if len(data) <= self.max_bytes:
            return text
        cut = data[-self.max_bytes :].decode("utf-8", errors="ignore")
        return cut.partition("\n")[2]  # from the first whole line on

    def _evict(self) -> None:
        while len(self._runs) > self.retention:
            run_id, held = self._runs.popitem(last=False)
            if held is None and self.directory is not None:
                shutil.rmtree(self.directory / run_id, ignore_errors=True)


class PodLogs:
    """The container logs of the executor's runs: read from their pods, kept in the archive
    just before the pods are deleted, and read from there afterwards."""

    def __init__(self, cluster: ClusterApi, settings: KubernetesSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.archive = LogArchive(
            settings.log_dir, retention=settings.log_retention, max_bytes=settings.log_max_bytes
        )

    async def read(self, query: LogQuery, run: Run | None) -> list[PodLogLine]:
        """The lines the query asks for; `run` is the run when the executor still holds it."""
        if query.run_id not in self.archive:
            namespace = (
                run.namespace
                if run is not None
                else (self.settings.namespace or query.namespace or self.settings.default_namespace)
            )
            name = run.pod_name if run is not None else query.pod_name
            try:
                text = await self._read_pod(name, namespace, query.container, tail=query.tail)
            except ApiException as e:
                if e.status == 400:  # the container has not started: nothing logged yet
                    return []
                if e.status != 404:
                    raise
                if query.run_id not in self.archive:  # (or kept meanwhile)
                    raise LogUnavailable(
                        f"pod {namespace}/{name} of run {query.run_id} is gone and this "
                        "executor no longer keeps its log"
                    ) from None
            else:
                return select(parse_log(text or ""), query)
        text = self.archive.get(query.run_id, query.container) or ""
        return select(parse_log(text), query)

    async def keep(self, run: Run) -> None:
        """Archive the pod's logs before it is deleted (Kubernetes deletes them with it)."""
        if run.run_id in self.archive or run.last is None:
            return
        spec = run.last.spec
        names = [c.name for c in [*(spec.init_containers or []), *(spec.containers or [])]]
        logs: dict[str, str] = {}
        for name in names:
            try:
                logs[name] = await self._read_pod(run.pod_name, run.namespace, name) or ""
            except ApiException as e:
                if e.status == 404:
                    return  # gone already: nothing left to keep
                logs[name] = ""  # never started
            except Exception as e:
                log.warning(
                    "could not keep the log of pod %s/%s: %s", run.namespace, run.pod_name, e
                )
                return
        try:
            self.archive.put(run.run_id, logs)
        except (OSError, ValueError) as e:
            log.warning("could not keep the log of pod %s/%s: %s", run.namespace, run.pod_name, e)

    async def _read_pod(
        self, name: str, namespace: str, container: str, *, tail: int | None = None
    ) -> str | None:
        """The container's log with a timestamp on each line, as the API answers."""
        kwargs: dict[str, Any] = {"container": container, "timestamps": True}
        if tail is not None:
            kwargs["tail_lines"] = tail
        text: str | None = await self.cluster.call(
            self.cluster.core.read_namespaced_pod_log, name, namespace, **kwargs
        )
        return text
