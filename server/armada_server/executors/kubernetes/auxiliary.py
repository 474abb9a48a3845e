"""A run's auxiliary objects in the cluster: the services and ingresses of its pod.

They are created once the pod exists (each names the pod as its owner, see exposure.py) and
deleted with it; after a restart, those whose run is no longer held are removed. Every one
carries the executor's and the run's labels, which is how they are found again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.api import ApiException, ClusterApi, error_message
from armada_server.executors.kubernetes.exposure import exposure
from armada_server.executors.kubernetes.runs import Run
from armada_server.executors.kubernetes.settings import KubernetesSettings

log = logging.getLogger("armada_server.executor.kubernetes")


class AuxiliaryObjects:
    """Creates and deletes the services and ingresses of this executor's runs."""

    def __init__(self, cluster: ClusterApi, executor_id: str, settings: KubernetesSettings) -> None:
        self.cluster = cluster
        self.executor_id = executor_id
        self.settings = settings

    async def create(self, run: Run) -> dict[int, str]:
        """Create the run's services and ingresses; returns its ingress addresses (they are
        the run's `addresses` from now on)."""
        assert run.lease is not None
        wanted = exposure(run.lease, self.executor_id, self.settings, run.uid)
        run.addresses = dict(wanted.addresses)
        core, networking = self.cluster.core, self.cluster.networking
        for service in wanted.services:
            await self._create(core.create_namespaced_service, run, service)
        for ingress in wanted.ingresses:
            await self._create(networking.create_namespaced_ingress, run, ingress)
        return dict(wanted.addresses)

    async def _create(self, create: Callable[..., Any], run: Run, body: dict[str, Any]) -> None:
        try:
            await self.cluster.call(create, run.namespace, body)
        except ApiException as e:
            if e.status != 409:
                log.warning(
                    "run %s: could not create %s %s: %s",
                    run.run_id,
                    body["kind"],
                    body["metadata"]["name"],
                    error_message(e),
                )

    async def delete(self, run: Run) -> None:
        """Delete the run's services and ingresses."""
        await self._delete_matching(run.namespace, lb.of_run(self.executor_id, run.run_id))

    async def remove_strays(self, live: set[str]) -> None:
        """Services and ingresses of runs not in `live` (their pod went while the executor
        was down)."""
        await self._delete_matching(
            self.settings.namespace,
            lb.selector(**{lb.EXECUTOR: self.executor_id, lb.AUXILIARY: "true"}),
            keep=lambda obj: (obj.metadata.labels or {}).get(lb.RUN_ID) in live,
        )

    async def _delete_matching(
        self, namespace: str | None, selector: str, keep: Callable[[Any], bool] = lambda _: False
    ) -> None:
        core, networking = self.cluster.core, self.cluster.networking
        kinds = (
            (
                core.list_namespaced_service,
                core.list_service_for_all_namespaces,
                core.delete_namespaced_service,
            ),
            (
                networking.list_namespaced_ingress,
                networking.list_ingress_for_all_namespaces,
                networking.delete_namespaced_ingress,
            ),
        )
        for list_in, list_all, delete in kinds:
            try:
                found = await (
                    self.cluster.call(list_in, namespace, label_selector=selector)
                    if namespace
                    else self.cluster.call(list_all, label_selector=selector)
                )
                for obj in found.items:
                    if not keep(obj):
                        with contextlib.suppress(ApiException):
                            await self.cluster.call(
                                delete, obj.metadata.name, obj.metadata.namespace
                            )
            except Exception as e:
                log.warning("could not clean up %s: %s", selector, e)
