"""The house limits (scripts/check_house.py): each check on small sources, then the real tree."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_house", ROOT / "scripts" / "check_house.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


house = _load()


def function(lines: int, head: str = "def f() -> None:") -> str:
    """A function `lines` long, from its `def` line to its last line."""
    return head + "\n" + "    x = 1\n" * (lines - 1)


def klass(lines: int) -> str:
    return "class C:\n" + "    x = 1\n" * (lines - 1)


def messages(source: str, path: str = "armada_core/m.py") -> list[str]:
    return [v.message for v in house.check_source(path, source).violations]


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        (function(80), []),
        (function(81), ["function f over 80 lines (81 lines (armada_core/m.py:1 f))"]),
        (function(81, "async def f() -> None:"), ["function f over 80 lines"]),
        ("@decorator\n@another\n" + function(80), []),  # decorators are not the function's
        ("class C:\n" + function(81, "    def m(self) -> None:").replace("\n", "\n    "), ["m"]),
        (
            "def outer() -> None:\n"
            + function(81, "    def inner() -> None:").replace("\n", "\n    "),
            ["outer", "inner"],
        ),
        (klass(400), []),
        (klass(401), ["class C over 400 lines (401 lines (armada_core/m.py:1 C))"]),
    ],
)
def test_functions_and_classes_are_measured_from_def_to_their_last_line(
    source: str, caught: list[str]
) -> None:
    found = messages(source)
    assert len(found) == len(caught)
    for message, expected in zip(found, caught, strict=True):
        assert expected in message


@pytest.mark.parametrize(
    ("path", "lines", "caught"),
    [
        ("server/armada_server/storage/jobs.py", 600, False),
        ("server/armada_server/storage/jobs.py", 601, True),
        ("server/armada_server/storage/queries/reads.py", 601, True),
        ("server/armada_server/services/jobs.py", 601, False),
        ("server/armada_server/storage/migrations/versions/0001.py", 601, False),
    ],
)
def test_storage_modules_are_at_most_600_lines(path: str, lines: int, caught: bool) -> None:
    found = messages("x = 1\n" * lines, path)
    assert found == ([f"storage module over 600 lines ({lines} lines ({path}))"] if caught else [])


@pytest.mark.parametrize(
    ("line", "counted", "caught"),
    [
        ("x = f()  # type: ignore[attr-defined]  # grpc's aio stubs lack it", 1, []),
        ("x = f()  # type: ignore[attr-defined, misc]  # two codes, one reason", 1, []),
        ("x = f()  # pyright: ignore[reportAttributeAccessIssue]  # stubs lack it", 1, []),
        ("x = f()  # type: ignore[attr-defined]", 1, ["without a reason"]),
        ("x = f()  # type: ignore  # no code given", 1, ["without an error code"]),
        ("x = f()  # type: ignore", 1, ["without an error code", "without a reason"]),
        ("x = f()  # type: ignore[]  # empty brackets", 1, ["without an error code"]),
        ("x = f()  # pyright: ignore", 1, ["without an error code", "without a reason"]),
        ("x = f()  #type:ignore[misc]#why", 1, []),
        ("x = '# type: ignore'  # a string, not a comment", 0, []),
        ('x = """\n# type: ignore\n"""', 0, []),
        ("x = f()  # the type: ignored by nobody", 0, []),
        ("x = cast(Any, f())  # the orchestrator's untyped return", 1, []),
        ("x = typing.cast(Any, f())", 1, ["cast(Any, ...) without a reason"]),
        ('x = cast("Any", f())', 1, ["cast(Any, ...) without a reason"]),
        ("x = cast(\n    Any,\n    f(),  # reason on a later line of the call\n)", 1, []),
        ("x = cast(int, f())", 0, []),
        ("# mypy: ignore-errors", 0, ["per-file type-checker setting"]),
        ("# pyright: basic", 0, ["per-file type-checker setting"]),
        ("x = 1  # mypy: prose after code is not a setting", 0, []),
        ("@no_type_check\ndef f() -> None:\n    pass", 0, ["@no_type_check on f"]),
    ],
)
def test_suppressions_are_counted_and_need_a_code_and_a_reason(
    line: str, counted: int, caught: list[str]
) -> None:
    report = house.check_source("armada_core/m.py", line + "\n")
    assert len(report.suppressions) == counted
    found = [v.message for v in report.violations]
    assert len(found) == len(caught), found
    for message, expected in zip(found, caught, strict=True):
        assert expected in message


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


@pytest.mark.parametrize(("count", "over"), [(20, False), (21, True)])
def test_at_most_20_suppressions_in_all_product_code(
    tmp_path: Path, count: int, over: bool
) -> None:
    line = "x = f()  # type: ignore[misc]  # why\n"
    write(tmp_path, "armada_core/a.py", line * (count - 5))
    write(tmp_path, "integrations/airflow/airflow_armada/__init__.py", line * 5)
    # Not product code: tests, scripts, generated modules, migrations.
    for path in (
        "tests/test_a.py",
        "scripts/s.py",
        "armada_core/api/job_pb2.pyi",
        "armada_core/api/job_pb2_grpc.pyi",
        "server/armada_server/storage/migrations/m.py",
        "integrations/airflow/tests/test_x.py",
    ):
        write(tmp_path, path, line * 30)
    report = house.check_tree(tmp_path)
    assert len(report.suppressions) == count
    assert [v.message for v in report.violations][-1:] == (
        [f"{count} type-check suppressions, over 20"] if over else []
    )


def test_product_files_are_the_three_roots_without_generated_code(tmp_path: Path) -> None:
    for path in (
        "armada_core/__init__.py",
        "armada_core/api/event_pb2.py",
        "armada_core/api/stubs.pyi",
        "server/armada_server/storage/jobs.py",
        "server/armada_server/storage/migrations/env.py",
        "server/tests/test_x.py",
        "integrations/dagster/dagster_armada/__init__.py",
        "integrations/dagster/dagster_armada/ops.py",
        "integrations/dagster/setup_helper.py",
    ):
        write(tmp_path, path, "")
    assert house.product_files(tmp_path) == [
        "armada_core/__init__.py",
        "armada_core/api/stubs.pyi",
        "integrations/dagster/dagster_armada/__init__.py",
        "integrations/dagster/dagster_armada/ops.py",
        "server/armada_server/storage/jobs.py",
    ]


def test_mypy_errors_are_read_from_its_output() -> None:
    line = "armada_core/x.py:12: error: Missing return statement  [return]"
    match = house.MYPY_ERROR.match(line)
    assert match is not None
    assert (match["path"], match["line"], match["message"]) == (
        "armada_core/x.py",
        "12",
        "Missing return statement  [return]",
    )
    assert house.MYPY_ERROR.match("armada_core/x.py:3: note: See the docs") is None


def test_the_report_names_each_violation_and_ends_with_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "armada_core/big.py", function(81) + klass(12))
    write(tmp_path, "server/armada_server/storage/jobs.py", "x = 1\n" * 30)
    assert house.main(["--root", str(tmp_path), "--no-mypy"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "armada_core/big.py:1: function f over 80 lines (81 lines (armada_core/big.py:1 f))",
        "FAIL: largest storage module 30 lines (server/armada_server/storage/jobs.py); "
        "largest class 12 lines (armada_core/big.py:82 C); "
        "longest function 81 lines (armada_core/big.py:1 f); "
        "suppressions 0 (at most 20); mypy not run",
    ]


def test_the_tree_keeps_the_house_limits() -> None:
    """The real check over the repository, the type checker included, as CI runs it."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_house.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
