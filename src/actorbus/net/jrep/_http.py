"""The plain-HTTP side of a gateway's port: the checks on a WebSocket handshake
(path, origin, token) and the files it serves.

:meth:`HttpFront.process_request` is the ``process_request`` hook of the
websockets server: it runs for every HTTP request on the port before any
WebSocket handshake.  It returns None to let a handshake on the J.REP path go
ahead, and a response for everything else:

* the J.REP path without a WebSocket upgrade: 426; an ``Origin`` the gateway
  does not allow: 403; a token missing or wrong: 401 (each counted and logged,
  rate-limited);
* ``/actorbus.js``: the JavaScript client (from the package's ``web/``);
* a file of the static directory, when one is configured (``/`` is its
  ``index.html``); nothing outside it is ever served (the resolved path must lie
  inside the directory);
* when the gateway serves them (``inspectPage``, ``metrics``): ``/inspect``
  (the live page), ``/inspect.js`` (its script), ``/inspect.json`` (what it
  shows, polled every second), ``/inspect/diagram?actor=NAME`` (an FSM actor's
  diagram, its current state highlighted: SVG drawn by Graphviz, or the DOT
  text when ``dot`` is missing) and ``/metrics`` (Prometheus' text format);
  all but the script need the token as a WebSocket does;
* anything else: 404.

The token (when the gateway has one) comes as the ``token`` query parameter
(browsers cannot set headers on a WebSocket) or an ``Authorization: Bearer``
header, and is compared with :func:`hmac.compare_digest`.  Files need no token:
a page must be able to load the client before it connects.
"""

from __future__ import annotations

import email.utils
import hmac
import json
import mimetypes
import os
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from ..._log import RateLimitedLog, shown
from .._credentials import Secret
from ._metrics import CONTENT_TYPE, Exposition
from ._views import NodeViews, SvgDiagrams, view_json

__all__ = ["CLIENT_PATH", "HttpFront"]

#: where the JavaScript client is served
CLIENT_PATH: Final = "/actorbus.js"
#: the live page, its script, what it shows, and the metrics (each when turned on)
INSPECT_PATH: Final = "/inspect"
INSPECT_SCRIPT_PATH: Final = "/inspect.js"
INSPECT_JSON_PATH: Final = "/inspect.json"
DIAGRAM_PATH: Final = "/inspect/diagram"
METRICS_PATH: Final = "/metrics"
#: largest static file served, in bytes
MAX_FILE: Final = 64 << 20


def client_script() -> bytes:
    """The JavaScript client shipped in the package (``actorbus/web/actorbus.js``)."""
    return _web_file("actorbus.js")


def _web_file(name: str) -> bytes:
    return resources.files("actorbus").joinpath("web", name).read_bytes()


