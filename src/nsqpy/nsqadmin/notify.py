"""Admin-action notifications: one JSON POST to
``--notification-http-endpoint`` per action an operator takes, so an audit
log or a chat channel learns who paused, emptied or deleted what.

Sent in the background: an endpoint that is slow or down delays no action
(a failure is logged). At most ``MAX_PENDING`` are in flight at once; beyond
that new ones are dropped with a log line rather than piling up.
"""

import asyncio
import base64
import binascii
import json
import time

from aiohttp import web

from .upstream import UpstreamError

MAX_PENDING = 100


def basic_auth_user(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic" or not token:
        return ""
    try:
        return base64.b64decode(token, validate=True).decode("utf-8", "replace").partition(":")[0]
    except (binascii.Error, ValueError):
        return ""


def request_url(request: web.Request) -> str:
    """The URL the operator used: https when served over TLS or behind a proxy saying so."""
    scheme = "https" if request.secure or request.headers.get("X-Scheme") == "https" else "http"
    return f"{scheme}://{request.host}{request.path_qs}"


def remote_address(request: web.Request) -> str:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = peer[0]
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return request.remote or ""


def notification(action: str, request: web.Request, via: str, topic: str, channel: str = "",
                 node: str = "") -> dict:
    body = {"action": action, "topic": topic}
    if channel:
        body["channel"] = channel
    if node:
        body["node"] = node
    body["timestamp"] = int(time.time())
    user = basic_auth_user(request)
    if user:
        body["user"] = user
    body.update({"remote_ip": remote_address(request), "user_agent": request.headers.get("User-Agent", ""),
                 "url": request_url(request), "via": via})
    return body


class Notifier:
    def __init__(self, endpoint: str, upstream, via: str, log):
        self.endpoint = endpoint
        self.upstream = upstream
        self.via = via
        self.log = log
        self._pending: set[asyncio.Task] = set()

    def send(self, action: str, request: web.Request, topic: str, channel: str = "", node: str = "") -> None:
        if not self.endpoint:
            return
        if len(self._pending) >= MAX_PENDING:
            self.log.warning("notification %s for topic %s dropped: %d still being sent to %s",
                             action, topic, len(self._pending), self.endpoint)
            return
        body = json.dumps(notification(action, request, self.via, topic, channel, node)).encode()
        task = asyncio.get_running_loop().create_task(self._post(action, body))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _post(self, action: str, body: bytes) -> None:
        try:
            await self.upstream.request("POST", self.endpoint, data=body,
                                        headers={"Content-Type": "application/json"})
        except UpstreamError as error:
            self.log.error("notification %s not delivered: %s", action, error)

    async def flush(self, timeout: float) -> None:
        """At shutdown: give the notifications under way a moment to go out."""
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=timeout)
