"""Resource amounts on the pages, in units people read."""

from __future__ import annotations

import pytest

from armada_server.web.units import parsed, readable


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 8000, "8 CPU"),
        ("cpu", 500, "500m CPU"),
        ("cpu", 1500, "1.5 CPU"),
        ("cpu", 1450, "1.45 CPU"),
        ("cpu", 0, "0 CPU"),
        ("memory", 16 * 2**30, "16 GiB"),
        ("memory", 1536 * 2**20, "1.5 GiB"),
        ("memory", 64 * 2**20, "64 MiB"),
        ("memory", 3 * 2**10, "3 KiB"),
        ("memory", 512, "512 B"),
        ("ephemeral-storage", 2**40, "1 TiB"),
        ("hugepages-2Mi", 2 * 2**20, "2 MiB"),
        ("nvidia.com/gpu", 2, "2 nvidia.com/gpu"),
    ],
)
def test_amounts_read_as_people_write_them(resource: str, amount: int, text: str) -> None:
    assert readable(resource, amount) == text


def test_a_node_figure_is_read_as_the_scheduler_counts_it() -> None:
    assert parsed("cpu", "8") == 8000 and parsed("cpu", "250m") == 250
    assert parsed("memory", "16Gi") == 16 * 2**30
    assert parsed("memory", "lots") is None  # shown as the executor wrote it
