"""End to end in a real headless Chromium: the pages, live updates, logs and actions."""

from __future__ import annotations

import grpc
import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from armada_core.api import event_pb2, event_pb2_grpc

from .helpers import Http, eventually, job, pod

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
WAIT = 90  # seconds: the machine is small and shared


def wait(browser, timeout: float = WAIT) -> WebDriverWait:  # type: ignore[no-untyped-def]
    # Pages re-render as data arrives: an element found a moment ago may have been replaced.
    return WebDriverWait(
        browser,
        timeout,
        poll_frequency=0.2,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    )


def click(browser, css: str) -> None:  # type: ignore[no-untyped-def]
    """Click an element of a live region: found and clicked in one try, retried when the
    region was re-rendered in between (the element found is then stale)."""

    def clicked(driver):  # type: ignore[no-untyped-def]
        element = driver.find_element(By.CSS_SELECTOR, css)
        if not (element.is_displayed() and element.is_enabled()):
            return False
        element.click()
        return True

    wait(browser).until(clicked)


def text_of(browser, css: str) -> str:  # type: ignore[no-untyped-def]
    return browser.find_element(By.CSS_SELECTOR, css).text


def queue_count(browser, queue: str, which: str):  # type: ignore[no-untyped-def]
    def probe(driver):  # type: ignore[no-untyped-def]
        cells = driver.find_elements(
            By.CSS_SELECTOR, f'tr[data-queue="{queue}"] td[data-count="{which}"]'
        )
        return int(cells[0].text) if cells else None

    return probe


def live(browser) -> None:  # type: ignore[no-untyped-def]
    """Wait until the page's live-update stream is connected."""
    wait(browser).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#live-status.live-on")))


def test_queues_page_shows_jobs_arrive_and_finish_live(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "live", "priorityFactor": 1}, expect=201)
    browser.get(f"{base_url}/queues")
    wait(browser).until(ec.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-queue="live"]')))
    live(browser)
    assert wait(browser).until(lambda d: queue_count(d, "live", "succeeded")(d) == 0 or None)
    # Submitted through the API while the page is open: nothing reloads the page.
    marker = browser.find_element(By.TAG_NAME, "body")
    browser.execute_script("document.body.dataset.marker = 'same-page'")
    ids = http.submit("live", "first", *[job("sleep 1") for _ in range(3)])
    wait(browser).until(
        lambda d: (
            (queue_count(d, "live", "queued")(d) or 0) + (queue_count(d, "live", "running")(d) or 0)
            > 0
        )
    )
    wait(browser).until(lambda d: queue_count(d, "live", "succeeded")(d) == 3)
    assert marker.get_attribute("data-marker") == "same-page"  # updated in place
    # The job set page lists them, finished.
    browser.find_element(By.LINK_TEXT, "live").click()
    wait(browser).until(ec.presence_of_element_located((By.LINK_TEXT, "first"))).click()
    wait(browser).until(ec.presence_of_element_located((By.ID, "jobs-table")))
    for job_id in ids:
        row = browser.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{job_id}"]')
        assert (
            row.find_element(By.CSS_SELECTOR, "[data-state]").get_attribute("data-state")
            == "SUCCEEDED"
        )


def test_job_set_page_follows_new_jobs_live(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "follow"}, expect=201)
    [first] = http.submit("follow", "set", job("sleep 2"))
    browser.get(f"{base_url}/jobsets/follow/set")
    wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-job-id="{first}"]'))
    )
    live(browser)
    [second] = http.submit("follow", "set", job("sleep 1"))
    wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-job-id="{second}"]'))
    )
    wait(browser).until(
        lambda d: d.find_elements(
            By.CSS_SELECTOR, f'tr[data-job-id="{second}"] [data-state="SUCCEEDED"]'
        )
    )
    assert "succeeded" in text_of(browser, "#jobset-counts")


