"""A workload's arrivals as the submission requests a client would send: the simulated
executor reads each job's runtime from its `simulatedDuration` annotation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from armada_core.api import submit_pb2
from armada_core.client.builders import Role, gang_items, job_item, pod_group_items
from armada_core.jobs import annotations as ann
from armada_core.scheduling.model import parse_quantity
from armada_server.executors.nodes import GPU
from armada_server.executors.simulated import DURATION
from armada_server.simulation.workload import Arrival


def _pod(cpu: str, memory: str, gpus: int) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory}
    if gpus:
        resources[GPU] = str(gpus)
    return {
        "containers": [
            {
                "name": "main",
                "image": "simulated",
                "resources": {"requests": resources, "limits": resources},
            }
        ]
    }


def items_of(arrival: Arrival) -> list[submit_pb2.JobSubmitRequestItem]:
    """The request items of one arrival: one job, a gang's members, or a pod group's."""
    annotations = {DURATION: f"{arrival.runtime:g}"}
    if arrival.lifetime is not None:
        annotations[ann.LIFETIME] = f"{arrival.lifetime:g}"
    if arrival.roles or arrival.gang is not None:
        return _members(arrival, annotations)
    item = submit_pb2.JobSubmitRequestItem()
    item.CopyFrom(_plain(arrival.cpu, arrival.memory, arrival.gpus, arrival.priority_class))
    item.client_id = arrival.name
    item.annotations.update(annotations)
    return [item]


def _members(
    arrival: Arrival, annotations: dict[str, str]
) -> list[submit_pb2.JobSubmitRequestItem]:
    """A gang's or a pod group's items."""
    common: dict[str, Any] = {
        "priority_class": arrival.priority_class,
        "annotations": annotations,
        "check": False,  # the server's own validation checks every item
    }
    pod = _pod(arrival.cpu, arrival.memory, arrival.gpus)
    if arrival.roles:
        roles = [Role(r.name, pod, r.minimum, r.maximum) for r in arrival.roles]
        return pod_group_items(roles, gang_id=arrival.name, client_id=arrival.name, **common)
    g = arrival.gang
    assert g is not None  # items_of sends only gangs and pod groups here
    return gang_items(
        pod,
        replicas=g.cardinality,
        gang_id=arrival.name,
        minimum_cardinality=g.minimum,
        node_uniformity_label=g.uniformity_label,
        max_hops=g.max_hops,
        client_id=arrival.name,
        **common,
    )


@lru_cache(maxsize=1024)
def _plain(
    cpu: str, memory: str, gpus: int, priority_class: str | None
) -> submit_pb2.JobSubmitRequestItem:
    """A plain job of this shape without its name and annotations: a day's 100,000
    arrivals have a few dozen shapes, and building each item from its pod spec was a tenth
    of a submission's time. Callers copy it."""
    return job_item(_pod(cpu, memory, gpus), priority_class=priority_class, check=False)


@dataclass(frozen=True)
class Demand:
    """What one job asks of a node, in the scheduler's integer units (milli-CPU, bytes)."""

    queue: str
    requests: Mapping[str, int]


def demand_of(arrival: Arrival) -> Demand:
    requests = {
        "cpu": parse_quantity(arrival.cpu, milli=True),
        "memory": parse_quantity(arrival.memory),
    }
    if arrival.gpus:
        requests[GPU] = arrival.gpus * 1000
    return Demand(arrival.queue, requests)
