"""One ASGI app on http_port (UI, REST gateway, /metrics), served by uvicorn inside the
server's asyncio loop; blocking work goes to the server's thread pool (Context.run)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from armada_server.auth import AuthConfig, Authenticator
from armada_server.services.binoculars import ExecutorChannels
from armada_server.services.common import Context
from armada_server.web import bulk, gateway, history, pages, simulations
from armada_server.web.auth import AuthMiddleware
from armada_server.web.context import Services, Web
from armada_server.web.live import ChangeFeed
from armada_server.web.shares import ShareSampler

log = logging.getLogger("armada_server.web")
HERE = Path(__file__).parent


async def metrics(request: Request) -> Response:
    web: Web = request.app.state.web
    body, content_type = await web.ctx.run(
        web.ctx.metrics.exposition, request.headers.get("accept")
    )
    return Response(body, media_type=content_type)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api/"):
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        return JSONResponse(
            {"error": {"code": code, "message": str(exc.detail)}},
            status_code=exc.status_code,
            headers=exc.headers,
        )
    return HTMLResponse(
        f"<!doctype html><title>{exc.status_code}</title>"
        f"<h1>{exc.status_code}</h1><p><a href='/queues'>Queues</a></p>",
        status_code=exc.status_code,
        headers=exc.headers,
    )


def build_app(web: Web, authenticator: Authenticator | None) -> Starlette:
    app = Starlette(
        routes=[
            *pages.routes,
            *gateway.routes,
            *bulk.routes,
            *history.routes,
            *simulations.routes,
            Route("/metrics", metrics, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(AuthMiddleware, authenticator=authenticator)],
        exception_handlers={HTTPException: http_error},
    )
    app.state.web = web
    return app


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # armada-server handles SIGINT and SIGTERM itself and stops this server.
        yield


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


class WebServer:
    """The HTTP side of one ArmadaServer."""

    def __init__(self, ctx: Context, channels: ExecutorChannels, auth: AuthConfig) -> None:
        self.ctx = ctx
        self.channels = channels
        self.auth = auth
        self.port: int | None = None
        self.web: Web | None = None
        self.app: Starlette | None = None
        self._server: _Uvicorn | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def sampler(self) -> ShareSampler:
        assert self.web is not None
        return self.web.sampler

    async def start(self, host: str, port: int) -> int:
        """Listen on (host, port) (0 picks a free port); returns the port."""
        loop = asyncio.get_running_loop()
        feed = ChangeFeed(loop)
        feed.attach(self.ctx.hub)
        self.web = Web(
            self.ctx,
            Services.build(self.ctx, self.channels),
            feed,
            ShareSampler(self.ctx.cycle_reports, self.ctx.queues),
            self.auth.enabled,
        )
        self.app = build_app(self.web, Authenticator(self.auth) if self.auth.enabled else None)
        sock = _bind(host, port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=2,
            timeout_keep_alive=30,
        )
        # armada-server's first line of output says it is listening: uvicorn stays quiet.
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        self._server = _Uvicorn(config)
        serving = asyncio.create_task(self._server.serve(sockets=[sock]))
        self._tasks = [serving, asyncio.create_task(self.web.sampler.run(self.ctx.pool))]
        while not self._server.started:
            if serving.done():
                sock.close()
                serving.result()  # raises what stopped it
                raise OSError(f"the HTTP server on {host}:{port} stopped while starting")
            await asyncio.sleep(0.01)
        log.debug("web UI, REST gateway and metrics on http://%s:%s", host, self.port)
        return self.port

    async def stop(self) -> None:
        if self.web is not None:
            self.web.feed.close()  # ends the live streams, so shutdown need not wait on them
        if self._server is not None:
            self._server.should_exit = True
        serving = self._tasks[0] if self._tasks else None
        others = self._tasks[1:]
        for task in others:
            task.cancel()
        for task in others:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if serving is not None:
            try:
                await asyncio.wait_for(asyncio.shield(serving), 10)
            except TimeoutError:
                assert self._server is not None
                self._server.force_exit = True
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
