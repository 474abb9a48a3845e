"""Regenerate the table of scheduler options in docs/configuration.md.

The table (option, type, default, description) lists the fields of
`armada_server.config.SchedulingSettings`, the server's `scheduling:` block: the fields of
`armada_core.scheduling.SchedulingConfig`, which declare and document the scheduler's options,
then the server's per-class caps. Run after adding or changing an option, with the project's
environment:

    .venv/bin/python scripts/generate_config_docs.py

The table sits between two marker comments in the page; the rest of the page is written by
hand. `--check` reports a stale table without writing; tests/server/test_configuration_docs.py
fails when it is stale.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields
from pathlib import Path

from armada_server.config import SchedulingSettings

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
BEGIN = (
    "<!-- scheduling options: generated from SchedulingConfig by "
    "scripts/generate_config_docs.py; do not edit by hand -->"
)
END = "<!-- end of scheduling options -->"

#: How the config file spells the values of each Python type.
SCALARS: dict[object, str] = {
    str: "string",
    int: "whole number",
    float: "number",
    bool: "true or false",
    type(None): "null",
}


def type_text(hint: object) -> str:
    """A field's type as the config file spells it, e.g. `float | None`: `number or null`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(type_text(a) for a in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return f"list of {type_text(args[0])}s"
    if origin is Mapping:
        key, value = args
        return f"{{{type_text(key)}: {type_text(value)}}}"
    if hint in SCALARS:
        return SCALARS[hint]
    raise TypeError(f"no config-file spelling for {hint!r}: add one to type_text")


def value_text(value: object) -> str:
    """A default as YAML writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {value_text(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no YAML spelling for the default {value!r}: add one to value_text")


def default_of(option: Field[object]) -> object:
    if option.default is not MISSING:
        return option.default
    if option.default_factory is not MISSING:
        return option.default_factory()
    raise ValueError(f"{option.name}: an option needs a default")


def row(option: Field[object], hint: object) -> str:
    doc = option.metadata.get("doc")
    if not doc:
        raise ValueError(f'{option.name}: document it with field(metadata={{"doc": ...}})')
    cells = (
        f"`{option.name}`",
        type_text(hint),
        f"`{value_text(default_of(option))}`",
        str(doc).replace("|", "\\|"),
    )
    return "| " + " | ".join(cells) + " |"


def table() -> str:
    """The options table, markers included."""
    hints = typing.get_type_hints(SchedulingSettings)
    rows = [row(option, hints[option.name]) for option in fields(SchedulingSettings)]
    head = ["| Option | Type | Default | Description |", "|---|---|---|---|"]
    return "\n".join([BEGIN, *head, *rows, END])


def replace_table(page: str) -> str:
    """`page` with the table between the markers generated afresh."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{PAGE}: the markers {BEGIN!r} and {END!r} are missing")
    return page[:start] + table() + page[end + len(END) :]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report a stale table")
    args = ap.parse_args()
    page = PAGE.read_text()
    fresh = replace_table(page)
    if args.check:
        if fresh != page:
            print(f"stale: {PAGE.relative_to(ROOT)} (run scripts/generate_config_docs.py)")
            return 1
        return 0
    PAGE.write_text(fresh)
    print(f"{PAGE.relative_to(ROOT)}: {'updated' if fresh != page else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
