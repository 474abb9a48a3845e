"""The Grafana dashboard and the Prometheus alert rules under deploy/ name only series and
labels a real server exports: each PromQL expression's metric names, label matchers and
grouping labels are checked against a scrape of a server that has scheduled a job."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer

from .test_metrics import job, scrape
from .test_preemption_events import in_state, one_node_config, wait_until

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
#: Labels Prometheus itself adds to every scraped series.
TARGET_LABELS = {"instance", "job"}
#: PromQL's functions, aggregations and keywords: every other name is a series.
_PROMQL_WORDS = (
    "sum min max avg count stddev stdvar topk bottomk quantile count_values group",
    "rate irate increase delta idelta deriv histogram_quantile time vector scalar",
    "abs ceil floor round clamp clamp_min clamp_max absent absent_over_time",
    "max_over_time min_over_time avg_over_time sum_over_time last_over_time",
    "label_replace label_join sort sort_desc timestamp changes resets inf nan",
    "and or unless bool offset by without on ignoring group_left group_right",
    "label_values",  # Grafana's variable query
)
PROMQL = {word for line in _PROMQL_WORDS for word in line.split()}
_MATCHERS = re.compile(r"\{((?:[^}\"]|\"(?:[^\"\\]|\\.)*\")*)\}")
_MATCHER = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*\"(?:[^\"\\]|\\.)*\"\s*,?")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def selectors(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression (or Grafana's
    label_values(metric, label)) refers to."""
    labels: set[str] = set()
    for body in _MATCHERS.findall(expr):
        rest = _MATCHER.sub(lambda m: labels.add(m.group(1)) or "", body)
        assert not rest.strip(), f"cannot read the matchers {{{body}}} of {expr!r}"
    text = _MATCHERS.sub(" ", expr)
    for group in _GROUPING.findall(text):
        labels.update(g.strip() for g in group.split(",") if g.strip())
    text = _GROUPING.sub(" ", text)
    if (variable := re.fullmatch(r"\s*label_values\((\w+),\s*(\w+)\)\s*", text)) is not None:
        return {variable.group(1)}, labels | {variable.group(2)}
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\"(?:[^\"\\]|\\.)*\"", " ", text)  # strings
    text = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", " ", text)  # numbers
    names = {n for n in _NAME.findall(text) if n not in PROMQL}
    return names, labels


def dashboard_queries() -> Iterator[str]:
    board = json.loads((DEPLOY / "grafana" / "armada-dashboard.json").read_text())
    for panel in board["panels"]:
        for target in panel["targets"]:
            yield target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["query"]["query"]


def alert_expressions() -> Iterator[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


@pytest.fixture
def exported(database_url: str) -> tuple[set[str], set[str]]:
    """Series names and label names of a server that scheduled, ran and finished a job."""
    config = one_node_config(database_url, http_port=0)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        [done] = armada.submit_jobs("q", "s", [job(cpu="1", seconds="0")])
        wait_until(in_state(armada, done, submit_pb2.SUCCEEDED), "the job to succeed")
        samples = scrape(server)
    names = {name for name, _ in samples}
    labels = {label for _, pairs in samples for label, _ in pairs} | TARGET_LABELS
    return names, labels


def test_the_selector_reader_finds_names_and_labels() -> None:
    names, labels = selectors(
        'time() - max by (executor) (rate(armada_x_total{pool=~"a|b", q!="}"}[5m])) > 0.5'
        ' and on (queue) armada_y{state="queued"}'
    )
    assert names == {"armada_x_total", "armada_y"}
    assert labels == {"executor", "pool", "q", "queue", "state"}
    assert selectors("label_values(armada_nodes, pool)") == ({"armada_nodes"}, {"pool"})


def test_the_dashboard_and_alerts_name_only_exported_series(
    exported: tuple[set[str], set[str]],
) -> None:
    names, labels = exported
    queries = [*dashboard_queries(), *alert_expressions()]
    assert len(queries) >= 20
    used: set[str] = set()
    for query in queries:
        wanted, wanted_labels = selectors(query)
        assert wanted, f"{query!r} names no series"
        assert wanted <= names, f"{query!r} names series not exported: {wanted - names}"
        assert wanted_labels <= labels, (
            f"{query!r} names labels not exported: {wanted_labels - labels}"
        )
        used |= wanted
    # The alerts cover what the issue asks: leader lost, cycle slow, queue starved, executor gone.
    alerts = " ".join(alert_expressions())
    for series in (
        "armada_scheduler_leader",
        "armada_scheduling_cycle_seconds_bucket",
        "armada_queue_adjusted_fair_share",
        "armada_executor_last_seen_seconds",
    ):
        assert series in alerts
    assert {
        "armada_queue_fair_share",
        "armada_preemptions_total",
        "armada_jobs_ended_total",
    } <= used


def test_a_wrong_name_or_label_is_caught(exported: tuple[set[str], set[str]]) -> None:
    names, labels = exported
    wanted, wanted_labels = selectors('sum by (queue) (armada_jobs_total{outcome="x"})')
    assert not wanted <= names  # armada_jobs has no _total
    assert "outcome" in wanted_labels and wanted_labels <= labels
    assert not selectors('armada_jobs{colour="red"}')[1] <= labels
