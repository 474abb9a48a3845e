"""Dominant-resource fairness: cost, fair share, demand-capped fair share, decayed usage.

Both implementations call these functions with the same integer inputs, and the fast one
repeats ``CostModel.cost`` element-wise in numpy with the same floating-point operations, so
every comparison between queues comes out identically in the two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .model import CPU, DEFAULT_RESOURCE_ORDER, Queue, QueueFigures, Snapshot

#: Redistribution of unusable fair share stops once less than this is left (upstream's 1%).
ADJUST_TOLERANCE = 0.01
ADJUST_MAX_ROUNDS = 10


def resource_dims(snapshot: Snapshot) -> tuple[str, ...]:
    """The resource dimensions of a cycle, in best-fit order."""
    names: set[str] = set()
    for node in snapshot.nodes:
        names.update(node.capacity)
    for job in snapshot.jobs:
        names.update(job.requests)
    order = snapshot.config.resource_names
    if order is None:
        order = DEFAULT_RESOURCE_ORDER
        known = [n for n in order if n in names]
    else:
        known = list(order)
    # Resources outside the configured order still count, so nothing is over-committed.
    return tuple(known + sorted(names - set(known)))


@dataclass(frozen=True)
class CostModel:
    dims: tuple[str, ...]
    totals: tuple[int, ...]
    multipliers: tuple[float, ...]

    @classmethod
    def build(
        cls, dims: Sequence[str], totals: Sequence[int], multipliers: Mapping[str, float]
    ) -> CostModel:
        return cls(tuple(dims), tuple(totals), tuple(float(multipliers.get(d, 1.0)) for d in dims))

    def cost(self, alloc: Sequence[int]) -> float:
        """DRF cost: the largest multiplier-weighted share of any resource the cluster has."""
        best = 0.0
        for value, total, mult in zip(alloc, self.totals, self.multipliers, strict=True):
            if total > 0:
                share = float(value) * mult / float(total)
                if share > best:
                    best = share
        return best


def fair_shares(weights: Mapping[str, float]) -> dict[str, float]:
    total = 0.0
    for name in sorted(weights):
        total += weights[name]
    return {name: weights[name] / total for name in sorted(weights)}


def adjusted_fair_shares(
    weights: Mapping[str, float], demands: Mapping[str, float]
) -> dict[str, float]:
    """Fair share capped at demand, with what a queue cannot use handed to the others by weight."""
    adjusted = {name: 0.0 for name in sorted(weights)}
    active = sorted(weights)
    unallocated = 1.0
    for _ in range(ADJUST_MAX_ROUNDS):
        total_weight = 0.0
        for name in active:
            total_weight += weights[name]
        if not active or total_weight <= 0.0:
            break
        for name in active:
            adjusted[name] += unallocated * weights[name] / total_weight
        unallocated = 0.0
        still_active = []
        for name in active:
            if adjusted[name] >= demands[name]:
                unallocated += adjusted[name] - demands[name]
                adjusted[name] = demands[name]
            else:
                still_active.append(name)
        active = still_active
        if unallocated < ADJUST_TOLERANCE:
            break
    return adjusted


def protected_queues(
    shares: Mapping[str, float],
    weights: Mapping[str, float],
    demands: Mapping[str, float],
    protected_fraction: float | None,
) -> set[str]:
    """Queues whose running jobs are not evicted this cycle (upstream's protected fraction)."""
    if protected_fraction is None or not weights:
        return set()
    plain = fair_shares(weights)
    adjusted = adjusted_fair_shares(weights, demands)
    protected = set()
    for name in sorted(weights):
        reference = max(adjusted[name], plain[name])
        if reference > 0.0 and shares[name] / reference <= protected_fraction:
            protected.add(name)
    return protected


def usage_offsets(
    decayed_usage: Mapping[str, float],
    current_costs: Mapping[str, float],
    elapsed: float,
    half_life: float | None,
) -> dict[str, float]:
    """Extra cost a queue carries for past usage above its current usage (seeds 003/004 flow)."""
    if half_life is None:
        return {name: 0.0 for name in current_costs}
    beta = 0.5 ** (elapsed / half_life) if half_life > 0 else 0.0
    return {
        name: max(decayed_usage.get(name, 0.0) - current_costs[name], 0.0) * beta
        for name in current_costs
    }


def queue_figures(
    costs: CostModel,
    weights: Mapping[str, float],
    held: Mapping[str, Sequence[int]],
    demands: Mapping[str, float],
    decayed_usage: Mapping[str, float],
    offsets: Mapping[str, float],
) -> dict[str, QueueFigures]:
    """The figures of the active queues (those in ``weights``) that a cycle reports: both
    implementations hand in what they weighed the queues with (``held``: what each held as
    the cycle began, in ``costs``' dimensions)."""
    if not weights:
        return {}
    plain = fair_shares(weights)
    adjusted = adjusted_fair_shares(weights, demands)
    return {
        name: QueueFigures(
            weight=weights[name],
            fair_share=plain[name],
            adjusted_fair_share=adjusted[name],
            share=costs.cost(held[name]),
            demand=demands[name],
            held={d: int(v) for d, v in zip(costs.dims, held[name], strict=True) if v},
            decayed_usage=decayed_usage.get(name, 0.0),
            usage_offset=offsets.get(name, 0.0),
        )
        for name in sorted(weights)
    }


def decay_usage(previous: float, current_cost: float, elapsed: float, half_life: float) -> float:
    """Next decayed usage: converges to the current cost, never below it."""
    beta = 0.5 ** (elapsed / half_life) if half_life > 0 else 0.0
    return current_cost + max(previous - current_cost, 0.0) * beta


def lifetime_weights(
    active: Mapping[str, float], queues: Iterable[Queue], all_queues: bool
) -> dict[str, float]:
    """The weights whose fair shares the two lifetime limits measure queues against: the
    active queues' (``active``), or with ``all_queues`` every queue's, as seed 004 defines
    fair share ("N is the total number of queues"), so that a queue alone meets them too."""
    if not all_queues:
        return dict(active)
    return {q.name: q.weight for q in queues}


def overshoot_limits(weights: Mapping[str, float], overshoot: float) -> dict[str, float]:
    """Cost each active queue's infinite-lifetime jobs may reach: (1 + overshoot) times its
    plain fair share (seed 004, "Scheduling constraints")."""
    return {name: share * (1.0 + overshoot) for name, share in fair_shares(weights).items()}


def infinite_lifetime(preemptible_class: bool, lifetime: float | None) -> bool:
    """Never taken back once running: a class that is not preemptible and no finite lifetime
    (None, or a lifetime that never passes)."""
    return not preemptible_class and (lifetime is None or not lifetime < math.inf)


#: Charges are capped here (thousandths of a resource-minute), so that absurd lifetimes stay
#: integers; no budget is that large.
MAX_CHARGE = 2**62

#: Byte-counted resources, weighed per GiB in the excess-flow budget.
_BYTES = frozenset({"memory", "ephemeral-storage", "storage"})


def _budget_unit(dim: str) -> float:
    if dim == CPU:
        return 1000.0  # milli-CPU to cores
    if dim in _BYTES or dim.startswith("hugepages-"):
        return float(2**30)
    return 1.0


def weighted_request(
    dims: Sequence[str], request: Sequence[int], weights: Mapping[str, float]
) -> float:
    """Seed 004's resource usage, ``CPU + w_GPU * GPU + w_RAM * RAM``: the request in CPU
    cores' worth, each unit (core, GiB, device) weighed by ``weights`` (cpu 1, others 0 by
    default). Both implementations call this on the same vector, so charges agree exactly."""
    total = 0.0
    for dim, value in zip(dims, request, strict=True):
        if value:
            weight = float(weights.get(dim, 1.0 if dim == CPU else 0.0))
            if weight:
                total += float(value) / _budget_unit(dim) * weight
    return total


def budget_charge(preemptible_class: bool, lifetime: float | None, weighted: float) -> int:
    """What a job placed above its queue's fair share takes from the excess-flow budget:
    lifetime in minutes times weighted request, in thousandths of a resource-minute rounded
    up (integers, so that sums are exact whatever their order). Zero for jobs that are
    preemptible from the start (a preemptible class, lifetime 0) and for infinite lifetimes
    (limited by the overshoot instead)."""
    if preemptible_class or lifetime is None or not 0.0 < lifetime < math.inf:
        return 0
    charge = lifetime / 60.0 * weighted * 1000.0
    return math.ceil(charge) if charge < MAX_CHARGE else MAX_CHARGE


def budget_units(budget: float | None) -> int | None:
    """The excess-flow budget in thousandths of a resource-minute (an integer x is within a
    budget b exactly when x <= floor(b)); None: no budget."""
    if budget is None:
        return None
    return math.floor(budget * 1000.0)


def water_fill(weights: Mapping[str, float], demands: Mapping[str, float]) -> dict[str, float]:
    """Exact weighted max-min allocation of a unit resource; used to check the scheduler."""
    alloc = {name: 0.0 for name in weights}
    remaining = 1.0
    active = {name for name in weights if demands[name] > 0}
    while active and remaining > 1e-12:
        total_weight = sum(weights[n] for n in active)
        level = min((demands[n] - alloc[n]) / weights[n] for n in active)
        step = min(level, remaining / total_weight)
        for name in active:
            alloc[name] += step * weights[name]
        remaining -= step * total_weight
        active = {n for n in active if demands[n] - alloc[n] > 1e-12}
    return alloc


def sum_vectors(vectors: Iterable[Sequence[int]], width: int) -> list[int]:
    out = [0] * width
    for vec in vectors:
        for i, v in enumerate(vec):
            out[i] += v
    return out
