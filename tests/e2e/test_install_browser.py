"""scripts/install-browser.sh checks the browser and its driver each on its own.

The browser tests need /usr/bin/chromium and /usr/bin/chromedriver; a machine often has the
first without the second. The script runs here with those paths pointed into a temporary
directory (CHROMIUM, CHROMEDRIVER) that is also first on PATH, with apt-get there a recorder.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-browser.sh"

pytestmark = [pytest.mark.e2e]


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "$0 $*" >>"$(dirname "$0")/calls"\n')
    path.chmod(0o755)
    return path


def run(tmp_path: Path, *args: str, chromium: bool, chromedriver: bool) -> tuple[int, str, str]:
    """The script with the browser (and driver) present or not; returns its status, its
    output and the apt-get calls it made."""
    chromium_path = tmp_path / "bin" / "chromium"
    driver_path = tmp_path / "bin" / "chromedriver"
    if chromium:
        executable(chromium_path)
    if chromedriver:
        executable(driver_path)
    executable(tmp_path / "bin" / "apt-get")
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "CHROMIUM": str(chromium_path),
        "CHROMEDRIVER": str(driver_path),
    }
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60
    )
    calls = tmp_path / "bin" / "calls"
    return done.returncode, done.stdout + done.stderr, calls.read_text() if calls.exists() else ""


def test_check_finds_the_missing_driver_next_to_the_browser(tmp_path: Path) -> None:
    status, out, calls = run(tmp_path, "--check", chromium=True, chromedriver=False)
    assert status == 1, out
    driver = tmp_path / "bin" / "chromedriver"
    assert out.splitlines() == [f"missing: {driver} (Debian package chromium-driver)"]
    assert calls == ""  # --check installs nothing


def test_check_names_both_when_neither_is_there(tmp_path: Path) -> None:
    status, out, _ = run(tmp_path, "--check", chromium=False, chromedriver=False)
    assert status == 1, out
    assert [line.split("(")[1] for line in out.splitlines()] == [
        "Debian package chromium)",
        "Debian package chromium-driver)",
    ]


def test_check_passes_when_both_are_there(tmp_path: Path) -> None:
    status, out, _ = run(tmp_path, "--check", chromium=True, chromedriver=True)
    assert status == 0, out
    assert "are installed" in out


def test_the_driver_alone_is_installed_when_the_browser_is_there(tmp_path: Path) -> None:
    status, out, calls = run(tmp_path, chromium=True, chromedriver=False)
    assert status == 0, out
    if os.geteuid() == 0:
        apt_get = tmp_path / "bin" / "apt-get"
        assert calls.splitlines() == [
            f"{apt_get} update -qq",
            f"{apt_get} install -y -qq chromium-driver",
        ]
    else:  # only root installs; others are told what to install
        assert calls == ""
        assert "install chromium-driver" in out


def test_nothing_is_installed_when_both_are_there(tmp_path: Path) -> None:
    status, out, calls = run(tmp_path, chromium=True, chromedriver=True)
    assert (status, out, calls) == (0, "", "")
