"""Build the five distributions and check them the way a user installs them.

Until the packages are published, README.md tells users to build them into `dist/` and install
with `pip install --find-links dist/ ...`. This check does exactly that, in a temporary
directory, and fails on anything a package index or a fresh environment would show:

1. build: the READMEs' build command (`uv build --all-packages --out-dir dist/`);
2. `twine check --strict` on every sdist and wheel (the description renders, metadata is valid);
3. what each distribution ships: a readme (markdown, no relative links: they break on an index
   page), the Apache-2.0 license expression and the LICENSE text in wheel and sdist, classifiers
   (no license classifier: the expression supersedes it) and project URLs under the root
   project's Source URL, `py.typed` in the wheel, and a `>=0.1,<0.2`-style range on every
   requirement naming a sibling;
4. prefect-armada refuses fastapi 0.155 or newer with a Prefect older than 3.9 (a resolver run);
5. each distribution alone, with only its orchestrator, in a fresh virtual environment: the
   `pip install --find-links dist/ ...` lines of README.md's "Installing for use" section, run
   verbatim from the temporary directory through `uv pip` (fast, with uv's cache) with the
   versions of uv.lock as constraints (deterministic, not the newest); then the package is
   imported, its entry points listed and loaded (Airflow and Prefect must find theirs), and its
   console scripts answer `--help`. The package READMEs' install lines run there afterwards:
   every install line of the five READMEs is one this check runs.

Progress goes to stderr, one line per step; problems are listed at the end and the exit status
is 1 if there is any. Needs uv and twine (the project's dev group):

    .venv/bin/python scripts/release_check.py [--only NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import email.parser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALL_SECTION = "## Installing for use"
ORCHESTRATORS = ("apache-airflow", "dagster", "prefect")
# Prefect before 3.9 passes min_items to fastapi's Body(), which fastapi 0.155 refuses.
BROKEN_PREFECT_PAIR = ("prefect==3.7.7", "fastapi==0.155.0")
INSTALL_TIMEOUT = 1200
RUN_TIMEOUT = 300


@dataclass(frozen=True)
class Distribution:
    """One of the five, and how the READMEs install it."""

    name: str
    module: str
    readme: str
    install: str  # the requirement of the README.md line that installs it into a fresh venv
    orchestrator: str | None = None
    # The requirements of further README lines, run in its environment afterwards, each with
    # what it makes importable (if anything beyond the distribution).
    also: tuple[tuple[str, str | None], ...] = ()

    @property
    def siblings_installed(self) -> set[str]:
        return {"armada-core", self.name}


DISTRIBUTIONS = (
    Distribution("armada-core", "armada_core", "README.md", "armada-core"),
    Distribution(
        "armada-server",
        "armada_server",
        "server/README.md",
        "armada-core[server]",
        also=(("armada-core[server,postgres]", "psycopg"),),
    ),
    Distribution(
        "airflow-armada",
        "airflow_armada",
        "integrations/airflow/README.md",
        "armada-core[airflow]",
        orchestrator="apache-airflow",
        also=(("airflow-armada", None),),
    ),
    Distribution(
        "dagster-armada",
        "dagster_armada",
        "integrations/dagster/README.md",
        "armada-core[dagster]",
        orchestrator="dagster",
        also=(("dagster-armada", None),),
    ),
    Distribution(
        "prefect-armada",
        "prefect_armada",
        "integrations/prefect/README.md",
        "armada-core[prefect]",
        orchestrator="prefect",
        also=(("prefect-armada", None),),
    ),
)
NAMES = {d.name for d in DISTRIBUTIONS}
ROOT_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = str(ROOT_PROJECT["version"])  # the five are released together


@dataclass
class Report:
    """Progress on stderr as it happens; problems kept for the summary."""

    problems: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def step(self, text: str) -> None:
        print(f"==> {text}", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        print(f"    {text}", file=sys.stderr, flush=True)

    def problem(self, text: str) -> None:
        self.problems.append(text)
        print(f"    PROBLEM: {text}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def find_uv() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        sys.exit("release_check: uv is not installed: run scripts/test.sh or `pip install uv`")
    return uv


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float = RUN_TIMEOUT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing its output; a timeout counts as a failure (status -1)."""
    try:
        return subprocess.run(
            list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), -1, "", f"timed out after {timeout:.0f} s")


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# --- README ---------------------------------------------------------------------------------


