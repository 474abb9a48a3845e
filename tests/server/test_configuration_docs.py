"""One declaration per scheduler option: `SchedulingConfig`'s fields are the `scheduling:` block
of the config file, and the table of docs/configuration.md is generated from them."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import fields
from pathlib import Path
from types import ModuleType

import pytest

from armada_core.scheduling import SchedulingConfig
from armada_server.config import VALUE_CHECKS, ConfigError, SchedulingSettings

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    path = ROOT / "scripts" / "generate_config_docs.py"
    spec = importlib.util.spec_from_file_location("generate_config_docs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_options_table_in_the_docs_is_the_generated_one() -> None:
    docs = generator()
    page = (ROOT / "docs" / "configuration.md").read_text()
    start, end = page.index(docs.BEGIN), page.index(docs.END) + len(docs.END)
    assert page[start:end] == docs.table(), "run scripts/generate_config_docs.py to refresh"


def test_the_table_has_a_row_per_option_with_its_type_default_and_doc() -> None:
    table = generator().table()
    assert (
        "| `protected_fraction` | number or null | `1.0` | Queues at or below this fraction "
        "of their fair share keep their running jobs;" in table
    )
    assert "| `topology_levels` | list of strings | `[]` | Node labels" in table
    assert "| `max_fraction_per_queue` | {string: {string: number}} | `{}` | Per" in table
    assert table.count("\n| `") == len(fields(SchedulingSettings))


def test_the_yaml_keys_are_the_scheduling_config_fields_and_the_class_caps() -> None:
    config = [f.name for f in fields(SchedulingConfig)]
    assert [f.name for f in fields(SchedulingSettings)] == [*config, "max_fraction_per_queue"]
    # The keys the file has always taken: an option renamed in the model would break files.
    assert sorted(f.name for f in fields(SchedulingSettings)) == sorted(
        [
            "protected_fraction",
            "max_jobs_per_cycle",
            "max_fraction_per_cycle",
            "max_fraction_per_queue",
            "resource_multipliers",
            "usage_half_life",
            "resource_names",
            "max_queue_lookback",
            "scheduling_rate",
            "scheduling_burst",
            "queue_scheduling_rate",
            "queue_scheduling_burst",
            "topology_levels",
            "non_preemptible_overshoot",
            "excess_flow_budget",
            "excess_flow_weights",
            "lifetime_limits_count_all_queues",
        ]
    )


def test_every_option_is_documented_and_checked() -> None:
    for option in fields(SchedulingSettings):
        assert option.metadata.get("doc"), f"{option.name} has no doc"
    assert set(VALUE_CHECKS) == {f.name for f in fields(SchedulingSettings)}


def test_the_model_is_the_settings_without_the_class_caps() -> None:
    settings = SchedulingSettings.from_mapping(
        {"max-queue-lookback": 5, "resource_multipliers": {"cpu": 2}, "topology_levels": ["r"]}
    )
    model = settings.model()
    assert type(model) is SchedulingConfig
    assert model == SchedulingConfig(
        max_queue_lookback=5, resource_multipliers={"cpu": 2}, topology_levels=("r",)
    )
    assert model.resource_multipliers is not settings.resource_multipliers


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ({"scheduling_burst": 0}, "scheduling.scheduling_burst: must be a whole number at least 1"),
        ({"max_jobs_per_cycle": -1}, "must be a whole number at least 0, got -1"),
        ({"usage_half_life": 0}, "scheduling.usage_half_life: must be above 0, got 0"),
        ({"excess_flow_budget": -1}, "scheduling.excess_flow_budget: must be at least 0"),
        ({"topology_levels": "r"}, "topology_levels: must be a list of node labels, widest"),
        ({"resource_names": ["cpu", "cpu"]}, "resource_names: names must be unique"),
        (
            {"lifetime_limits_count_all_queues": 1},
            "scheduling.lifetime_limits_count_all_queues: must be true or false, got 1",
        ),
    ],
)
def test_each_option_is_checked_by_its_rule(block: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError) as refused:
        SchedulingSettings.from_mapping(block)
    assert error in str(refused.value)
