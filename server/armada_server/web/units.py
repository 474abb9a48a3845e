"""Resource amounts as people read them: "8 CPU", "500m CPU", "16 GiB", "2 nvidia.com/gpu".

Amounts come as the scheduler counts them (cpu in millicores, the rest in base units); bytes
take the largest binary unit they reach, with one decimal when not a whole number of it.
"""

from __future__ import annotations

from armada_core.scheduling import parse_quantity

_BYTES = frozenset({"memory", "ephemeral-storage", "storage"})
_UNITS = (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20))


def _number(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def readable(resource: str, amount: int) -> str:
    """An amount of `resource` (cpu in millicores) for a page."""
    if resource == "cpu":
        if amount % 1000 == 0:
            return f"{amount // 1000} CPU"
        if amount < 1000:
            return f"{amount}m CPU"
        return f"{amount / 1000:.3f}".rstrip("0") + " CPU"  # exact: 1.45 CPU, not 1.4
    if resource in _BYTES or resource.startswith("hugepages-"):
        for unit, size in _UNITS:
            if amount >= size:
                return f"{_number(amount / size)} {unit}"
        return f"{_number(amount / 1024)} KiB" if amount >= 1024 else f"{amount} B"
    return f"{amount} {resource}"


def parsed(resource: str, text: str) -> int | None:
    """A node's figure as the scheduler counts it; None when the executor's is unreadable."""
    try:
        return parse_quantity(text, milli=resource == "cpu")
    except ValueError:
        return None
