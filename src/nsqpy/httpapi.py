"""NSQ's HTTP conventions, shared by every daemon's API.

Every V1 response carries ``X-NSQ-Content-Type: nsq; version=1.0`` (go-nsq
picks its response parser by that header); errors are ``{"message": TEXT}``
with NSQ's status codes, including for unknown paths and wrong methods.
"""

import json

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from .logs import LEVELS
from .net import listen_backlog
from .options import option_specs
from .protocol.names import is_valid_channel_name, is_valid_topic_name

V1_HEADERS = {"X-NSQ-Content-Type": "nsq; version=1.0"}
LOG_LEVELS = {"debug": 1, "info": 2, "warn": 3, "error": 4, "fatal": 5}
MAX_CONFIG_BODY = 1024 * 1024

# Go reads up to 1 MB of request line and headers; a URL may use all of it,
# a header field 64 KiB, and there may be 100 of them (a bound per connection).
REQUEST_LIMITS = {"max_line_size": 1 << 20, "max_field_size": 64 << 10, "max_headers": 100}


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        """``headers``: what the answer must carry besides NSQ's (a 401's
        ``WWW-Authenticate``)."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def json_response(data, status: int = 200, headers: dict | None = None) -> web.Response:
    return encoded_json_response(json.dumps(data).encode(), status, headers)


def encoded_json_response(body: bytes, status: int = 200, headers: dict | None = None) -> web.Response:
    """A JSON document already encoded (nsqd's /stats formats its own)."""
    return web.Response(body=body, status=status, content_type="application/json", charset="utf-8",
                        headers={**V1_HEADERS, **headers} if headers else V1_HEADERS)


def text_response(text: str) -> web.Response:
    return web.Response(text=text, headers=V1_HEADERS)


def empty_response() -> web.Response:
    return web.Response(headers=V1_HEADERS)


def bool_param(request: web.Request, name: str, default: bool) -> bool:
    """``true``/``1`` and ``false``/``0``; anything else means the default, as in NSQ."""
    value = request.query.get(name)
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    return default


def option_value(options, name: str):
    """``GET /config/<name>`` as NSQ answers it: the option by its config
    file key, durations in nanoseconds, the log level as its number."""
    if name == "log_level":
        return LOG_LEVELS[options.log_level]
    spec = {spec.cfg: spec for spec in option_specs(type(options))}.get(name)
    if spec is None:
        raise HttpError(400, "INVALID_OPTION")
    value = getattr(options, spec.field)
    return int(round(value * 1e9)) if spec.duration else value


def put_log_level(options, log, body: bytes) -> None:
    """``PUT /config/log_level``: one of NSQ's level names, for the daemon's log from now on."""
    level = body.decode("utf-8", "replace").strip().lower()
    if level not in LOG_LEVELS:
        raise HttpError(400, "INVALID_VALUE")
    options.log_level = level
    log.setLevel(LEVELS[level])


def address_list(body: bytes, check) -> list[str]:
    """A ``PUT /config/..._addresses`` body: a JSON list of strings, each
    accepted by ``check`` (which raises ValueError otherwise)."""
    try:
        addresses = json.loads(body)
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise ValueError
        for address in addresses:
            check(address)
    except (ValueError, RecursionError):
        raise HttpError(400, "INVALID_VALUE") from None
    return addresses


def topic_param(request: web.Request, invalid: str = "INVALID_ARG_TOPIC") -> str:
    name = request.query.get("topic")
    if not name:
        raise HttpError(400, "MISSING_ARG_TOPIC")
    if not is_valid_topic_name(name):
        raise HttpError(400, invalid)
    return name


def topic_and_channel_params(request: web.Request) -> tuple[str, str]:
    topic = topic_param(request)
    channel = request.query.get("channel")
    if not channel:
        raise HttpError(400, "MISSING_ARG_CHANNEL")
    if not is_valid_channel_name(channel):
        raise HttpError(400, "INVALID_ARG_CHANNEL")
    return topic, channel


async def read_body(request: web.Request, limit: int, too_big: str) -> bytes:
    """The whole body, at most ``limit`` bytes. A body cut short (the client
    hung up, broken chunking) is the client's mistake: 400, not a 500."""
    if request.content_length is not None and request.content_length > limit:
        raise HttpError(413, too_big)
    chunks = []
    size = 0
    try:
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise HttpError(413, too_big)
            chunks.append(chunk)
    except (ConnectionResetError, HttpProcessingError):
        raise HttpError(400, "INVALID_BODY") from None
    return b"".join(chunks)


@web.middleware
async def nsq_errors(request: web.Request, handler):
    try:
        return await handler(request)
    except HttpError as error:
        return json_response({"message": error.message}, error.status, error.headers)
    except web.HTTPNotFound:
        return json_response({"message": "NOT_FOUND"}, 404)
    except web.HTTPMethodNotAllowed:
        return json_response({"message": "METHOD_NOT_ALLOWED"}, 405)
    except web.HTTPException:
        raise
    except Exception:
        request.app["log"].exception("HTTP: %s %s failed", request.method, request.path)
        return json_response({"message": "INTERNAL_ERROR"}, 500)


class _NsqRequestHandler(RequestHandler):
    """aiohttp answers a request it cannot parse (bad method, over-long URL,
    broken chunking) itself: with a traceback in the log and the offending
    bytes in the body. Ours logs one line and answers NSQ's JSON error, which
    never repeats what the client sent."""

    def handle_error(self, request, status=500, exc=None, message=None):
        reason = type(exc).__name__ if exc is not None else "timeout"
        self.logger.error("HTTP: %s from %s: %s", "bad request" if status < 500 else "failed",
                          request.remote, reason)
        text = {400: "BAD_REQUEST", 413: "REQUEST_TOO_LARGE", 431: "HEADERS_TOO_LARGE"}.get(status, "INTERNAL_ERROR")
        response = json_response({"message": text}, status)
        response.force_close()
        return response


def made_on_first_request(make):
    """An aiohttp handler that ``make()`` builds when its path is first
    requested, so what only that path needs (the Prometheus client, for
    ``/metrics``) loads then, not between the listening lines and /ping."""
    handler = None

    async def handle(request: web.Request) -> web.StreamResponse:
        nonlocal handler
        if handler is None:
            handler = make()
        return await handler(request)
    return handle


class _NsqServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _NsqRequestHandler(self, loop=self._loop, **self._kwargs)


async def serve(app: web.Application, sites) -> web.AppRunner:
    """Serve ``app`` on bound listening sockets: one socket, or (socket, SSL
    context or None) pairs."""
    if not isinstance(sites, list):
        sites = [(sites, None)]
    # handlers are short; a client holding a connection must not stall shutdown
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=3.0,
                           logger=app["log"], **REQUEST_LIMITS)
    await runner.setup()
    runner.server.__class__ = _NsqServer  # aiohttp has no option for its handler class
    for sock, ssl_context in sites:
        await web.SockSite(runner, sock, ssl_context=ssl_context, backlog=listen_backlog()).start()
    return runner


def new_app(log) -> web.Application:
    app = web.Application(middlewares=[nsq_errors])
    app["log"] = log
    return app
