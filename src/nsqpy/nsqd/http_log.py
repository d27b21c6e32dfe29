"""nsqd's HTTP API for retained topics (retention.py): their offsets, reads
of an offset range, and replay into channels. Beyond NSQ; errors in NSQ's
shape (``{"message": "CODE detail"}``).

``GET /topic/read`` answers with chunks (protocol/logchunk.py) back to back,
taken from the segment files as they lie (``Content-Type:
application/vnd.nsqpy.log-chunks``); its headers say which records it holds:
``X-NSQ-First-Offset`` (past the asked ``from`` only where offsets are
missing), ``X-NSQ-Next-Offset`` (where the next read starts) and the log's
``X-NSQ-Earliest-Offset`` and ``X-NSQ-Latest-Offset``. A read changes
nothing: no channel, no cursor, no state. A read hands out message content,
which NSQ's HTTP API never did: with AUTH on it needs a SUB's grant
(ContentAuth, also used by ``/channel/deferred?body=true``).
"""

import os
import time

from aiohttp import web

from ..httpapi import HttpError, json_response
from ..options import parse_int
from ..protocol.names import is_valid_topic_name
from ..topiclog import DEFAULT_READ_BYTES, MAX_READ_BYTES, OffsetOutOfRange
from .auth import AuthError, AuthRefused, GrantCache, peer_common_name
from .replay import Replay
from .retention import log_extent, parse_point

CONTENT_TYPE = "application/vnd.nsqpy.log-chunks"
SEND_BLOCK = 1024 * 1024  # bytes of segment file read and written at once
OFFSET_LIMIT = (1 << 63) - 1
NO_FUTURE = 1 << 80  # Unix ns past any time parse_point reads: no time is refused as future
BEARER = "bearer "  # the scheme of ``Authorization: Bearer <secret>``, compared without case (RFC 9110)
ASK_FOR_BEARER = {"WWW-Authenticate": 'Bearer realm="nsqd"'}


class ContentAuth:
    """AUTH for the HTTP routes that hand out message content.

    NSQ checks AUTH on TCP only: its HTTP API publishes and administers but
    never hands a message out. Ours does (a retained topic's reads, a
    deferred listing's bodies), so those routes need what a TCP SUB needs,
    or they are a way around it. The secret comes as ``Authorization:
    Bearer <secret>`` (the header proxies and HTTP clients already treat as
    a credential: kept out of access logs, dropped on redirects to another
    host); nsqd asks the auth server as for a TCP AUTH (the request's
    address, TLS, the client certificate's name) and keeps the answer for
    its ttl. Answers: 401 without a secret, 403 when refused, 503 when no
    auth server answers (a reader may retry that, not a wrong secret).
    Without --auth-http-address it lets everything through."""

    def __init__(self, auth_client):
        self.grants = GrantCache(auth_client) if auth_client is not None else None

    async def require(self, request, topic: str, channel: str | None = None) -> None:
        """Raise unless the request's secret may SUB to ``channel`` of
        ``topic``; to some channel of it when None (a log read: every
        channel receives the whole topic, so any one of them may read it)."""
        if self.grants is None:
            return
        try:
            state = await self.grants.query(_bearer_secret(request), request.remote or "", request.secure,
                                            peer_common_name(request.get_extra_info("ssl_object")))
        except AuthRefused:
            raise HttpError(403, "UNAUTHORIZED AUTH refused by the auth server") from None
        except AuthError:
            raise HttpError(503, "AUTH_FAILED no auth server answered") from None
        if not state.authorizations:
            raise HttpError(403, "UNAUTHORIZED AUTH no authorizations found")
        if channel is None:
            allowed, names = state.allows_some_channel("subscribe", topic), f'"{topic}"'
        else:
            allowed, names = state.allows("subscribe", topic, channel), f'"{topic}" "{channel}"'
        if not allowed:
            raise HttpError(403, f"UNAUTHORIZED AUTH failed for {request.path} on {names}")


def _bearer_secret(request) -> str:
    """The secret of ``Authorization: Bearer <secret>``; 401 without one."""
    value = request.headers.get("Authorization", "")
    secret = value[len(BEARER):].strip() if value[:len(BEARER)].lower() == BEARER else ""
    if not secret:
        raise HttpError(401, f'AUTH_FIRST AUTH required before {request.path}: send "Authorization: Bearer <secret>"',
                        ASK_FOR_BEARER)
    return secret


