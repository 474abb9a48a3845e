"""Creating a run's pod, and what a refusal by the API server means for the run.

A pod that already exists under the run's name is the run's own when it carries the run's id
(the lease came again): the executor carries on with it. Otherwise a refusal ends the run:
as failed when Kubernetes refuses the pod itself (the job's fault), as returned (the lease
goes back, the job is not at fault) for anything else.
"""

from __future__ import annotations

from typing import Any

from armada_core.api import executor_pb2
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.api import ApiException, ClusterApi, error_message
from armada_server.executors.kubernetes.runs import Run

Failed = executor_pb2.RunUpdate.Failed
Returned = executor_pb2.RunUpdate.Returned


class Refused(Exception):
    """The pod was not created: the run ends as `failed` or as `returned`."""

    def __init__(self, *, failed: Failed | None = None, returned: Returned | None = None) -> None:
        super().__init__(failed or returned)
        self.failed = failed
        self.returned = returned


async def create_pod(cluster: ClusterApi, run: Run, manifest: dict[str, Any]) -> Any:
    """The run's pod (V1Pod), created now or earlier for the same run; Refused otherwise."""
    try:
        return await cluster.call(cluster.core.create_namespaced_pod, run.namespace, manifest)
    except ApiException as e:
        return await _after_refusal(cluster, run, e)
    except Exception as e:
        raise Refused(returned=Returned(reason=f"the pod could not be created: {e}")) from None


async def _after_refusal(cluster: ClusterApi, run: Run, e: ApiException) -> Any:
    if e.status == 409:
        try:
            pod = await cluster.call(cluster.core.read_namespaced_pod, run.pod_name, run.namespace)
        except ApiException:
            pod = None
        if pod is not None and (pod.metadata.labels or {}).get(lb.RUN_ID) == run.run_id:
            return pod  # ours already (a repeated lease): carry on with it
        raise Refused(
            returned=Returned(
                reason=f"a pod named {run.pod_name} already exists in {run.namespace}"
            )
        )
    if e.status in (400, 422):
        raise Refused(failed=Failed(reason=f"Kubernetes refused the pod: {error_message(e)}"))
    raise Refused(
        returned=Returned(reason=f"the pod could not be created: {e.status} {error_message(e)}")
    )
