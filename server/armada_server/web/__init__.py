"""The web UI, the REST/JSON gateway (/api/v1) and /metrics: one ASGI app on `http_port`.

Served by uvicorn inside the server's own asyncio loop (server.py). The gateway and the UI's
actions call the gRPC servicers' own methods (calls.py), so validation, authorisation and
storage are the same code whichever door a request comes through.
"""

from armada_server.web.server import WebServer

__all__ = ["WebServer"]