def test_failed_job_page_shows_exit_code_message_and_logs(
    browser, base_url: str, http: Http
) -> None:
    http.post("/api/v1/queues", {"name": "fails"}, expect=201)
    [job_id] = http.submit(
        "fails",
        "broken",
        job(
            "echo starting the work; echo 'disk full' > /dev/termination-log; "
            "echo something went wrong >&2; exit 7"
        ),
    )
    http.wait_state(job_id, "FAILED")
    browser.get(f"{base_url}/jobs/{job_id}")
    wait(browser).until(ec.presence_of_element_located((By.ID, "runs-table")))
    assert "failed" in text_of(browser, "#job-state")
    exit_code = browser.find_element(By.CSS_SELECTOR, '#runs-table .exit[data-container="main"]')
    assert "7" in exit_code.text
    assert "disk full" in text_of(browser, "#runs-table td.message")
    assert "exit" in text_of(browser, "#job-error") and "7" in text_of(browser, "#job-error")
    kinds = [
        li.get_attribute("data-event")
        for li in browser.find_elements(By.CSS_SELECTOR, "#timeline li[data-event]")
    ]
    assert kinds[0] == "submitted" and "failed" in kinds and "running" in kinds
    wait(browser).until(lambda d: "something went wrong" in d.find_element(By.ID, "logs").text)
    assert "starting the work" in text_of(browser, "#logs")


def test_logs_follow_a_running_job(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "chatty"}, expect=201)
    [job_id] = http.submit(
        "chatty", "talk", job("for i in 1 2 3 4 5 6; do echo line-$i; sleep 1; done")
    )
    http.wait_state(job_id, "RUNNING", "SUCCEEDED")
    browser.get(f"{base_url}/jobs/{job_id}")
    wait(browser).until(lambda d: "line-1" in d.find_element(By.ID, "logs").text)
    wait(browser).until(lambda d: "line-6" in d.find_element(By.ID, "logs").text)
    wait(browser).until(
        lambda d: (
            d.find_element(By.ID, "job-summary").get_attribute("data-job-state") == "SUCCEEDED"
        )
    )
    lines = text_of(browser, "#logs").split()
    assert lines == [f"line-{i}" for i in range(1, 7)]  # each line once, in order


def test_cancel_a_job_from_the_ui(browser, base_url: str, http: Http, server) -> None:  # type: ignore[no-untyped-def]
    http.post("/api/v1/queues", {"name": "stop"}, expect=201)
    [job_id] = http.submit("stop", "long", job("sleep 120"))
    http.wait_state(job_id, "RUNNING")
    browser.get(f"{base_url}/jobs/{job_id}")
    live(browser)
    button = wait(browser).until(ec.element_to_be_clickable((By.ID, "cancel-job")))
    # Keeping the job first: nothing happens.
    button.click()
    wait(browser).until(ec.visibility_of_element_located((By.ID, "confirm-no"))).click()
    assert http.state(job_id) == "RUNNING"
    browser.find_element(By.ID, "cancel-job").click()
    dialog_text = (
        wait(browser).until(ec.visibility_of_element_located((By.ID, "confirm-message"))).text
    )
    assert job_id in dialog_text
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser).until(lambda d: "cancelled 1 job" in d.find_element(By.ID, "flash").text)
    wait(browser).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#timeline li[data-event="cancelled"]')
    )
    assert "cancelled" in text_of(browser, "#job-state")
    assert not browser.find_elements(By.ID, "cancel-job")
    # The event is in the job set's log for every client.
    with grpc.insecure_channel(server.address) as channel:
        events = [
            m.message.WhichOneof("events")
            for m in event_pb2_grpc.EventStub(channel).GetJobSetEvents(
                event_pb2.JobSetRequest(queue="stop", id="long"), timeout=30
            )
        ]
    assert "cancelled" in events


def test_reprioritize_a_job_set_and_cordon_a_queue(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "tune"}, expect=201)
    # A cordoned queue takes no new jobs: they are submitted while the nodes are cordoned,
    # then the queue is cordoned (nothing of it is scheduled meanwhile) and the nodes are not.
    nodes = [n["id"] for n in http.get("/api/v1/nodes")["nodes"]]
    for node in nodes:
        http.post("/api/v1/nodes/cordon", {"node": node})
    try:
        ids = http.submit("tune", "batch", job("true"), job("true"))
        http.post("/api/v1/queues/tune/cordon", {})
    finally:
        for node in nodes:
            http.post("/api/v1/nodes/uncordon", {"node": node})
    browser.get(f"{base_url}/jobsets/tune/batch")
    wait(browser).until(ec.element_to_be_clickable((By.ID, "reprioritize-jobset"))).click()
    field = wait(browser).until(ec.visibility_of_element_located((By.ID, "confirm-input")))
    field.send_keys("5")
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser).until(lambda d: "done for 2 job" in d.find_element(By.ID, "flash").text)
    assert {http.get(f"/api/v1/jobs/{i}")["priority"] for i in ids} == {5.0}
    browser.get(f"{base_url}/queues/tune")
    wait(browser).until(ec.element_to_be_clickable((By.ID, "uncordon-queue"))).click()
    wait(browser).until(ec.element_to_be_clickable((By.ID, "confirm-ok"))).click()
    wait(browser).until(ec.presence_of_element_located((By.ID, "cordon-queue")))
    assert http.get("/api/v1/queues/tune").get("cordoned", False) is False
    for job_id in ids:
        http.wait_state(job_id, "SUCCEEDED")


