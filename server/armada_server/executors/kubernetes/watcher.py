"""Following the executor's pods: list once, then watch from that resourceVersion.

The `kubernetes` client is synchronous, so the watch runs on its own thread and hands every
event to a callback (the backend moves it onto its event loop). Each watch request is bounded
by `timeout` and renewed from the last resourceVersion seen (bookmarks included); when the API
server answers 410 Gone (the version is too old to resume from), the pods are listed afresh
and the whole list is handed over, so that nothing that happened in between is missed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from armada_server.executors.kubernetes.api import ApiException, client, watch

log = logging.getLogger("armada_server.executor.kubernetes")

OnEvent = Callable[[str, Any], None]  # ("ADDED" | "MODIFIED" | "DELETED", V1Pod)
OnList = Callable[[list[Any], str], None]  # every pod there is, and the list's version


class PodWatcher:
    """Watches pods matching a label selector, in all namespaces or in one."""

    def __init__(
        self,
        core: client.CoreV1Api,
        selector: str,
        namespace: str | None,
        *,
        on_event: OnEvent,
        on_list: OnList,
        timeout: int = 300,
        retry_delay: float = 1.0,
    ) -> None:
        self.core = core
        self.selector = selector
        self.namespace = namespace
        self.on_event = on_event
        self.on_list = on_list
        self.timeout = timeout
        self.retry_delay = retry_delay
        self.resource_version = ""
        self.relists = 0
        self._stopped = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="pod-watcher")

    def list(self) -> list[Any]:
        """Every matching pod now; the watch will resume after this listing."""
        if self.namespace is None:
            result = self.core.list_pod_for_all_namespaces(label_selector=self.selector)
        else:
            result = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        self.resource_version = result.metadata.resource_version
        return list(result.items)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopped.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # best effort on the way out
                response.shutdown()  # unblocks the thread's read at once
        self._thread.join(timeout)

    def _call(self, **kwargs: Any) -> Any:
        if self.namespace is None:
            response = self.core.list_pod_for_all_namespaces(**kwargs)
        else:
            response = self.core.list_namespaced_pod(self.namespace, **kwargs)
        self._response = response
        return response

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._watch_once()
            except ApiException as e:
                if self._stopped.is_set():
                    return
                if e.status == 410:
                    log.info("pod watch expired at %s: listing again", self.resource_version)
                    self._relist()
                    continue
                log.warning("pod watch failed: %s %s", e.status, e.reason)
                self._stopped.wait(self.retry_delay)
            except Exception as e:
                if self._stopped.is_set():
                    return
                log.warning("pod watch interrupted: %s", e)
                self._stopped.wait(self.retry_delay)

    def _relist(self) -> None:
        try:
            pods = self.list()
        except Exception as e:
            log.warning("listing pods failed: %s", e)
            self._stopped.wait(self.retry_delay)
            return
        self.relists += 1
        self.on_list(pods, self.resource_version)

    def _watch_once(self) -> None:
        w = watch.Watch(return_type="V1Pod")
        stream = w.stream(
            self._call,
            label_selector=self.selector,
            resource_version=self.resource_version,
            timeout_seconds=self.timeout,
            allow_watch_bookmarks=True,
            _request_timeout=(30, self.timeout + 30),
        )
        for event in stream:
            if self._stopped.is_set():
                w.stop()
                break
            raw = event.get("raw_object") or {}
            version = (raw.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = version
            if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                self.on_event(event["type"], event["object"])
