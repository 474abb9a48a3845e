"""Property-based tests of the REST gateway against its own OpenAPI document (schemathesis):
whatever the generated requests, the server never fails with a 5xx, answers only documented
status codes and content types, its JSON bodies match the documented schemas, and calls
without credentials are refused. Authentication is on; no executor runs, so nothing that is
submitted is ever executed.

Two checks are left out, on purpose: the document describes the shapes of requests, not every
rule the server applies (a job needs a container with resources, a queue must exist), so a
schema-valid request may still be refused; and bodies are read as job files are (null means
unset, snake_case names are accepted beside camelCase), a superset of the document."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from armada_server.app import EmbeddedServer
from armada_server.web.openapi import document

from .conftest import start_server
from .helpers import Http, job
from .test_auth import ADMIN, AUTH


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    server = start_server(tmp_path_factory.mktemp("fuzz"), auth=AUTH, executor="none")
    http = Http(f"http://127.0.0.1:{server.server.http_port}", ADMIN)
    # Something to find: a queue with jobs, so generated ids and names sometimes hit.
    http.post("/api/v1/queues", {"name": "q"}, expect=201)
    http.submit("q", "s", job("true"), job("true"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fuzzed_url(fuzzed: EmbeddedServer) -> str:
    return f"http://127.0.0.1:{fuzzed.server.http_port}"


# The document the server serves (checked equal below), loaded without a server.
schema = schemathesis.openapi.from_dict(document())


def test_the_served_document_is_this_one(fuzzed_url: str) -> None:
    assert Http(fuzzed_url).get("/api/v1/openapi.json") == json.loads(json.dumps(document()))


# The event stream is tested in test_gateway.py: watch=true never ends, by design.
@schema.exclude(operation_id="jobSetEvents").parametrize()
@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
def test_gateway_conforms_to_its_openapi_document(case, fuzzed_url: str) -> None:  # type: ignore[no-untyped-def]
    case.call_and_validate(
        base_url=fuzzed_url,
        headers={"Authorization": ADMIN},
        timeout=30,
        excluded_checks=[positive_data_acceptance, negative_data_rejection],
    )