def jobs_on_page(browser) -> tuple[list[str], str | None]:  # type: ignore[no-untyped-def]
    """The job ids the jobs page lists and its next page's address (None on the last),
    read in one try: the table re-renders as jobs change, and a try that meets a
    re-rendered row or link is retried."""

    def read(driver):  # type: ignore[no-untyped-def]
        rows = driver.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-job-id]")
        if not rows:
            return False
        ids = [r.get_attribute("data-job-id") for r in rows]
        links = driver.find_elements(By.ID, "next-page")
        return ids, links[0].get_attribute("href") if links else None

    found: tuple[list[str], str | None] = wait(browser).until(read)
    return found


def test_pages_left_behind_close_their_live_streams(browser, base_url: str, server) -> None:  # type: ignore[no-untyped-def]
    """A browser keeps pages it left (its back-forward cache) and allows a site six
    connections: left pages holding their streams open would leave none for the next page,
    which would then hang (for a minute, until the browser drops the oldest)."""
    browser.set_page_load_timeout(WAIT / 3)
    try:
        for path in ("/queues", "/jobs", "/nodes") * 3:
            browser.get(f"{base_url}{path}")
            live(browser)
    finally:
        browser.set_page_load_timeout(300)  # WebDriver's default
    feed = server.server.http.web.feed
    eventually(lambda: feed.streams == 1, what="only the open page's live stream")
    browser.back()  # a page shown again from the cache follows changes again
    live(browser)
    eventually(lambda: feed.streams == 1, what="only the page shown again has a stream")


def test_jobs_page_filters_sorts_and_pages(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "many"}, expect=201)
    ids = http.submit(
        "many",
        "pages",
        *[job("true", annotations={"team": "a" if i % 2 else "b"}) for i in range(7)],
    )
    browser.get(f"{base_url}/jobs?queue=many&limit=3")
    seen, next_page = jobs_on_page(browser)
    while next_page is not None:
        browser.get(next_page)  # where the page's "next" link goes
        more, next_page = jobs_on_page(browser)
        seen += more
    assert seen == sorted(ids, reverse=True)  # newest first, each once
    browser.get(f"{base_url}/jobs?queue=many&annotation=team%3Da")
    assert set(jobs_on_page(browser)[0]) == {ids[i] for i in (1, 3, 5)}
    wait(browser).until(lambda d: d.find_element(By.LINK_TEXT, "job").click() or True)
    wait(browser).until(lambda d: "order=asc" in d.current_url)  # sorted by id, the other way
    assert jobs_on_page(browser)[0] == [ids[i] for i in (1, 3, 5)]


def test_cordon_and_uncordon_a_node_from_the_ui(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "nodes"}, expect=201)
    browser.get(f"{base_url}/nodes")
    row = 'tr[data-node="local/local-0"]'
    click(browser, f"{row} .cordon-node")
    assert (
        "local/local-0"
        in wait(browser).until(ec.visibility_of_element_located((By.ID, "confirm-message"))).text
    )
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser).until(ec.element_to_be_clickable((By.CSS_SELECTOR, f"{row} .uncordon-node")))
    assert "cordoned" in text_of(browser, f"{row} .node-state")
    # Nothing is placed on the only node while it is cordoned.
    [job_id] = http.submit("nodes", "wait", job("true"))
    eventually(lambda: http.get(f"/api/v1/jobs/{job_id}").get("schedulingReason"))
    assert http.state(job_id) == "QUEUED"
    click(browser, f"{row} .uncordon-node")
    wait(browser).until(ec.element_to_be_clickable((By.ID, "confirm-ok"))).click()
    wait(browser).until(ec.element_to_be_clickable((By.CSS_SELECTOR, f"{row} .cordon-node")))
    http.wait_state(job_id, "SUCCEEDED")


