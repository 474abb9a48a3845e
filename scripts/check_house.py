"""Check the house limits of the product code; CI runs it.

Product code is armada_core, server/armada_server and each integration's package
(integrations/*/<package>); generated modules (*_pb2*) and storage migrations aside. Limits:

- no module under server/armada_server/storage/ over 600 lines;
- no class over 400 lines and no function over 80 lines (from its `class` or `def` line to its
  last line; nested ones are measured on their own too);
- at most 20 type-check suppressions in all: `# type: ignore`, `# pyright: ignore` and
  `cast(Any, ...)`. A comment suppression names its error code in brackets and gives a reason
  after it (`# type: ignore[attr-defined]  # grpc's aio stubs lack it`); a `cast(Any, ...)`
  has a reason in a comment on its lines. Per-file checker settings (`# mypy: ...`,
  `# pyright: basic`) and `@no_type_check` are not allowed: the checker's configuration is
  pyproject.toml's, the same for every module;
- mypy, with the project's configuration, reports no error.

Each violation is printed as `path:line: what (figure)`, then a summary line with the figures;
the exit status is 1 on any violation. Run with the project's environment:

    .venv/bin/python scripts/check_house.py [--no-mypy]
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MAX_STORAGE_MODULE = 600
MAX_CLASS = 400
MAX_FUNCTION = 80
MAX_SUPPRESSIONS = 20

STORAGE = "server/armada_server/storage/"
MIGRATIONS = "server/armada_server/storage/migrations/"

# A suppression inside a comment: `type: ignore` or `pyright: ignore`, an optional [code] list,
# then whatever follows (the reason).
SUPPRESSION = re.compile(r"#\s*(type|pyright):\s*ignore\b(\[[^\]]*\])?(.*)")
# Checker settings for one file (a comment on a line of its own), which the project's
# configuration would not show.
FILE_SETTINGS = re.compile(r"#\s*(mypy:|pyright:\s*(?!ignore\b)\w)")


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Size:
    """A measured thing: a module, class or function, and its length in lines."""

    lines: int
    path: str
    line: int = 1
    name: str = ""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line} {self.name}" if self.name else self.path
        return f"{self.lines} lines ({where})"


@dataclass
class Report:
    """What the static checks found in one or more modules."""

    violations: list[Violation] = field(default_factory=list)
    storage_modules: list[Size] = field(default_factory=list)
    classes: list[Size] = field(default_factory=list)
    functions: list[Size] = field(default_factory=list)
    suppressions: list[Violation] = field(default_factory=list)

    def add(self, other: Report) -> None:
        self.violations += other.violations
        self.storage_modules += other.storage_modules
        self.classes += other.classes
        self.functions += other.functions
        self.suppressions += other.suppressions


def is_product(path: str) -> bool:
    """Whether `path` (relative, with /) is product code the limits apply to."""
    name = path.rsplit("/", 1)[-1]
    return path.endswith((".py", ".pyi")) and "_pb2" not in name and not path.startswith(MIGRATIONS)


def product_files(root: Path) -> list[str]:
    """The product modules under `root`, as relative paths."""
    tops = [root / "armada_core", root / "server" / "armada_server"]
    tops += sorted(p.parent for p in root.glob("integrations/*/*/__init__.py"))
    found = {
        p.relative_to(root).as_posix()
        for top in tops
        for pattern in ("*.py", "*.pyi")
        for p in top.rglob(pattern)
    }
    return sorted(p for p in found if is_product(p))


def check_source(path: str, source: str) -> Report:
    """The static checks of one module, `path` relative to the repository root."""
    report = Report()
    tree = ast.parse(source, filename=path)
    if path.startswith(STORAGE) and not path.startswith(MIGRATIONS):
        size = Size(len(source.splitlines()), path)
        report.storage_modules.append(size)
        if size.lines > MAX_STORAGE_MODULE:
            report.violations.append(
                Violation(path, 1, f"storage module over {MAX_STORAGE_MODULE} lines ({size})")
            )
    _measure_definitions(path, tree, report)
    comments = {line: text for line, text, _ in _comments(source)}
    for line, text, alone in _comments(source):
        if alone and FILE_SETTINGS.match(text):
            report.violations.append(
                Violation(path, line, f"per-file type-checker setting: {text.strip()}")
            )
    _check_comments(path, comments, report)
    _check_casts(path, tree, comments, report)
    _check_no_type_check(path, tree, report)
    return report


def _measure_definitions(path: str, tree: ast.AST, report: Report) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            kind, limit, sizes = "class", MAX_CLASS, report.classes
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind, limit, sizes = "function", MAX_FUNCTION, report.functions
        else:
            continue
        size = Size(_span(node), path, node.lineno, node.name)
        sizes.append(size)
        if size.lines > limit:
            report.violations.append(
                Violation(path, node.lineno, f"{kind} {node.name} over {limit} lines ({size})")
            )


def _span(node: ast.stmt) -> int:
    """Lines from the `def` or `class` line (decorators aside) to the last line."""
    end = node.end_lineno if node.end_lineno is not None else node.lineno
    return end - node.lineno + 1


def _comments(source: str) -> Iterator[tuple[int, str, bool]]:
    """Each comment: its line, its text, whether it is alone on its line. From the tokens, so
    that text in strings is not mistaken for a comment."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string, token.line.strip() == token.string.strip()