class HttpFront:
    """The HTTP checks and files of one gateway (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        path: str,
        allowed_origins: tuple[str, ...],
        token: Secret | None,
        static_dir: str | None,
        log: RateLimitedLog,
        count: Callable[[str], None],
        views: NodeViews | None = None,
        inspect_page: bool = False,
        metrics: bool = False,
    ) -> None:
        self.name = name
        self.path = path
        self.allowed_origins = allowed_origins
        self.token = token
        self.static_dir = os.path.realpath(static_dir) if static_dir is not None else None
        self._log = log
        self._count = count
        self.views = views
        #: the inspect page's and the metrics' routes, when turned on (and given views)
        self.inspect_page = inspect_page and views is not None
        self.metrics = Exposition(views) if metrics and views is not None else None
        self._svg = SvgDiagrams()

    def process_request(
        self, connection: Any, request: Request
    ) -> Response | Awaitable[Response] | None:
        url = urlsplit(request.path)
        if url.path == self.path:
            return self._handshake(connection, request, url.query)
        self._count("http")
        if url.path == CLIENT_PATH:
            return _file(200, client_script(), "text/javascript; charset=utf-8")
        inspected = self._inspect(connection, request, url.path, url.query)
        if inspected is not None:
            return inspected
        if self.static_dir is not None:
            found = self._static(url.path)
            if found is not None:
                return found
        return connection.respond(404, f"not found: {url.path[:200]}\n")  # type: ignore[no-any-return]

    def _handshake(self, connection: Any, request: Request, query: str) -> Response | None:
        headers = request.headers
        if headers.get("Upgrade", "").lower() != "websocket":
            self._count("http")
            return connection.respond(  # type: ignore[no-any-return]
                426, f"{self.path} speaks J.REP over WebSocket; open a WebSocket to it\n"
            )
        origin = headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin, headers.get("Host", "")):
            return self._refuse(
                connection,
                403,
                kind="origin",
                what="a WebSocket",
                logged=f"origin {shown(origin)} is not allowed",
                told="origin not allowed; the gateway's allowed origins must list it",
            )
        return self._token_refusal(connection, headers, query, "a WebSocket")

    def _token_refusal(
        self, connection: Any, headers: Headers, query: str, what: str
    ) -> Response | None:
        """401 when the gateway has a token and the request does not carry it."""
        if self.token is None:
            return None
        given = _token_of(headers.get("Authorization"), query)
        if given is not None and hmac.compare_digest(given, self.token.reveal()):
            return None
        return self._refuse(
            connection,
            401,
            kind="token",
            what=what,
            logged=f"{'no token' if given is None else 'a wrong token'} given",
            told="a valid token is required: ?token=... or Authorization: Bearer ...",
        )

    def _inspect(
        self, connection: Any, request: Request, path: str, query: str
    ) -> Response | Awaitable[Response] | None:
        """The inspect page's and the metrics' routes (None: not one of them, or off)."""
        metrics = self.metrics
        if path == METRICS_PATH and metrics is not None:
            return self._token_refusal(connection, request.headers, query, "a scrape") or _file(
                200, metrics.render(), CONTENT_TYPE
            )
        if not self.inspect_page:
            return None
        if path == INSPECT_SCRIPT_PATH:
            return _file(200, _web_file("inspect.js"), "text/javascript; charset=utf-8")
        if path not in (INSPECT_PATH, INSPECT_JSON_PATH, DIAGRAM_PATH):
            return None
        refused = self._token_refusal(connection, request.headers, query, "an inspect request")
        if refused is not None:
            return refused
        views = self.views
        assert views is not None
        if path == INSPECT_PATH:
            return _file(200, _web_file("inspect.html"), "text/html; charset=utf-8")
        if path == DIAGRAM_PATH:
            return self._diagram(connection, views, parse_qs(query).get("actor", [""])[0])
        view = view_json(views)
        view["svg"] = self._svg.available()
        return _file(200, json.dumps(view, separators=(",", ":")).encode(), "application/json")

    async def _diagram(self, connection: Any, views: NodeViews, actor: str) -> Response:
        """(loop) An actor's machine: SVG, or DOT text when Graphviz cannot draw it."""
        dot = views.diagram(actor)
        if dot is None:
            return connection.respond(  # type: ignore[no-any-return]
                404, f"no actor {actor[:200]!r} with a state machine on this node\n"
            )
        svg = await self._svg.draw(dot)
        if svg is None:
            return _file(200, dot.encode(), "text/vnd.graphviz; charset=utf-8")
        return _file(200, svg, "image/svg+xml")

    def _origin_allowed(self, origin: str, host: str) -> bool:
        allowed = self.allowed_origins
        if not allowed:  # same origin only
            return origin in (f"http://{host}", f"https://{host}")
        return "*" in allowed or origin in allowed

    def _refuse(
        self, connection: Any, status: int, *, kind: str, what: str, logged: str, told: str
    ) -> Response:
        self._count("refused")
        remote = getattr(connection, "remote_address", None)
        peer = f"{remote[0]}:{remote[1]}" if isinstance(remote, tuple) else "?"
        self._log.warning(
            (self.name, kind),
            "jrep gateway {}: refused {} from {}: {}",
            self.name,
            what,
            peer,
            logged,
        )
        return connection.respond(status, told + "\n")  # type: ignore[no-any-return]

    def _static(self, path: str) -> Response | None:
        root = self.static_dir
        assert root is not None
        relative = unquote(path).lstrip("/") or "index.html"
        if "\x00" in relative:
            return None
        target = os.path.realpath(os.path.join(root, relative))
        if not target.startswith(root + os.sep) or not os.path.isfile(target):
            return None
        try:
            if os.path.getsize(target) > MAX_FILE:
                return None
            with open(target, "rb") as file:
                body = file.read()
        except OSError:
            return None
        kind = mimetypes.guess_type(target)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
            kind += "; charset=utf-8"
        return _file(200, body, kind)


def _token_of(authorization: str | None, query: str) -> bytes | None:
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip().encode("utf-8", "surrogateescape")
    values = parse_qs(query).get("token")
    if values:
        return values[0].encode("utf-8", "surrogateescape")
    return None


def _file(status: int, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache"),
            ("X-Content-Type-Options", "nosniff"),
        ]
    )
    return Response(status, "OK", headers, body)
