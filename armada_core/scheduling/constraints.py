"""Static node constraints: whether a job may run on a node at all, ignoring free resources.

Shared by both implementations so that they agree on Kubernetes matching semantics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .model import Job, Node, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration
from .topology import HOSTNAME

#: Taint effects that keep new pods off a node; PreferNoSchedule is only a preference.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def taints_tolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> bool:
    for taint in taints:
        if taint.effect not in BLOCKING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return False
    return True


def _as_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        have, bound = _as_int(value), _as_int(req.values[0])
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    raise ValueError(f"unknown node selector operator {op!r}")


def affinity_matches(terms: tuple[NodeSelectorTerm, ...], labels: Mapping[str, str]) -> bool:
    """Kubernetes semantics: no terms means no constraint; an empty term matches nothing."""
    if not terms:
        return True
    for term in terms:
        if term.match_expressions and all(
            requirement_matches(r, labels) for r in term.match_expressions
        ):
            return True
    return False


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def node_admits(job: Job, node: Node) -> bool:
    """True when nothing but free resources could keep ``job`` off ``node``."""
    return (
        not node.cordoned
        and node.id != job.avoid_node
        and selector_matches(job.node_selector, node.labels)
        and taints_tolerated(node.taints, job.tolerations)
        and affinity_matches(job.affinity, node.labels)
    )


def node_order(
    nodes: Iterable[Node], uniformity_labels: Iterable[str | None], topology: Sequence[str] = ()
) -> list[Node]:
    """Nodes in tie-break order: by the values of the topology levels (widest first), then
    of the labels gangs must be uniform on, then id.

    Best fit breaks ties (equally free nodes, typically empty ones) by this order, so small
    jobs fill one rack before starting the next and whole racks stay free for gangs. Ordered
    by id alone, ties would spread them over every rack when racks interleave in id order.
    """
    labels = sorted({label for label in uniformity_labels if label is not None})
    levels = [level for level in topology if level != HOSTNAME]
    if not labels and not levels:
        return sorted(nodes, key=lambda n: n.id)
    return sorted(
        nodes,
        key=lambda n: (
            tuple(n.labels.get(k, "") for k in levels),
            tuple(n.labels.get(k, "") for k in labels),
            n.id,
        ),
    )