def _check_comments(path: str, comments: dict[int, str], report: Report) -> None:
    for line, comment in sorted(comments.items()):
        for match in SUPPRESSION.finditer(comment):
            found = Violation(path, line, match.group(0).strip())
            report.suppressions.append(found)
            codes, rest = match.group(2), match.group(3)
            if not codes or not codes.strip("[] ,"):
                report.violations.append(
                    Violation(path, line, f"suppression without an error code: {found.message}")
                )
            if not _reason(rest):
                report.violations.append(
                    Violation(path, line, f"suppression without a reason: {found.message}")
                )


def _reason(text: str) -> str:
    """The reason written after a suppression: `  # why` (or `-- why`)."""
    return text.strip().lstrip("#-:;,").strip()


def _check_casts(path: str, tree: ast.AST, comments: dict[int, str], report: Report) -> None:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_cast_to_any(node)):
            continue
        end = node.end_lineno if node.end_lineno is not None else node.lineno
        lines = range(node.lineno, end + 1)
        report.suppressions.append(Violation(path, node.lineno, "cast(Any, ...)"))
        if not any(_reason(comments.get(n, "")) for n in lines):
            report.violations.append(
                Violation(path, node.lineno, "cast(Any, ...) without a reason in a comment")
            )


def _is_cast_to_any(call: ast.Call) -> bool:
    if _name(call.func) != "cast" or not call.args:
        return False
    target = call.args[0]
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        return target.value.strip().rsplit(".", 1)[-1] == "Any"
    return _name(target) == "Any"


def _name(node: ast.expr) -> str | None:
    """`name` for `name` and `module.name`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _check_no_type_check(path: str, tree: ast.AST, report: Report) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if _name(decorator) == "no_type_check":
                    report.violations.append(
                        Violation(path, decorator.lineno, f"@no_type_check on {node.name}")
                    )


def check_tree(root: Path) -> Report:
    """The static checks over every product module, and the suppression budget."""
    report = Report()
    for path in product_files(root):
        report.add(check_source(path, (root / path).read_text()))
    count = len(report.suppressions)
    if count > MAX_SUPPRESSIONS:
        report.violations += [
            Violation(s.path, s.line, f"suppression: {s.message}") for s in report.suppressions
        ]
        report.violations.append(
            Violation(
                "product code", 0, f"{count} type-check suppressions, over {MAX_SUPPRESSIONS}"
            )
        )
    return report


# `path:line: error: message  [code]`, as mypy prints each error.
MYPY_ERROR = re.compile(r"^(?P<path>[^:\s]+):(?P<line>\d+):(?:\d+:)? error: (?P<message>.*)$")


def mypy_errors(root: Path) -> list[Violation]:
    """mypy's errors over the project, with its configuration (pyproject.toml)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=root, capture_output=True, text=True, check=False
    )
    errors = [
        Violation(m["path"], int(m["line"]), f"mypy: {m['message']}")
        for m in map(MYPY_ERROR.match, done.stdout.splitlines())
        if m is not None
    ]
    if done.returncode != 0 and not errors:  # mypy itself failed: say so rather than pass
        detail = (done.stderr or done.stdout).strip().splitlines()
        errors.append(Violation("mypy", 0, f"failed: {detail[-1] if detail else done.returncode}"))
    return errors


def largest(sizes: Iterable[Size]) -> str:
    top = max(sizes, key=lambda s: s.lines, default=None)
    return str(top) if top is not None else "none"


def summary(report: Report, mypy: list[Violation] | None) -> str:
    checked = "not run" if mypy is None else f"{len(mypy)} errors"
    return (
        f"largest storage module {largest(report.storage_modules)}; "
        f"largest class {largest(report.classes)}; "
        f"longest function {largest(report.functions)}; "
        f"suppressions {len(report.suppressions)} (at most {MAX_SUPPRESSIONS}); "
        f"mypy {checked}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-mypy", action="store_true", help="skip the type checker")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = ap.parse_args(argv)
    report = check_tree(args.root)
    mypy = None if args.no_mypy else mypy_errors(args.root)
    violations = report.violations + (mypy or [])
    for violation in violations:
        print(violation)
    print(f"{'FAIL' if violations else 'ok'}: {summary(report, mypy)}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