def readme_commands(readme: str) -> list[str]:
    """The `uv build` and `pip install` lines of a README, as written (README.md: those of its
    install section)."""
    text = (ROOT / readme).read_text()
    if readme == "README.md":
        start = text.find(INSTALL_SECTION)
        end = text.find("\n## ", start + len(INSTALL_SECTION))
        text = text[start : end if end > 0 else len(text)] if start >= 0 else ""
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines += [line.split("#")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line.startswith(("uv build", "pip install"))]


def install_lines(report: Report) -> tuple[str, dict[str, str]]:
    """The build line and the install lines by requirement, from the five READMEs. Every line
    must be one this check runs, the same wherever it is written."""
    builds: set[str] = set()
    by_requirement: dict[str, str] = {}
    wanted = {d.install for d in DISTRIBUTIONS} | {a for d in DISTRIBUTIONS for a, _ in d.also}
    for readme in (d.readme for d in DISTRIBUTIONS):
        if not (ROOT / readme).is_file():
            report.problem(f"{readme} is missing")
            continue
        for line in readme_commands(readme):
            if line.startswith("uv build"):
                builds.add(line)
                continue
            requirement = shlex.split(line)[-1]
            if "--find-links" not in line:
                report.problem(f"{readme}: `{line}` does not install from the built wheels")
            elif requirement not in wanted:
                report.problem(f"{readme}: `{line}` is not run by this check")
            elif by_requirement.setdefault(requirement, line) != line:
                report.problem(f"{readme}: `{line}` differs from `{by_requirement[requirement]}`")
    for requirement in sorted(wanted - by_requirement.keys()):
        report.problem(f"no README installs {requirement} with `pip install --find-links dist/`")
    if len(builds) != 1:
        report.problem(f"the READMEs should give one `uv build` command, not {sorted(builds)}")
    return min(builds, default="uv build --all-packages --out-dir dist/"), by_requirement


# --- build and twine ------------------------------------------------------------------------


def build(uv: str, line: str, dist: Path, report: Report) -> list[Path]:
    """Run the READMEs' build command with its output directory in the temporary one."""
    argv = [dist.as_posix() if arg == "dist/" else arg for arg in shlex.split(line)]
    argv = [uv, *argv[1:], "--python", sys.executable]
    report.step(f"build: {line}  (into {dist})")
    done = run(argv, cwd=ROOT, timeout=INSTALL_TIMEOUT)
    files = sorted(dist.glob("*.whl")) + sorted(dist.glob("*.tar.gz"))
    if done.returncode != 0:
        report.problem(f"the build failed:\n{tail(done.stderr)}")
    report.note(f"{len(files)} files: " + ", ".join(f.name for f in files))
    return files


def twine_check(files: list[Path], report: Report) -> None:
    report.step("twine check --strict")
    argv = [sys.executable, "-m", "twine", "--no-color", "check", "--strict", *map(str, files)]
    done = run(argv, cwd=ROOT)
    if "No module named twine" in done.stderr:
        report.problem("twine is not installed here: run `.venv/bin/uv sync --locked`")
    elif done.returncode != 0:
        report.problem(f"twine check failed:\n{tail(done.stdout + done.stderr, 30)}")
    else:
        report.note(f"{len(files)} files pass")


# --- metadata -------------------------------------------------------------------------------


def root_source_url() -> str:
    return str(ROOT_PROJECT.get("urls", {}).get("Source", ""))


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def sibling_problem(requirement: str) -> str | None:
    """Why a requirement naming a sibling lacks a range holding this release, if it does."""
    spec = requirement.split(";")[0]
    name = re.split(r"[\s\[(<>=!~]", spec, maxsplit=1)[0]
    if normalize(name) not in NAMES:
        return None
    lower = re.search(r">=\s*([\d.]+)", spec)
    upper = re.search(r"<\s*([\d.]+)", spec)
    if not (lower and upper):
        return f"`{requirement}` names a sibling without a `>=X,<Y` range"
    if not version_tuple(lower[1]) <= version_tuple(VERSION) < version_tuple(upper[1]):
        return f"`{requirement}` excludes this release ({VERSION})"
    return None


def relative_links(description: str) -> list[str]:
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", description)
    return [t for t in targets if not re.match(r"(https?|mailto):", t)]


