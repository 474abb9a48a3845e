"""A workload from a server's own history: the jobs it still keeps that were submitted in a
window, with their real runtimes, from its export (GET /api/v1/history, web/history.py),
replayed as they were submitted on the cluster its executors report."""

from __future__ import annotations

import base64
import json
import statistics
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import astuple
from datetime import datetime
from typing import Any

from armada_server.config import NodeGroup, TaintConfig
from armada_server.executors.nodes import GPU
from armada_server.simulation.workload import Arrival, Gang, QueueSpec, RoleSpec, Workload

DEFAULT_RUNTIME = 60.0  # for jobs that never ran, in a queue where none did
HOSTNAME = "kubernetes.io/hostname"


class HistoryError(ValueError):
    """The server's history could not be read."""


def _get(url: str, token: str | None) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        if ":" in token:
            basic = base64.b64encode(token.encode()).decode()
            request.add_header("Authorization", f"Basic {basic}")
        else:
            request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            body: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")[:500]
        raise HistoryError(f"{url}: HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise HistoryError(f"{url}: {e}") from None
    return body


def _node_groups(nodes: Sequence[Mapping[str, Any]]) -> tuple[NodeGroup, ...]:
    """Identical nodes as one group each (names and hostnames aside)."""
    Shape = tuple[str, str, int, tuple[tuple[str, str], ...], tuple[TaintConfig, ...]]
    shapes: Counter[Shape] = Counter()
    for node in nodes:
        alloc = node.get("allocatable", {})
        labels = tuple(sorted((k, v) for k, v in node.get("labels", {}).items() if k != HOSTNAME))
        taints = tuple(
            TaintConfig(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
            for t in node.get("taints", [])
        )
        cpu, memory, gpus = alloc.get("cpu", "0"), alloc.get("memory", "0"), int(alloc.get(GPU, 0))
        shapes[(cpu, memory, gpus, labels, taints)] += 1
    return tuple(
        NodeGroup(count, cpu, memory, gpus, dict(labels), taints)
        for (cpu, memory, gpus, labels, taints), count in sorted(
            shapes.items(), key=lambda kv: (kv[0][:4], [astuple(t) for t in kv[0][4]])
        )
    )


def _runtimes(jobs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each queue's median runtime, for its jobs that never ran."""
    known: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        if job.get("runtime") is not None:
            known[job["queue"]].append(float(job["runtime"]))
    return {q: statistics.median(v) for q, v in known.items()}


def _arrival(
    members: Sequence[Mapping[str, Any]], start: datetime, medians: Mapping[str, float]
) -> Arrival:
    """One job, or one gang or pod group of `members` (its first member speaks for it)."""
    first = members[0]
    requests = first["requests"]
    runtimes = [float(m["runtime"]) for m in members if m.get("runtime") is not None]
    gang = first.get("gang") or {}
    roles: dict[str, RoleSpec] = {}
    if "role" in gang:
        counts = Counter(m["gang"]["role"] for m in members)
        for m in members:
            role = m["gang"]["role"]
            roles.setdefault(
                role, RoleSpec(role, int(m["gang"].get("role_minimum", 1)), counts[role])
            )
    lifetime = first.get("lifetime")
    return Arrival(
        name=str(gang.get("id") or first["id"]),
        at=(datetime.fromisoformat(first["submitted"]) - start).total_seconds(),
        queue=first["queue"],
        runtime=max(runtimes) if runtimes else medians.get(first["queue"], DEFAULT_RUNTIME),
        job_set=first["job_set"],
        cpu=requests.get("cpu", "0"),
        memory=requests.get("memory", "0"),
        gpus=int(requests.get(GPU, "0")),
        priority_class=first.get("priority_class") or None,
        lifetime=float(lifetime) if lifetime else None,
        gang=Gang(
            len(members),
            int(gang["minimum"]) if "minimum" in gang else None,
            gang.get("uniformity_label"),
            int(gang["max_hops"]) if "max_hops" in gang else None,
        )
        if gang and not roles
        else None,
        roles=tuple(roles.values()),
    )


def workload_from_export(body: Mapping[str, Any], source: str) -> Workload:
    """The workload of an export's content."""
    jobs = body.get("jobs", [])
    if not jobs:
        raise HistoryError(f"{source}: no jobs in the window (kept since {body.get('kept_since')})")
    start = datetime.fromisoformat(jobs[0]["submitted"])
    medians = _runtimes(jobs)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for job in jobs:
        gang_id = (job.get("gang") or {}).get("id")
        groups.setdefault(f"{job['queue']}/{gang_id}" if gang_id else job["id"], []).append(job)
    arrivals = sorted(
        (_arrival(members, start, medians) for members in groups.values()), key=lambda a: a.at
    )
    queues = tuple(
        QueueSpec(q["name"], float(q.get("priority_factor") or 1.0)) for q in body["queues"]
    )
    return Workload(queues, tuple(arrivals), _node_groups(body.get("nodes", [])), None, source)


def fetch_history(url: str, since: float, *, token: str | None = None) -> Workload:
    """The jobs the server at `url` (its web address) keeps from the last `since` seconds."""
    address = f"{url.rstrip('/')}/api/v1/history?since={since:g}"
    return workload_from_export(_get(address, token), f"{url} history, last {since:g} s")
