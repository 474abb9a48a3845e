"""With authentication on, pages and API refuse callers without valid credentials, and queue
permissions decide what each user may do, over HTTP as over gRPC."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from armada_server.app import EmbeddedServer
from armada_server.auth import AuthConfig, BasicUser, StaticToken

from .conftest import start_server
from .helpers import Http, job


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


ADMIN = basic("admin", "admin-pw")
OWNER = basic("olga", "olga-pw")
VIEWER = basic("vic", "vic-pw")
WATCHER = basic("wendy", "wendy-pw")
AUTH = AuthConfig(
    enabled=True,
    basic_users={
        "admin": BasicUser("admin-pw"),
        "olga": BasicUser("olga-pw"),
        "vic": BasicUser("vic-pw"),
        "wendy": BasicUser("wendy-pw"),
    },
    tokens=(StaticToken("ci-token", "ci"),),
    admins=("admin",),
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    server = start_server(tmp_path_factory.mktemp("auth"), auth=AUTH)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def base(secured: EmbeddedServer) -> str:
    return f"http://127.0.0.1:{secured.server.http_port}"


PAGES = ["/", "/queues", "/queues/team", "/jobs", "/jobsets/team/s", "/ui/live"]
API = [
    ("GET", "/api/v1/queues"),
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/shares"),
    ("POST", "/api/v1/jobs"),
    ("POST", "/api/v1/jobs/cancel"),
    ("GET", "/api/v1/events?queue=team&jobSetId=s"),
    ("GET", "/api/v1/jobs/status?id=x"),
]


@pytest.mark.parametrize(
    "credentials",
    [None, basic("admin", "wrong"), basic("nobody", "x"), "Bearer not-a-token", "Basic !!!"],
)
def test_everything_but_public_paths_needs_credentials(base: str, credentials) -> None:  # type: ignore[no-untyped-def]
    http = Http(base, credentials)
    for path in PAGES:
        status, headers, body = http.request("GET", path)
        assert status == 401, path
        assert headers["www-authenticate"].startswith("Basic realm=")  # the browser asks
        assert b"<html" in body.lower() or b"<!doctype" in body.lower()
    for method, path in API:
        status, headers, body = http.request(method, path, {} if method == "POST" else None)
        assert status == 401, path
        assert json.loads(body)["error"]["code"] == "UNAUTHENTICATED"
    for public in ("/metrics", "/api/v1/openapi.json", "/healthz", "/static/app.css"):
        assert http.request("GET", public)[0] == 200, public


def test_credentials_and_queue_permissions(base: str) -> None:
    admin, owner, viewer = Http(base, ADMIN), Http(base, OWNER), Http(base, VIEWER)
    token = Http(base, "Bearer ci-token")
    admin.post("/api/v1/queues", {"name": "team", "userOwners": ["olga"]}, expect=201)
    viewer.post("/api/v1/queues", {"name": "mine"}, expect=403)  # only admins create queues
    # Reading needs only authentication; submitting needs a permission on the queue.
    assert [q["name"] for q in token.get("/api/v1/queues")["queues"]] == ["team"]
    assert (
        viewer.post(
            "/api/v1/jobs", {"queue": "team", "jobSetId": "s", "jobs": [job()]}, expect=403
        )["error"]["code"]
        == "PERMISSION_DENIED"
    )
    [job_id] = owner.submit("team", "s", job("sleep 30"))
    assert owner.get(f"/api/v1/jobs/{job_id}")["owner"] == "olga"  # the authenticated user
    viewer.post(
        "/api/v1/jobs/cancel", {"queue": "team", "jobSetId": "s", "jobIds": [job_id]}, expect=403
    )
    viewer.get(f"/api/v1/jobs/{job_id}/logs", expect=403)
    status, _, _ = viewer.request("GET", "/api/v1/events?queue=team&jobSetId=s")
    assert status == 403
    owner.post("/api/v1/queues/team/cordon", {}, expect=403)  # admins only
    # Pages: everyone signed in sees them; actions show only to those who may use them.
    status, _, page = viewer.request("GET", f"/jobs/{job_id}")
    assert status == 200 and b"signed in as <b>vic</b>" in page
    assert b'id="cancel-job"' not in page and b"may not watch" in page
    status, _, page = owner.request("GET", f"/jobs/{job_id}")
    assert b'id="cancel-job"' in page and b'id="logs-box"' in page
    status, _, page = owner.request("GET", "/queues/team")
    assert b'id="cordon-queue"' not in page
    status, _, page = admin.request("GET", "/queues/team")
    assert b'id="cordon-queue"' in page
    assert owner.post(
        "/api/v1/jobs/cancel", {"queue": "team", "jobSetId": "s", "jobIds": [job_id]}
    ) == {"cancelledIds": [job_id]}
    assert admin.get(f"/api/v1/jobs/{job_id}")["cancelUser"] == "olga"


@pytest.mark.e2e
def test_browser_signs_in_with_basic_auth(browser, base: str, secured) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    Http(base, ADMIN).request("POST", "/api/v1/queues", {"name": "web"})
    port = secured.server.http_port
    browser.get(f"http://admin:admin-pw@127.0.0.1:{port}/queues")
    wait = WebDriverWait(browser, 60, poll_frequency=0.2)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-queue="web"]')))
    assert "signed in as admin" in browser.find_element(By.CLASS_NAME, "who").text
    # The page's own requests (live updates) are authenticated too.
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#live-status.live-on")))


def test_nodes_page_names_only_jobs_the_caller_may_watch(base: str) -> None:
    admin, owner, viewer = Http(base, ADMIN), Http(base, OWNER), Http(base, VIEWER)
    admin.post("/api/v1/queues", {"name": "private", "userOwners": ["olga"]}, expect=201)
    [job_id] = owner.submit("private", "s", job("sleep 30"))
    owner.wait_state(job_id, "RUNNING")
    status, _, page = owner.request("GET", "/nodes")
    assert status == 200 and job_id.encode() in page
    status, _, page = viewer.request("GET", "/nodes")
    assert status == 200 and job_id.encode() not in page
    assert b"in queues you may not watch" in page
    owner.post("/api/v1/jobs/cancel", {"queue": "private", "jobSetId": "s", "jobIds": [job_id]})


def test_bulk_actions_reach_only_queues_the_caller_may_act_in(base: str) -> None:
    admin, owner, viewer = Http(base, ADMIN), Http(base, OWNER), Http(base, VIEWER)
    admin.post("/api/v1/queues", {"name": "olgas", "userOwners": ["olga"]}, expect=201)
    admin.post("/api/v1/queues", {"name": "theirs"}, expect=201)
    mine = owner.submit("olgas", "s", job("sleep 60"), job("sleep 60"))
    theirs = admin.submit("theirs", "s", *[job("sleep 60") for _ in range(3)])
    every = admin.post("/api/v1/bulk/cancel", {"dryRun": True})
    assert every["excluded"] == 0 and every["count"] >= 5
    # Naming a queue the caller may not act in is refused; without a queue it is left out.
    error = viewer.post("/api/v1/bulk/cancel", {"queue": "olgas"}, expect=403)["error"]
    assert error["code"] == "PERMISSION_DENIED" and "olgas" in error["message"]
    viewer.post("/api/v1/bulk/reprioritize", {"queue": "theirs", "newPriority": 1}, expect=403)
    assert viewer.post("/api/v1/bulk/cancel", {"dryRun": True}) == {
        "count": 0,
        "excluded": every["count"],
    }
    assert owner.post("/api/v1/bulk/cancel", {"queue": "olgas", "dryRun": True}) == {
        "count": 2,
        "excluded": 0,
    }
    owner.post("/api/v1/bulk/cancel", {"queue": "theirs", "dryRun": True}, expect=403)
    counted = owner.post("/api/v1/bulk/cancel", {"dryRun": True})
    assert counted["count"] + counted["excluded"] == every["count"]
    assert counted["excluded"] >= 3  # theirs
    done = owner.post("/api/v1/bulk/cancel", {})
    assert set(mine) <= set(done["jobIds"]) and not set(theirs) & set(done["jobIds"])
    assert {admin.state(j) for j in mine} == {"CANCELLED"}
    assert admin.get(f"/api/v1/jobs/{mine[0]}")["cancelUser"] == "olga"
    assert "CANCELLED" not in {admin.state(j) for j in theirs}
    admin.post("/api/v1/bulk/cancel", {"queue": "theirs"})
    assert {admin.state(j) for j in theirs} == {"CANCELLED"}


def _all_pages(http: Http, query: str) -> list[str]:
    """Every job id of a list, one job a page, following the `next` cursors."""
    ids: list[str] = []
    cursor = ""
    for _ in range(50):
        page = http.get(f"/api/v1/jobs?limit=1&{query}{cursor}")
        ids += [row["id"] for row in page["jobs"]]
        if page["next"] is None:
            return ids
        cursor = f"&cursor={page['next']}"
    raise AssertionError(f"more than 50 pages: {ids}")


def test_job_lists_show_only_queues_the_caller_may_watch(base: str) -> None:
    admin, watcher = Http(base, ADMIN), Http(base, WATCHER)
    may_watch = [{"subjects": [{"kind": "User", "name": "wendy"}], "verbs": ["watch"]}]
    admin.post("/api/v1/queues", {"name": "seen", "permissions": may_watch}, expect=201)
    admin.post("/api/v1/queues", {"name": "unseen"}, expect=201)
    # Interleaved by id, so the watcher's pages skip the other queue's jobs between theirs.
    seen = admin.submit("seen", "a", job())
    unseen = admin.submit("unseen", "b", job(), job())
    seen += admin.submit("seen", "a", job())
    unseen += admin.submit("unseen", "b", job())

    # The API list and its paging: only the watched queue's jobs, newest first.
    rows = watcher.get("/api/v1/jobs?limit=500")["jobs"]
    assert [r["id"] for r in rows] == seen[::-1] and {r["queue"] for r in rows} == {"seen"}
    assert _all_pages(watcher, "order=asc") == seen
    assert _all_pages(watcher, "") == seen[::-1]
    assert [r["id"] for r in watcher.get("/api/v1/jobs?queue=seen")["jobs"]] == seen[::-1]
    # Naming a queue the caller may not watch is refused, as its events are.
    for path in ("/api/v1/jobs?queue=unseen", "/api/v1/jobs/groups?groupBy=state&queue=unseen"):
        error = watcher.get(path, expect=403)["error"]
        assert error["code"] == "PERMISSION_DENIED" and "unseen" in error["message"], path
    watcher.get("/api/v1/jobs?queue=nosuch", expect=404)

    # Group counts count only the watched queue's jobs.
    groups = watcher.get("/api/v1/jobs/groups?groupBy=queue")
    assert groups["groups"] == [{"value": "seen", "count": 2}] and not groups["more"]
    by_set = watcher.get("/api/v1/jobs/groups?groupBy=jobSet")["groups"]
    assert by_set == [{"value": "a", "count": 2, "queue": "seen"}]
    by_state = watcher.get("/api/v1/jobs/groups?groupBy=state")["groups"]
    assert sum(g["count"] for g in by_state) == 2

    # The HTML list, its groups and its queue menu; a job set's page lists only watched jobs.
    status, _, page = watcher.request("GET", "/jobs?limit=500")
    assert status == 200 and all(j.encode() in page for j in seen)
    assert not any(j.encode() in page for j in unseen)
    assert b"<option >seen</option>" in page and b">unseen</option>" not in page
    _, _, page = watcher.request("GET", "/jobs?groupBy=queue")
    assert b'data-group="seen"' in page and b'data-group="unseen"' not in page
    status, _, page = watcher.request("GET", "/jobs?queue=unseen")
    assert status == 403 and b"PERMISSION_DENIED" in page
    status, _, page = watcher.request("GET", "/jobsets/unseen/b")
    assert status == 200 and b'id="jobs-hidden"' in page
    assert not any(j.encode() in page for j in unseen)
    _, _, page = watcher.request("GET", "/jobsets/seen/a")
    assert all(j.encode() in page for j in seen)
    exported = watcher.get("/api/v1/history?since=3600")["jobs"]
    assert sorted(j["id"] for j in exported) == sorted(seen)

    # Watching is not acting: bulk actions still go by cancel and reprioritize.
    watcher.post("/api/v1/bulk/cancel", {"queue": "seen", "dryRun": True}, expect=403)
    assert watcher.post("/api/v1/bulk/cancel", {"dryRun": True})["count"] == 0

    # An administrator sees both queues, in the list, its pages and its counts.
    rows = admin.get("/api/v1/jobs?limit=500")["jobs"]
    assert set(seen + unseen) <= {r["id"] for r in rows}
    assert [r["id"] for r in admin.get("/api/v1/jobs?queue=unseen")["jobs"]] == unseen[::-1]
    counts = {
        g["value"]: g["count"] for g in admin.get("/api/v1/jobs/groups?groupBy=queue")["groups"]
    }
    assert counts["seen"] == 2 and counts["unseen"] == 3
    status, _, page = admin.request("GET", "/jobs?limit=500")
    assert all(j.encode() in page for j in seen + unseen)
    _, _, page = admin.request("GET", "/jobsets/unseen/b")
    assert all(j.encode() in page for j in unseen) and b'id="jobs-hidden"' not in page


class LiveFeed:
    """A browser's /ui/live stream: server-sent events read as they arrive."""

    def __init__(self, base: str, credentials: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.conn.request("GET", "/ui/live", headers={"Authorization": credentials})
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.next_event()[0] == "hello"

    def next_event(self) -> tuple[str, Any]:
        kind, data = "", ""
        while True:
            line = self.response.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data += line.removeprefix("data: ")
            elif not line and kind:
                return kind, json.loads(data)

    def changes_until(self, *queues: str) -> list[Any]:
        """Every `change` event until each of `queues` has been named."""
        seen, missing = [], set(queues)
        while missing:
            kind, data = self.next_event()
            if kind == "change":
                seen.append(data)
                missing -= set(queues) if data == "*" else {q for q, _ in data}
        return seen

    def close(self) -> None:
        self.conn.close()


def test_the_live_feed_names_only_job_sets_of_queues_the_caller_may_watch(base: str) -> None:
    admin = Http(base, ADMIN)
    may_watch = [{"subjects": [{"kind": "User", "name": "wendy"}], "verbs": ["watch"]}]
    admin.post("/api/v1/queues", {"name": "live-seen", "permissions": may_watch}, expect=201)
    admin.post("/api/v1/queues", {"name": "live-unseen"}, expect=201)
    watcher, everything = LiveFeed(base, WATCHER), LiveFeed(base, ADMIN)
    watcher_api = Http(base, WATCHER)
    try:
        admin.submit("live-unseen", "hidden", job())
        admin.submit("live-seen", "shown", job())
        changes = watcher.changes_until("live-seen")
        assert all(data != "*" for data in changes)
        named = {tuple(key) for data in changes for key in data}
        assert ("live-seen", "shown") in named and ("live-unseen", "hidden") not in named
        # Other tests' jobs may change meanwhile: only queues the watcher may watch show.
        for queue in {key[0] for key in named}:
            assert watcher_api.request("GET", f"/api/v1/jobs?queue={queue}")[0] == 200, queue
        # An administrator hears of both.
        admin_changes = everything.changes_until("live-seen", "live-unseen")
        assert all(data != "*" for data in admin_changes)
        admin_named = {tuple(key) for data in admin_changes for key in data}
        assert {("live-seen", "shown"), ("live-unseen", "hidden")} <= admin_named
    finally:
        watcher.close()
        everything.close()
