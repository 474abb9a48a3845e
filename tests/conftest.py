"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .postgres import PostgresServer


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