def test_jobs_page_groups_with_counts(browser, base_url: str, http: Http) -> None:
    from selenium.webdriver.support.ui import Select

    http.post("/api/v1/queues", {"name": "grouping"}, expect=201)
    ones = http.submit("grouping", "one", *[job("true") for _ in range(3)])
    twos = http.submit("grouping", "two", job("true"))
    for job_id in (*ones, *twos):
        http.wait_state(job_id, "SUCCEEDED")
    browser.get(f"{base_url}/jobs?queue=grouping")
    Select(browser.find_element(By.ID, "group-by")).select_by_visible_text("job set")
    browser.find_element(By.ID, "apply-filters").click()
    wait(browser).until(lambda d: "groupBy=jobSet" in d.current_url)
    rows = wait(browser).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#groups-table tr[data-group]")
    )
    counts = [
        (r.get_attribute("data-group"), r.find_element(By.CSS_SELECTOR, ".group-count").text)
        for r in rows
    ]
    assert counts == [("one", "3"), ("two", "1")]  # largest first
    browser.find_element(By.LINK_TEXT, "two").click()  # the group's jobs
    wait(browser).until(lambda d: "jobSet=two" in d.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-job-id]")
    assert [r.get_attribute("data-job-id") for r in rows] == twos
    assert not browser.find_elements(By.ID, "groups-table")
    browser.get(f"{base_url}/jobs?queue=grouping&groupBy=state")
    cell = wait(browser).until(
        lambda d: d.find_element(By.CSS_SELECTOR, '#groups-table tr[data-group="SUCCEEDED"] td.num')
    )
    assert cell.text == "4"


def test_nodes_page_shows_used_and_free_and_the_jobs_on_each_node(
    browser, base_url: str, http: Http
) -> None:
    http.post("/api/v1/queues", {"name": "onnode"}, expect=201)
    [job_id] = http.submit("onnode", "held", {"podSpec": pod("sleep 60", cpu="500m")})
    http.wait_state(job_id, "RUNNING")
    browser.get(f"{base_url}/nodes")
    row = 'tr[data-node="local/local-0"]'
    link = f'{row} .node-jobs a[href="/jobs/{job_id}"]'
    wait(browser).until(lambda d: d.find_element(By.CSS_SELECTOR, link))

    # The page re-renders as its data refreshes: each read finds its elements afresh.
    def resource_texts(resource: str) -> tuple[str, str, str]:
        def read(driver):  # type: ignore[no-untyped-def]
            cell = driver.find_element(
                By.CSS_SELECTOR, f'{row} .resource[data-resource="{resource}"]'
            )
            return tuple(
                cell.find_element(By.CSS_SELECTOR, c).text for c in (".used", ".total", ".free")
            )

        texts: tuple[str, str, str] = wait(browser).until(read)
        return texts

    used, total, free = resource_texts("cpu")
    assert all(text.endswith(" CPU") for text in (used, total, free)), (used, total, free)

    def millicores(text: str) -> float:
        number = text.removesuffix(" CPU")
        return float(number[:-1]) if number.endswith("m") else float(number) * 1000

    assert millicores(used) >= 500  # this job's request, and any other job running there
    assert millicores(free) == millicores(total) - millicores(used)
    assert resource_texts("memory")[1].endswith("iB")
    click(browser, link)
    wait(browser).until(lambda d: d.current_url.endswith(f"/jobs/{job_id}"))
    http.post("/api/v1/jobs/cancel", {"queue": "onnode", "jobSetId": "held", "jobIds": [job_id]})


def test_bulk_cancel_from_the_jobs_list_says_how_many(browser, base_url: str, http: Http) -> None:
    http.post("/api/v1/queues", {"name": "sweep"}, expect=201)
    [done] = http.submit("sweep", "old", job("true"))
    http.wait_state(done, "SUCCEEDED")
    live_ids = http.submit("sweep", "new", *[job("sleep 120") for _ in range(3)])
    browser.get(f"{base_url}/jobs?queue=sweep")
    click(browser, "#bulk-cancel")
    message = wait(browser).until(ec.visibility_of_element_located((By.ID, "confirm-message")))
    assert message.text == "Cancel 3 live job(s) matching this filter?"
    browser.find_element(By.ID, "confirm-no").click()  # keeping them: nothing happens
    assert "CANCELLED" not in {http.state(j) for j in live_ids}
    click(browser, "#bulk-cancel")
    wait(browser).until(ec.element_to_be_clickable((By.ID, "confirm-ok"))).click()
    wait(browser).until(lambda d: "3 job(s)" in d.find_element(By.ID, "flash").text)
    assert {http.state(j) for j in live_ids} == {"CANCELLED"}
    assert http.state(done) == "SUCCEEDED"
    click(browser, "#bulk-cancel")  # nothing left to cancel: said, not asked
    wait(browser).until(lambda d: "no job you may change" in d.find_element(By.ID, "flash").text)
