"""Gang annotations: which jobs must be scheduled together, and how."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from armada_core.jobs import annotations as ann


@dataclass(frozen=True)
class GangSpec:
    """A gang as its members' annotations declare it.

    Between `minimum_cardinality` and `cardinality` members are placed together; members that
    do not fit are failed (seed 000). `node_uniformity_label`, when set, puts every member on
    nodes sharing one value of that label. `max_hops`, when set, bounds the network hops
    between any two members (seed 000's topology-aware scheduling); None: as close as the
    gang fits, which is what the scheduler does for every gang when topology is configured.

    `role` and `role_minimum` make the gang an elastic pod group (seed 002 `Subset`): every
    role's minimum is placed at once, members above it as capacity allows; a role's maximum
    is the number of members submitted with it. Empty role: not a pod group. In a pod group
    `max_hops` bounds each role (seed 004's sub-groups), and `role_max_hops` replaces it for
    the member's role.
    """

    id: str
    cardinality: int
    minimum_cardinality: int
    node_uniformity_label: str = ""
    max_hops: int | None = None
    role: str = ""
    role_minimum: int | None = None
    role_max_hops: int | None = None


class GangAnnotationError(ValueError):
    """Gang annotations that cannot describe a gang; the message names the annotation."""


def gang_of(annotations: Mapping[str, str]) -> GangSpec | None:
    """The gang a job's annotations declare, or None for a job on its own.

    Raises GangAnnotationError for malformed values.
    """
    gang_id = annotations.get(ann.GANG_ID, "")
    keys = (
        ann.GANG_CARDINALITY,
        ann.GANG_MINIMUM_CARDINALITY,
        ann.GANG_NODE_UNIFORMITY_LABEL,
        ann.GANG_MAX_HOPS,
        ann.GANG_ROLE,
        ann.GANG_ROLE_MINIMUM,
        ann.GANG_ROLE_MAX_HOPS,
    )
    if not gang_id:
        stray = [k for k in keys if k in annotations]
        if stray:
            raise GangAnnotationError(f"{stray[0]} is set but {ann.GANG_ID} is not")
        return None
    cardinality = _required_positive_int(annotations, ann.GANG_CARDINALITY)
    minimum = _positive_int(annotations, ann.GANG_MINIMUM_CARDINALITY)
    if minimum is None:
        minimum = cardinality
    if minimum > cardinality:
        raise GangAnnotationError(
            f"{ann.GANG_MINIMUM_CARDINALITY} ({minimum}) is greater than "
            f"{ann.GANG_CARDINALITY} ({cardinality})"
        )
    role, role_minimum = _role(annotations, cardinality)
    role_max_hops = _hops(annotations, ann.GANG_ROLE_MAX_HOPS)
    if role_max_hops is not None and not role:
        raise GangAnnotationError(f"{ann.GANG_ROLE_MAX_HOPS} is set but {ann.GANG_ROLE} is not")
    return GangSpec(
        gang_id,
        cardinality,
        minimum,
        annotations.get(ann.GANG_NODE_UNIFORMITY_LABEL, ""),
        _hops(annotations, ann.GANG_MAX_HOPS),
        role,
        role_minimum,
        role_max_hops,
    )


def _role(annotations: Mapping[str, str], cardinality: int) -> tuple[str, int | None]:
    """gangRole and gangRoleMinimum, set together; a role's minimum replaces the gang's
    minimum cardinality, so the two are not combined."""
    role = annotations.get(ann.GANG_ROLE, "")
    minimum = _positive_int(annotations, ann.GANG_ROLE_MINIMUM)
    if not role:
        if minimum is not None:
            raise GangAnnotationError(f"{ann.GANG_ROLE_MINIMUM} is set but {ann.GANG_ROLE} is not")
        return "", None
    if minimum is None:
        raise GangAnnotationError(
            f"{ann.GANG_ROLE_MINIMUM} is required when {ann.GANG_ROLE} is set"
        )
    if annotations.get(ann.GANG_MINIMUM_CARDINALITY):
        raise GangAnnotationError(
            f"{ann.GANG_MINIMUM_CARDINALITY} cannot be combined with {ann.GANG_ROLE}: each "
            f"role's {ann.GANG_ROLE_MINIMUM} says how many members must run"
        )
    if minimum > cardinality:
        raise GangAnnotationError(
            f"{ann.GANG_ROLE_MINIMUM} ({minimum}) is greater than {ann.GANG_CARDINALITY} "
            f"({cardinality})"
        )
    return role, minimum


def _hops(annotations: Mapping[str, str], key: str) -> int | None:
    """gangMaxHops or gangRoleMaxHops: a whole number, 0 (one node) or more; absent or
    empty: no maximum."""
    raw = annotations.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise GangAnnotationError(
            f"{key} must be a whole number of hops (0 or more), got {raw!r}"
        ) from None
    if value < 0:
        raise GangAnnotationError(f"{key} must be a whole number of hops (0 or more), got {raw!r}")
    return value


def _required_positive_int(annotations: Mapping[str, str], key: str) -> int:
    value = _positive_int(annotations, key)
    if value is None:
        raise GangAnnotationError(f"{key} is required when {ann.GANG_ID} is set")
    return value


def _positive_int(annotations: Mapping[str, str], key: str) -> int | None:
    """The annotation as a positive integer; absent or empty: None."""
    raw = annotations.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise GangAnnotationError(f"{key} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise GangAnnotationError(f"{key} must be a positive integer, got {raw!r}")
    return value