def check_metadata(dist: Distribution, meta: Message, report: Report) -> None:
    """What an index page shows and what resolvers read, from the wheel's METADATA."""
    where = f"{dist.name}: METADATA"
    description = str(meta.get_payload())
    if not meta.get("Summary"):
        report.problem(f"{where} has no Summary")
    if not description.strip() or meta.get("Description-Content-Type") != "text/markdown":
        report.problem(f"{where} has no markdown readme (the index page would be empty)")
    for target in relative_links(description):
        report.problem(f"{where}: the readme links to `{target}`, which breaks on an index page")
    if meta.get("License-Expression") != "Apache-2.0":
        report.problem(f"{where}: License-Expression is {meta.get('License-Expression')!r}")
    classifiers = meta.get_all("Classifier") or []
    for wanted in ("Programming Language :: Python :: 3.11", "Typing :: Typed"):
        if wanted not in classifiers:
            report.problem(f"{where} lacks the classifier `{wanted}`")
    for classifier in classifiers:
        if classifier.startswith("License ::"):
            report.problem(f"{where}: `{classifier}`: the license expression replaces it")
    source = root_source_url()
    urls = meta.get_all("Project-URL") or []
    if not source or not urls:
        report.problem(f"{where} has no project URLs (Source in the root pyproject.toml)")
    for url in urls:
        if not url.split(",", 1)[-1].strip().startswith(source):
            report.problem(f"{where}: `{url}` is not under the project's Source URL {source}")
    for requirement in meta.get_all("Requires-Dist") or []:
        if why := sibling_problem(requirement):
            report.problem(f"{where}: {why}")


def check_files(dist: Distribution, wheel: Path, sdist: Path | None, report: Report) -> Message:
    """The license text and py.typed in the wheel, the license in the sdist; returns METADATA."""
    license_text = (ROOT / "LICENSE").read_bytes() if (ROOT / "LICENSE").exists() else None
    stem = f"{dist.module}-{VERSION}"
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        meta = email.parser.Parser().parsestr(whl.read(f"{stem}.dist-info/METADATA").decode())
        licensed = f"{stem}.dist-info/licenses/LICENSE"
        if licensed not in names or license_text is None or whl.read(licensed) != license_text:
            report.problem(f"{wheel.name} does not carry the LICENSE file (Apache-2.0 text)")
        if f"{dist.module}/py.typed" not in names:
            report.problem(f"{wheel.name} has no {dist.module}/py.typed")
    if sdist is None:
        report.problem(f"{dist.name}: no sdist was built")
    else:
        with tarfile.open(sdist) as tar:
            member = f"{stem}/LICENSE"
            found = member in tar.getnames() and tar.getmember(member).isfile()
        if not found:
            report.problem(f"{sdist.name} does not carry the LICENSE file")
    return meta


def check_distributions(files: list[Path], report: Report) -> None:
    for dist in DISTRIBUTIONS:
        report.step(f"metadata and files: {dist.name}")
        stem = f"{dist.module}-{VERSION}"
        wheel = next((f for f in files if f.name.startswith(f"{stem}-")), None)
        sdist = next((f for f in files if f.name == f"{stem}.tar.gz"), None)
        if wheel is None:
            report.problem(f"{dist.name}: no wheel was built")
            continue
        before = len(report.problems)
        meta = check_files(dist, wheel, sdist, report)
        check_metadata(dist, meta, report)
        requires = ", ".join(meta.get_all("Requires-Dist") or [])
        if len(report.problems) == before:
            report.note(f"ok; requires {requires}")


def resolve(uv: str, requirements: Sequence[str], constraints: Path, work: Path) -> str | None:
    """Resolve requirements against dist/ and the index without installing; None if they do."""
    argv = [uv, "pip", "compile", "-", "--find-links", "dist/", "--python", sys.executable]
    argv += ["-c", str(constraints), "--no-header", "--quiet"]
    try:
        done = subprocess.run(
            argv,
            cwd=work,
            input="\n".join(requirements),
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {INSTALL_TIMEOUT} s"
    return None if done.returncode == 0 else done.stderr


def check_prefect_bound(uv: str, constraints: Path, work: Path, report: Report) -> None:
    """prefect-armada with a Prefect/fastapi pair that breaks: the resolver must refuse.

    Everything else is held at uv.lock's versions, and the same Prefect without the fastapi pin
    must resolve, so that the pair is the reason."""
    report.step(f"prefect-armada refuses {' with '.join(BROKEN_PREFECT_PAIR)}")
    pinned = {normalize(pin.split("==")[0]) for pin in BROKEN_PREFECT_PAIR}
    others = work / "constraints-but-the-pair.txt"
    others.write_text(
        "".join(
            line + "\n"
            for line in constraints.read_text().splitlines()
            if normalize(re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0]) not in pinned
        )
    )
    prefect = BROKEN_PREFECT_PAIR[0]
    if error := resolve(uv, ["prefect-armada", prefect], others, work):
        report.problem(f"prefect-armada does not resolve with {prefect}:\n{tail(error)}")
    elif (error := resolve(uv, ["prefect-armada", *BROKEN_PREFECT_PAIR], others, work)) is None:
        report.problem(
            f"prefect-armada resolves with {' and '.join(BROKEN_PREFECT_PAIR)}, which fails "
            "every flow run"
        )
    else:
        report.note(f"{prefect} alone resolves; with the fastapi pin: " + tail(error, 1).strip())


