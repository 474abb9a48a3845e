"""The one door to the `kubernetes` client library, and the executor's way of calling it.

The library ships no type information: it is imported here only, and everything it returns
(V1Pod, V1Node, ...) is `Any` to the type checker; the rest of the Kubernetes executor reads
those objects as the API documents them. The library is synchronous, so `ClusterApi.call`
runs each call on a thread pool of its own, off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeAlias, TypeVar

from kubernetes import client, config, watch  # type: ignore[import-untyped]  # no stubs exist

__all__ = [
    "ApiException",
    "ClusterApi",
    "ConfigException",
    "client",
    "error_message",
    "load_api_client",
    "watch",
]

T = TypeVar("T")

ApiException: TypeAlias = client.ApiException
ConfigException: TypeAlias = config.ConfigException


def error_message(e: ApiException) -> str:
    """What the API server said, from the Status it answered with."""
    try:
        return str(json.loads(e.body or "{}").get("message") or e.reason)
    except (ValueError, AttributeError):
        return str(e.reason)


def load_api_client(
    kubeconfig: str | None = None, *, context: str | None = None, in_cluster: bool = False
) -> client.ApiClient:
    """An API client from the pod's service account, or from a kubeconfig file (the
    default one when `kubeconfig` is None)."""
    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    return client.ApiClient(configuration)


class ClusterApi:
    """The core and networking APIs of one cluster, called off the event loop."""

    def __init__(self, api: client.ApiClient, *, threads: int) -> None:
        self.core = client.CoreV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="kubernetes-api")

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on the pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
