"""Named workload generators: the same name, parameters and seed give the same workload.

steady      a day on a busy cluster: `jobs` arrivals (Poisson) over `hours` from `queues`
            queues of mixed priority factors, shapes of 1 to 16 CPU (4 GiB per CPU), a few
            gangs, runtimes drawn so that the cluster is about `load` busy
latecomer   one queue alone on the cluster for `alone` hours (runs of `runtime` seconds,
            more than the cluster holds), then a second queue of equal weight arrives
            with as much work: how fast the newcomer gets its share
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from armada_server.config import NodeGroup
from armada_server.simulation.workload import (
    Arrival,
    Gang,
    QueueSpec,
    Workload,
    WorkloadError,
)

SHAPES = (1, 2, 4, 8, 16)  # CPUs
SHAPE_WEIGHTS = (30, 25, 20, 15, 10)
FACTORS = (1.0, 1.0, 2.0, 2.0, 5.0)
NODE_CPU = 32


def steady(rng: random.Random, p: Mapping[str, float]) -> Workload:
    nodes, jobs, queues = int(p["nodes"]), int(p["jobs"]), int(p["queues"])
    duration = p["hours"] * 3600
    rate = jobs / duration
    mean_cpu = sum(s * w for s, w in zip(SHAPES, SHAPE_WEIGHTS, strict=True)) / sum(SHAPE_WEIGHTS)
    mean_runtime = p["load"] * nodes * NODE_CPU / (rate * mean_cpu)
    names = [f"q{i:02d}" for i in range(queues)]
    arrivals: list[Arrival] = []
    at = 0.0
    for i in range(jobs):
        at += rng.expovariate(rate)
        if at >= duration:
            break
        cpu = rng.choices(SHAPES, SHAPE_WEIGHTS)[0]
        gang = Gang(4) if rng.random() < 0.01 else None
        arrivals.append(
            Arrival(
                name=f"job-{i}",
                at=round(at, 3),
                queue=rng.choice(names),
                runtime=round(min(rng.expovariate(1 / mean_runtime), 6 * mean_runtime), 1),
                cpu=str(cpu),
                memory=f"{4 * cpu}Gi",
                gang=gang,
            )
        )
    return Workload(
        tuple(QueueSpec(n, FACTORS[i % len(FACTORS)]) for i, n in enumerate(names)),
        tuple(arrivals),
        (NodeGroup(nodes, str(NODE_CPU), f"{8 * NODE_CPU}Gi"),),
        duration,
    )


def latecomer(rng: random.Random, p: Mapping[str, float]) -> Workload:
    nodes, alone, runtime = int(p["nodes"]), p["alone"] * 3600, p["runtime"]
    duration = alone + p["after"] * 3600
    # Enough one-CPU jobs for each queue to keep the whole cluster busy throughout.
    per_queue = int(nodes * NODE_CPU * duration / runtime) + nodes * NODE_CPU
    arrivals = [
        Arrival(f"a-{i}", 0.0, "a", round(runtime * rng.uniform(0.5, 1.5), 1))
        for i in range(per_queue)
    ] + [
        Arrival(f"b-{i}", alone, "b", round(runtime * rng.uniform(0.5, 1.5), 1))
        for i in range(per_queue)
    ]
    return Workload(
        (QueueSpec("a"), QueueSpec("b")),
        tuple(arrivals),
        (NodeGroup(nodes, str(NODE_CPU), f"{8 * NODE_CPU}Gi"),),
        duration,
    )


GENERATORS: dict[
    str, tuple[Callable[[random.Random, Mapping[str, float]], Workload], dict[str, float]]
] = {
    "steady": (steady, {"nodes": 1000, "jobs": 100_000, "queues": 10, "hours": 24, "load": 0.85}),
    "latecomer": (latecomer, {"nodes": 4, "alone": 2, "after": 2, "runtime": 1800}),
}


def generate(spec: str, seed: int = 0) -> Workload:
    """A generated workload from `NAME[,key=value...]`, e.g. `steady,nodes=100,jobs=5000`."""
    name, *settings = spec.split(",")
    if name not in GENERATORS:
        raise WorkloadError(f"generator {name!r}: expected one of {', '.join(GENERATORS)}")
    make, defaults = GENERATORS[name]
    params = dict(defaults)
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or key not in defaults:
            raise WorkloadError(
                f"generator {name}: {setting!r} is not KEY=VALUE with KEY one of "
                f"{', '.join(defaults)}"
            )
        try:
            params[key] = float(value)
        except ValueError:
            raise WorkloadError(f"generator {name}: {key}={value!r} is not a number") from None
        if params[key] <= 0:
            raise WorkloadError(f"generator {name}: {key} must be positive, got {value}")
    workload = make(random.Random(seed), params)
    source = ",".join([name, *(f"{k}={v:g}" for k, v in params.items())])
    return Workload(
        workload.queues,
        workload.arrivals,
        workload.nodes,
        workload.duration,
        f"{source} seed={seed}",
    )
