"""How the suite is spread over pytest-xdist workers: `scripts/test.sh` runs pytest with
`-n auto`, pyproject.toml's addopts ask for `--dist loadfile`, and tests/conftest.py makes that
mean the scheduling below.

Each test module is one unit of work, run whole by one worker: the deployments a module shares
(module-scoped fixtures) start once, and its tests run in the order they are written. The
modules that run a whole orchestrator deployment (scheduler, API server, daemons and workers as
separate processes) form a single unit: they take turns on one worker rather than starve each
other's heartbeats on a two-core machine.

Units are handed out heaviest first: the deployments, then the modules with slow or end-to-end
tests, then the rest, each group in the order collected. The many short modules come last and
even out the workers' ends, instead of a long module starting while the other worker runs dry.
The workers put their collection in that order (`order`); the controller hands out units in it
(`ModuleScheduling`).

(pytest-xdist's own `--dist loadgroup` cannot express this here: with pytest 9.2 its
`xdist_group` marks are silently ignored, pytest-dev/pytest-xdist#1386.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

DEPLOYMENTS = "deployments"
#: Modules that each start a whole orchestrator deployment, as in their node ids.
DEPLOYMENT_MODULES = frozenset(
    {
        "tests/airflow/test_deployment.py",
        "tests/dagster/test_deployment.py",
        "tests/prefect/test_deployment.py",
    }
)
#: Marks of tests that take seconds each: their modules start before the others.
HEAVY_MARKS = ("slow", "e2e")


def unit_of(nodeid: str) -> str:
    """The unit of the test `nodeid`: its module, or DEPLOYMENTS."""
    module = nodeid.split("::", 1)[0]
    return DEPLOYMENTS if module in DEPLOYMENT_MODULES else module


def _rank(unit: str, items: list[pytest.Item]) -> int:
    """0 for the deployments, 1 for a unit with a slow or end-to-end test, 2 for the rest."""
    if unit == DEPLOYMENTS:
        return 0
    heavy = any(item.get_closest_marker(mark) for item in items for mark in HEAVY_MARKS)
    return 1 if heavy else 2


def order(items: list[pytest.Item]) -> None:
    """Put `items` in the order the units should be handed out; each unit's tests stay
    together and in the order they were collected."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_of(item.nodeid), []).append(item)
    ranked = sorted(units.items(), key=lambda unit: _rank(*unit))  # stable
    items[:] = [item for _, members in ranked for item in members]


def distinct(nodeids: Sequence[str]) -> list[str]:
    """`nodeids` with a repeated id numbered (`id#2`, `id#3`...): the scheduler keys tests by
    id, and schemathesis collects each API operation's test under the test function's id."""
    seen: Counter[str] = Counter()
    keys = []
    for nodeid in nodeids:
        seen[nodeid] += 1
        keys.append(nodeid if seen[nodeid] == 1 else f"{nodeid}#{seen[nodeid]}")
    return keys


class ModuleScheduling(LoadScopeScheduling):
    """The controller's scheduler: a unit (`unit_of`) at a time to whichever worker is about
    to run dry, in the order the workers collected the tests."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        config.option.loadscopereorder = False  # (else the units with most tests go first)
        super().__init__(config, log)

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        super().add_node_collection(node, distinct(collection))

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
