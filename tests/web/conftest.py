"""A real server (local executor) and a real headless Chromium driven by Selenium."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from armada_server.app import EmbeddedServer

from .helpers import Http

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def start_server(tmp: Path, **overrides) -> EmbeddedServer:  # type: ignore[no-untyped-def]
    settings = dict(
        database_url=f"sqlite:///{tmp / 'armada.db'}",
        executor="local",
        sandbox_dir=str(tmp / "pods"),
        scheduling_period=0.2,
        executor_sync_interval=0.2,
        heartbeat_seconds=1.0,
    )
    settings.update(overrides)
    return EmbeddedServer(**settings).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    running = start_server(tmp_path_factory.mktemp("web"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def base_url(server: EmbeddedServer) -> str:
    return f"http://127.0.0.1:{server.server.http_port}"


@pytest.fixture(scope="module")
def http(base_url: str) -> Http:
    return Http(base_url)


def chromium_available() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        message = (
            f"{', '.join(missing)} missing: install Debian's chromium and "
            "chromium-driver (scripts/install-browser.sh does, as root)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs them: never skip there
        pytest.skip(message)


@pytest.fixture(scope="session")
def browser() -> Iterator:  # type: ignore[type-arg]
    chromium_available()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="armada-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