# --- fresh environments ---------------------------------------------------------------------

# Runs inside each fresh environment: import the package, load every entry point of the
# distribution, see that the orchestrator finds it through its own discovery (Airflow's providers
# manager, Prefect's collections and worker types), and list what is installed.
PROBE = r"""
import importlib, importlib.metadata as md, json, re, sys
name, module = sys.argv[1], sys.argv[2]
out = {"import": None, "entry_points": [], "installed": {}}

def airflow_finds(ep, loaded):
    from airflow.providers_manager import ProvidersManager
    if loaded().get("package-name") != name:
        return f"the provider info names {loaded().get('package-name')!r}"
    if name not in ProvidersManager().providers:
        return "Airflow's providers manager does not list it"
    return "found by Airflow's providers manager"

def prefect_finds(ep, loaded):
    from prefect.plugins import load_prefect_collections
    from prefect.utilities.dispatch import lookup_type
    from prefect.workers.base import BaseWorker
    found = load_prefect_collections().get(ep.name)
    if found is not loaded:
        return f"Prefect's collections give {found!r}"
    lookup_type(BaseWorker, "armada")
    return "loaded by Prefect's collections; worker type 'armada' registered"

DISCOVERY = {"apache_airflow_provider": airflow_finds, "prefect.collections": prefect_finds}
try:
    importlib.import_module(module)
except Exception as e:
    out["import"] = f"{type(e).__name__}: {e}"
for ep in md.distribution(name).entry_points:
    item = {"group": ep.group, "name": ep.name, "value": ep.value, "error": None, "found": None}
    try:
        loaded = ep.load()
        if ep.group in DISCOVERY:
            item["found"] = DISCOVERY[ep.group](ep, loaded)
            if not item["found"].startswith(("found", "loaded")):
                item["error"], item["found"] = item["found"], None
    except Exception as e:
        item["error"] = f"{type(e).__name__}: {e}"
    out["entry_points"].append(item)
for d in md.distributions():
    out["installed"][re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()] = d.version
print(json.dumps(out))
"""


def export_constraints(uv: str, work: Path, report: Report) -> Path:
    """uv.lock's versions of everything but the five, for `-c`."""
    report.step("constraints from uv.lock")
    target = work / "constraints.txt"
    argv = [uv, "export", "--frozen", "--no-hashes", "--all-packages", "--all-extras"]
    argv += ["--no-emit-workspace", "--no-header", "--no-annotate", "--output-file", str(target)]
    done = run(argv, cwd=ROOT)
    if done.returncode != 0:
        report.problem(f"uv export failed:\n{tail(done.stderr)}")
        target.write_text("")
    pins = {
        line.split("==")[0]: line.split("==")[1].split(" ")[0]
        for line in target.read_text().splitlines()
        if "==" in line
    }
    report.note(", ".join(f"{o} {pins.get(o, '?')}" for o in ORCHESTRATORS))
    return target


def environment(work: Path) -> dict[str, str]:
    """The fresh environments' variables: nothing of this project's, homes inside `work`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(
        AIRFLOW_HOME=str(work / "airflow-home"),
        PREFECT_HOME=str(work / "prefect-home"),
        DAGSTER_HOME=str(work / "dagster-home"),
        UV_PYTHON_DOWNLOADS="never",
    )
    (work / "dagster-home").mkdir(exist_ok=True)
    return env


def pip_install(uv: str, line: str, python: Path, constraints: Path, work: Path) -> str | None:
    """A README install line verbatim, through `uv pip` into `python`'s environment."""
    argv = shlex.split(line)
    argv = [uv, *argv, "--python", str(python), "-c", str(constraints)]
    done = run(argv, cwd=work, timeout=INSTALL_TIMEOUT, env=environment(work))
    return None if done.returncode == 0 else tail(done.stderr)


