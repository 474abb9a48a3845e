"""What the HTTP handlers share: the servicers they call, the change feed, the sampler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from armada_core.api import submit_pb2
from armada_server.auth import Authorizer, current_principal
from armada_server.services.binoculars import BinocularsService, ExecutorChannels
from armada_server.services.common import Context
from armada_server.services.events import EventService
from armada_server.services.jobs import JobsService
from armada_server.services.queues import QueueService
from armada_server.services.reporting import ReportingService
from armada_server.services.submit import SubmitService
from armada_server.web.live import ChangeFeed
from armada_server.web.shares import ShareSampler


@dataclass
class Services:
    """The gRPC servicers, called in-process (their methods are the API's logic)."""

    submit: SubmitService
    queues: QueueService
    jobs: JobsService
    events: EventService
    binoculars: BinocularsService
    reporting: ReportingService

    @classmethod
    def build(cls, ctx: Context, channels: ExecutorChannels) -> Services:
        queues = QueueService(ctx)
        return cls(
            SubmitService(ctx, queues),
            queues,
            JobsService(ctx),
            EventService(ctx),
            BinocularsService(ctx, channels),
            ReportingService(ctx),
        )


@dataclass
class Web:
    ctx: Context
    services: Services
    feed: ChangeFeed
    sampler: ShareSampler
    auth_enabled: bool

    @property
    def authorizer(self) -> Authorizer:
        return self.ctx.authorizer

    def may(self, queue: submit_pb2.Queue, verb: str) -> bool:
        """Whether the caller may `verb` on the queue (an api.Queue): shows or hides actions."""
        return self.ctx.authorizer.may(current_principal(), queue, verb)

    def is_admin(self) -> bool:
        return self.ctx.authorizer.is_admin(current_principal())


# An HTTP endpoint: the gateway's JSON calls and the UI's pages.
Handler = Callable[[Request], Awaitable[Response]]


def web_of(request: Request) -> Web:
    """What the handlers share, kept in the application's state (server.py)."""
    web: Web = request.app.state.web
    return web
