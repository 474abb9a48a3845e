"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from xdist.remote import Producer
from xdist.scheduler.protocol import Scheduling

from . import distribution
from .postgres import PostgresServer


@pytest.hookimpl(trylast=True)  # the final order
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker, the order in which units of tests are handed out
    (distribution.py); a run without workers keeps the collected order."""
    if hasattr(config, "workerinput"):
        distribution.order(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """`--dist loadfile` hands out a module at a time, the deployment modules as one."""
    if config.getvalue("dist") == "loadfile":
        return distribution.ModuleScheduling(config, log)
    return None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer()
    except FileNotFoundError as e:
        if os.environ.get("CI"):
            raise  # CI machines have PostgreSQL: never skip there
        pytest.skip(f"PostgreSQL is not installed here: {e}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A new, empty database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'armada.db'}"
    return request.getfixturevalue("postgres_server").new_database()