def probe(dist: Distribution, python: Path, work: Path, report: Report) -> dict[str, str]:
    """Import, entry points, console scripts; returns what is installed."""
    done = run([str(python), "-c", PROBE, dist.name, dist.module], cwd=work, env=environment(work))
    if done.returncode != 0:
        report.problem(f"{dist.name}: the probe failed:\n{tail(done.stderr)}")
        return {}
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found["import"]:
        report.problem(f"{dist.name}: import {dist.module} failed: {found['import']}")
    else:
        report.note(f"import {dist.module}: ok")
    if not found["entry_points"]:
        report.note("entry points: none")
    for ep in found["entry_points"]:
        report.note(f"entry point [{ep['group']}] {ep['name']} = {ep['value']}")
        if ep["found"]:
            report.note(f"  {ep['found']}")
        if ep["error"]:
            report.problem(f"{dist.name}: entry point {ep['name']} does not load: {ep['error']}")
        elif ep["group"] == "console_scripts":
            help_run = run(
                [str(python.parent / ep["name"]), "--help"], cwd=work, env=environment(work)
            )
            if help_run.returncode != 0:
                report.problem(
                    f"{dist.name}: `{ep['name']} --help` failed:\n{tail(help_run.stderr)}"
                )
    return dict(found["installed"])


def check_alone(dist: Distribution, installed: dict[str, str], report: Report) -> None:
    """Only this distribution (with armada-core) and its own orchestrator, at this version."""
    siblings = {name for name in installed if name in NAMES}
    if siblings != dist.siblings_installed:
        report.problem(f"{dist.name}: the environment holds {sorted(siblings)}")
    for name in siblings:
        if installed[name] != VERSION:
            report.problem(f"{dist.name}: {name} {installed[name]} installed, not {VERSION}")
    others = [o for o in ORCHESTRATORS if o in installed and o != dist.orchestrator]
    if others:
        report.problem(f"{dist.name}: other orchestrators came along: {others}")
    if dist.orchestrator and dist.orchestrator not in installed:
        report.problem(f"{dist.name}: {dist.orchestrator} was not installed")
    mine = f", {dist.orchestrator} {installed.get(dist.orchestrator)}" if dist.orchestrator else ""
    report.note(f"installed: {len(installed)} distributions{mine}")


def check_install(
    uv: str,
    dist: Distribution,
    lines: dict[str, str],
    constraints: Path,
    work: Path,
    report: Report,
) -> None:
    line = lines.get(dist.install)
    if line is None:
        return  # already reported against README.md
    report.step(f"fresh environment for {dist.name}: {line}")
    started = time.monotonic()
    venv = work / "venvs" / dist.name
    made = run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        cwd=work,
        env=environment(work),
    )
    python = venv / "bin" / "python"
    if made.returncode != 0:
        report.problem(f"{dist.name}: uv venv failed:\n{tail(made.stderr)}")
        return
    if error := pip_install(uv, line, python, constraints, work):
        report.problem(f"{dist.name}: `{line}` failed:\n{error}")
        return
    check_alone(dist, probe(dist, python, work, report), report)
    for requirement, module in dist.also:
        also = lines.get(requirement)
        if also is None:
            continue  # already reported
        report.note(f"then: {also}")
        if error := pip_install(uv, also, python, constraints, work):
            report.problem(f"{dist.name}: `{also}` failed:\n{error}")
        elif module and run([str(python), "-c", f"import {module}"], cwd=work).returncode:
            report.problem(f"{dist.name}: `{also}` did not make {module} importable")
    report.note(f"{time.monotonic() - started:.0f} s")


# --- main -----------------------------------------------------------------------------------


def check(work: Path, only: set[str]) -> Report:
    report = Report()
    uv = find_uv()
    build_line, lines = install_lines(report)
    dist = work / "dist"
    files = build(uv, build_line, dist, report)
    if files:
        twine_check(files, report)
        check_distributions(files, report)
        constraints = export_constraints(uv, work, report)
        check_prefect_bound(uv, constraints, work, report)
        for distribution in DISTRIBUTIONS:
            if not only or distribution.name in only:
                check_install(uv, distribution, lines, constraints, work, report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(NAMES),
        default=[],
        help="install only these distributions (all are built and checked)",
    )
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = check(args.keep.resolve(), set(args.only))
    else:
        with tempfile.TemporaryDirectory(prefix="release-check-") as work:
            report = check(Path(work), set(args.only))
    if report.problems:
        print(
            f"release check FAILED in {report.elapsed():.0f} s, {len(report.problems)} problems:",
            file=sys.stderr,
        )
        for problem in report.problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    installed = len(args.only) or len(DISTRIBUTIONS)
    print(
        f"release check passed in {report.elapsed():.0f} s: {len(DISTRIBUTIONS)} distributions "
        f"built and checked, {installed} installed alone and loaded",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