class LogApi:
    def __init__(self, nsqd, existing_channel, content_auth: ContentAuth):
        """``existing_channel(request)``: the (topic, channel) a request
        names, or NSQ's 404 (the HTTP API's own lookup)."""
        self.nsqd = nsqd
        self.existing_channel = existing_channel
        self.content_auth = content_auth

    def routes(self) -> list:
        return [
            web.get("/topic/offsets", self.offsets, allow_head=False),
            web.get("/topic/read", self.read, allow_head=False),
            web.post("/channel/rewind", self.rewind),
        ]

    def _retained_topic(self, request):
        name = request.query.get("topic")
        if not name:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(name):
            raise HttpError(400, "INVALID_TOPIC")
        topic = self.nsqd.topics.get(name)
        if topic is None:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return topic, _log_of(topic)

    async def offsets(self, request):
        """The log's extent; with ``time=``, the first offset at or after it:
        the latest offset for a time no record has reached yet, the future
        included (so a reader whose clock runs ahead of nsqd's, asking up to
        its "now", gets an answer rather than an error)."""
        topic, topic_log = self._retained_topic(request)
        answer = log_extent(topic_log)
        answer["topic"] = topic.name
        if "time" in request.query:
            point = _point(request.query["time"], "INVALID_TIME", now_ns=NO_FUTURE)
            if point.kind != "time":
                raise HttpError(400, "INVALID_TIME time must be an RFC 3339 time or Unix milliseconds (<digits>ms)")
            answer["offset_at_time"] = topic_log.offset_at(point.value)
        return json_response(answer)

    async def read(self, request):
        """The records from offset ``from`` up to ``to`` (exclusive; the end
        when absent) in an answer of at most ``max_bytes``, except that one
        record is always served when there is one, however big (a reader
        never stalls on it)."""
        topic, topic_log = self._retained_topic(request)
        await self.content_auth.require(request, topic.name)
        start = _offset_param(request, "from", required=True)
        end = _offset_param(request, "to")
        if end is not None and end < start:
            raise HttpError(400, f"INVALID_RANGE to {end} is before from {start}")
        max_bytes = DEFAULT_READ_BYTES
        if "max_bytes" in request.query:
            try:
                max_bytes = parse_int(request.query["max_bytes"], 1, MAX_READ_BYTES)
            except ValueError as error:
                raise HttpError(400, f"INVALID_MAX_BYTES {error}") from None
        try:
            plan = topic_log.plan(start, end, max_bytes)
        except OffsetOutOfRange as error:
            raise HttpError(416, f"OFFSET_OUT_OF_RANGE {error}") from None
        try:
            response = web.StreamResponse(headers={
                "Content-Type": CONTENT_TYPE,
                "X-NSQ-First-Offset": str(plan.first_offset),
                "X-NSQ-Next-Offset": str(plan.next_offset),
                "X-NSQ-Earliest-Offset": str(topic_log.earliest),
                "X-NSQ-Latest-Offset": str(topic_log.latest),
            })
            response.content_length = plan.size
            await response.prepare(request)
            for piece in plan.pieces:
                if isinstance(piece, bytes):
                    await response.write(piece)
                    continue
                fd, position, length = piece
                while length:
                    block = os.pread(fd, min(length, SEND_BLOCK), position)
                    await response.write(block)
                    position += len(block)
                    length -= len(block)
            await response.write_eof()
            return response
        finally:
            plan.close()

    async def rewind(self, request):
        """The channel delivers the log again from ``from``; what it held is dropped."""
        topic, channel = self.existing_channel(request)
        return json_response(self.replay(topic, channel.name, request))

    def replay(self, topic, channel_name: str, request) -> dict:
        """Start ``channel_name`` (made if new) at ``from``; -> the answer.
        Checks everything before changing anything."""
        topic_log = _log_of(topic)
        if channel_name.endswith("#ephemeral"):
            raise HttpError(400, "EPHEMERAL_CHANNEL an ephemeral channel cannot replay (it keeps nothing)")
        if "from" not in request.query:
            raise HttpError(400, "MISSING_ARG_FROM")
        point = _point(request.query["from"], "INVALID_FROM")
        try:
            offset = point.offset_in(topic_log)
        except ValueError as error:
            raise HttpError(400, f"OFFSET_OUT_OF_RANGE {error}") from None
        channel = topic.get_channel(channel_name)
        Replay.start(channel, offset)
        self.nsqd.log.info("TOPIC(%s): CHANNEL(%s): replaying from offset %d", topic.name, channel_name, offset)
        return {"topic": topic.name, "channel": channel_name, "offset": offset, **log_extent(topic_log)}


def _log_of(topic):
    if topic.topic_log is None:
        raise HttpError(400, f"TOPIC_NOT_RETAINED topic {topic.name} keeps no log: "
                        f"POST /topic/config?topic={topic.name}&retention=24h (or nsqd --retention)")
    return topic.topic_log


def _point(text: str, code: str, now_ns: int | None = None):
    """``text`` as a point in the log; a time after ``now_ns`` (the
    present when None) is refused as in the future."""
    try:
        return parse_point(text, time.time_ns() if now_ns is None else now_ns)
    except ValueError as error:
        raise HttpError(400, f"{code} {error}") from None


def _offset_param(request, name: str, required: bool = False) -> int | None:
    if name not in request.query:
        if required:
            raise HttpError(400, f"MISSING_ARG_{name.upper()}")
        return None
    try:
        return parse_int(request.query[name], 0, OFFSET_LIMIT)
    except ValueError as error:
        raise HttpError(400, f"INVALID_{name.upper()} {error}") from None
