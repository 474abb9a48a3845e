"""Screenshots of the main pages for the README, from a real run.

    .venv/bin/python -m tests.web.make_screenshots [--out docs/screenshots]

Starts a server (local executor) in a temporary directory, submits the demo's gang
(examples/standalone/gang.yaml) and a few more jobs through the REST gateway (two queues, one
job failing, one running long, a backlog that waits), and saves the queues, job set and job
pages, the scheduling reports of a queue and of a waiting job, the jobs list grouped by state
and the nodes page as PNGs taken by headless Chromium (`--only nodes job-report` takes some of
them).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from armada_server.config import NodeGroup

from .conftest import CHROMEDRIVER, CHROMIUM, start_server
from .helpers import Http, eventually, job

ROOT = Path(__file__).resolve().parents[2]


def driver(profile: str):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

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
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--window-size=1360,900",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def shoot(browser, url: str, path: Path, css_ready: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    WebDriverWait(browser, 60).until(ec.presence_of_element_located((By.CSS_SELECTOR, css_ready)))
    time.sleep(1.5)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1360, min(max(height + 40, 600), 1400))
    time.sleep(0.5)
    browser.save_screenshot(str(path))
    print(f"{path}: {path.stat().st_size // 1024} KiB", file=sys.stderr)


SHOTS = ["queues", "jobset", "job", "queue-report", "job-report", "jobs-grouped", "nodes"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--only", nargs="+", choices=SHOTS, default=SHOTS, metavar="SHOT")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="armada-shots-"))
    server = start_server(tmp, nodes=(NodeGroup(2, "2", "4Gi"),))
    server.server.http.sampler.period = 2.0
    try:
        base = f"http://127.0.0.1:{server.server.http_port}"
        http = Http(base)
        http.post("/api/v1/queues", {"name": "demo"}, expect=201)
        http.post("/api/v1/queues", {"name": "research", "priorityFactor": 2}, expect=201)
        gang = yaml.safe_load((ROOT / "examples/standalone/gang.yaml").read_text())
        gang["jobSetId"] = "gang-demo"
        ids = http.post("/api/v1/jobs", gang)["jobIds"]
        research = http.submit(
            "research",
            "sweep",
            *[job(f"echo trial {i}; sleep 90", annotations={"trial": str(i)}) for i in range(3)],
        )
        [broken] = http.submit(
            "demo",
            "nightly",
            job(
                "echo loading data; echo 'input table is empty' > /dev/termination-log; "
                "echo 'ValueError: no rows' >&2; exit 2"
            ),
            job("echo ok"),
        )[:1]
        for job_id in ids:
            http.wait_state(job_id, "SUCCEEDED", timeout=120)
        http.wait_state(broken, "FAILED")
        for job_id in research:
            http.wait_state(job_id, "RUNNING")
        big = job("sleep 60")
        big["podSpec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "1500m", "memory": "1Gi"},
            "limits": {"cpu": "1500m", "memory": "1Gi"},
        }
        backlog = http.submit("demo", "backlog", big, big, big)  # more than fits: some wait
        waiting = eventually(
            lambda: next(
                (j for j in backlog if http.get(f"/api/v1/jobs/{j}/report")["history"]), None
            ),
            timeout=60,
            what="a waiting job's reasons",
        )
        time.sleep(3)  # a few cycles of waiting
        eventually(
            lambda: len(server.server.http.sampler.samples) > 10, timeout=60, what="share samples"
        )
        profile = tempfile.mkdtemp(prefix="armada-chromium-")
        browser = driver(profile)
        try:
            pages = {
                "queues": (f"{base}/queues", "#live-status.live-on"),
                "jobset": (f"{base}/jobsets/demo/gang-demo", "#jobs-table"),
                "job": (f"{base}/jobs/{broken}", "#timeline"),
                "queue-report": (f"{base}/queues/demo", "#queue-report"),
                "job-report": (f"{base}/jobs/{waiting}", "#job-report"),
                "jobs-grouped": (f"{base}/jobs?groupBy=state", "#groups-table"),
                "nodes": (f"{base}/nodes", "#nodes-table"),
            }
            for name in args.only:
                url, ready = pages[name]
                shoot(browser, url, args.out / f"{name}.png", ready)
        finally:
            browser.quit()
            shutil.rmtree(profile, ignore_errors=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
