"""The what-if simulator's pages, linked from the web UI: `armada-server simulate --html`
written into `simulations/` of the server's data directory is listed at /simulations and
served as it is (each page is self-contained)."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from armada_server.storage.database import default_data_dir
from armada_server.web.context import web_of

PAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.html$")


def simulations_dir(request: Request) -> Path:
    data_dir = web_of(request).ctx.config.data_dir
    return (Path(data_dir) if data_dir else default_data_dir()) / "simulations"


async def listing(request: Request) -> Response:
    folder = simulations_dir(request)
    pages = sorted(
        (p for p in folder.glob("*.html") if PAGE_NAME.match(p.name)),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    items = "".join(
        f'<li><a href="/simulations/{escape(p.name)}">{escape(p.name)}</a></li>' for p in pages
    )
    body = f"<ul>{items}</ul>" if pages else "<p>No simulations yet.</p>"
    return HTMLResponse(
        "<!doctype html><html lang=en><meta charset=utf-8><title>What-if simulations</title>"
        '<link rel="stylesheet" href="/static/app.css"><main><p><a href="/queues">Queues</a></p>'
        f"<h1>What-if simulations</h1>{body}<p>Write one here with <code>armada-server "
        f"simulate ... --html {escape(str(folder))}/NAME.html</code> (docs/simulate.md).</p>"
        "</main></html>"
    )


async def simulation(request: Request) -> Response:
    name = request.path_params["name"]
    path = simulations_dir(request) / name
    if not PAGE_NAME.match(name) or not path.is_file():
        raise HTTPException(404, f"no simulation page {name!r}")
    return FileResponse(path, media_type="text/html")


routes = [
    Route("/simulations", listing, methods=["GET"]),
    Route("/simulations/{name}", simulation, methods=["GET"]),
]
