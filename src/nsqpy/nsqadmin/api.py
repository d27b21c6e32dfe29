"""nsqadmin's JSON API: Go nsqadmin's routes, field names and messages, so
scripts written against it work unchanged; plus ``/api/history/...`` for the
charts, and a channel's ``{"action": "replay", "from": ...}`` for retained
topics.

A reply whose data came from only some daemons carries
``"message": "WARNING: ..."``; when none answered it is 502
``UPSTREAM_ERROR: ...`` (raised as ``AllFailed``, turned into the reply by
``upstream_failures``). Privileged routes (POST, DELETE) check the admin user.
"""

import ipaddress
import json

from aiohttp import web

from ..httpapi import MAX_CONFIG_BODY, HttpError, address_list, json_response, option_value, put_log_level, read_body
from ..protocol.names import is_valid_channel_name, is_valid_topic_name
from . import aggregate, figures
from .cluster import AllFailed, Refused
from .options import NsqadminOptions, check_upstream_address

TOPIC_ACTIONS = ("pause", "unpause", "empty")
MAX_ACTION_BODY = 64 * 1024
MAX_FROM = 64  # longer than any point nsqd takes (an RFC 3339 time to the nanosecond is 35)


@web.middleware
async def upstream_failures(request: web.Request, handler):
    try:
        return await handler(request)
    except AllFailed as error:
        raise HttpError(502, f"UPSTREAM_ERROR: {error}") from None


def with_message(data: dict, errors: list[str]) -> web.Response:
    data["message"] = f"WARNING: {'; '.join(errors)}" if errors else ""
    return json_response(data)


def history_response(answer: dict) -> web.Response:
    """The history with its headline worded as the pages word it, so the
    charts script shows the server's words instead of a second wording."""
    return json_response({**answer, **figures.headline(answer)})


def topic_from(request: web.Request) -> str:
    topic = request.match_info["topic"]
    if not is_valid_topic_name(topic):
        raise HttpError(400, "INVALID_TOPIC")
    return topic


def channel_from(request: web.Request) -> str:
    channel = request.match_info["channel"]
    if not is_valid_channel_name(channel):
        raise HttpError(400, "INVALID_CHANNEL")
    return channel


async def json_body(request: web.Request) -> dict:
    body = await read_body(request, MAX_ACTION_BODY, "INVALID_BODY")
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise HttpError(400, "INVALID_BODY") from None
    if not isinstance(data, dict):
        raise HttpError(400, "INVALID_BODY")
    return data


class AdminApi:
    def __init__(self, admin):
        self.admin = admin
        self.options: NsqadminOptions = admin.options
        self.cluster = admin.cluster
        self.history = admin.history
        self.notifier = admin.notifier
        self.cleared = admin.cleared

    def routes(self, base: str) -> list:
        get, post, delete, put = web.get, web.post, web.delete, web.put
        return [
            get(f"{base}/ping", self.ping, allow_head=False),
            get(f"{base}/api/topics", self.topics, allow_head=False),
            post(f"{base}/api/topics", self.create_topic_channel),
            get(f"{base}/api/topics/{{topic}}", self.topic, allow_head=False),
            post(f"{base}/api/topics/{{topic}}", self.topic_action),
            delete(f"{base}/api/topics/{{topic}}", self.delete_topic),
            get(f"{base}/api/topics/{{topic}}/{{channel}}", self.channel, allow_head=False),
            post(f"{base}/api/topics/{{topic}}/{{channel}}", self.channel_action),
            delete(f"{base}/api/topics/{{topic}}/{{channel}}", self.delete_channel),
            get(f"{base}/api/nodes", self.nodes, allow_head=False),
            post(f"{base}/api/nodes/departed/clear", self.clear_departed),
            get(f"{base}/api/nodes/{{node}}", self.node, allow_head=False),
            delete(f"{base}/api/nodes/{{node}}", self.tombstone_topic),
            get(f"{base}/api/counter", self.counter, allow_head=False),
            get(f"{base}/api/graphite", self.graphite, allow_head=False),
            get(f"{base}/api/history/topics/{{topic}}", self.topic_history, allow_head=False),
            get(f"{base}/api/history/topics/{{topic}}/{{channel}}", self.channel_history, allow_head=False),
            get(f"{base}/config/{{opt}}", self.config_get, allow_head=False),
            put(f"{base}/config/{{opt}}", self.config_put),
        ]

    def require_admin(self, request: web.Request) -> None:
        if not self.options.is_admin(request.headers):
            raise HttpError(403, "FORBIDDEN")

    async def ping(self, request):
        return web.Response(text="OK")

    # --- reading -------------------------------------------------------------------------------

    async def topics(self, request):
        if request.query.get("inactive") in ("true", "1"):
            inactive, errors = await self.cluster.inactive_topics()
            return with_message({"topics": inactive}, errors)
        topics, errors = await self.cluster.topics()
        return with_message({"topics": topics}, errors)

    async def topic(self, request):
        topic = topic_from(request)
        per_node, errors = await self.cluster.topic_stats(topic)
        if not per_node:
            await self.not_on_any_nsqd(topic)
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return with_message(aggregate.aggregate_topic(topic, per_node), errors)

    async def channel(self, request):
        topic, channel = topic_from(request), channel_from(request)
        per_node, errors = await self.cluster.topic_stats(topic, channel)
        channels = [c for t in per_node for c in t["channels"] if c["channel_name"] == channel]
        if not channels:
            await self.not_on_any_nsqd(topic)
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        return with_message(aggregate.aggregate_channel(topic, channel, channels), errors)

    async def not_on_any_nsqd(self, topic: str) -> None:
        """A topic nsqlookupd lists but no nsqd has answers as Go's nsqadmin
        does (502, ``UPSTREAM_ERROR: failed to query any nsqd: ``); a topic
        nobody knows, or a channel missing from a produced topic, stays a
        plain 404."""
        producers, _ = await self.cluster.topic_producers(topic)
        if producers:
            return
        channels, _ = await self.cluster.registered_channels(topic)
        if channels is not None:
            raise HttpError(502, "UPSTREAM_ERROR: failed to query any nsqd: ")

    async def nodes(self, request):
        nodes, departed, errors = await self.cluster.node_entries()
        return with_message({"nodes": nodes, "departed": self.cleared.visible(departed)}, errors)

    async def node(self, request):
        node = request.match_info["node"]
        producer, errors = await self.cluster.find_producer(node)
        if producer is None:
            raise HttpError(404, "NODE_NOT_FOUND")
        topics, replication, stats_errors = await self.cluster.node_detail(producer)
        return with_message(aggregate.node_summary(node, topics, replication), errors + stats_errors)

    async def counter(self, request):
        producers, errors = await self.cluster.producers()
        stats, stats_errors = await self.cluster.node_stats(producers, include_clients=False)
        node_topics = [t for topics in stats.values() for t in topics]
        return with_message({"stats": aggregate.channel_counters(node_topics)}, errors + stats_errors)

    async def graphite(self, request):
        if request.query.get("metric") != "rate":
            raise HttpError(400, "INVALID_ARG_METRIC")
        target = request.query.get("target")
        if not target:
            raise HttpError(400, "INVALID_ARG_TARGET")
        return json_response({"rate": await self.admin.graphite.rate(target)})

    async def topic_history(self, request):
        return history_response(self.history.answer(topic_from(request)))

    async def channel_history(self, request):
        return history_response(self.history.answer(topic_from(request), channel_from(request)))

    # --- acting --------------------------------------------------------------------------------

    async def create_topic_channel(self, request):
        self.require_admin(request)
        body = await json_body(request)
        topic, channel = body.get("topic"), body.get("channel") or ""
        if not isinstance(topic, str) or not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_TOPIC")
        if channel and (not isinstance(channel, str) or not is_valid_channel_name(channel)):
            raise HttpError(400, "INVALID_CHANNEL")
        errors = await self.cluster.create_topic_channel(topic, channel or None)
        self.notifier.send("create_topic", request, topic)
        if channel:
            self.notifier.send("create_channel", request, topic, channel)
        return with_message({}, errors)

    async def _action(self, request, channel: str | None):
        self.require_admin(request)
        topic = topic_from(request)
        body = await json_body(request)
        action = body.get("action")
        if action in TOPIC_ACTIONS:
            errors = await self.cluster.topic_action(topic, action, channel)
        elif action == "replay" and channel is not None:
            errors = await self._replay(topic, channel, body.get("from"))
        else:
            raise HttpError(400, "INVALID_ACTION")
        self.notifier.send(f"{action}_{'topic' if channel is None else 'channel'}", request, topic, channel or "")
        return with_message({}, errors)

    async def _replay(self, topic: str, channel: str, start) -> list[str]:
        """Beyond NSQ: ``{"action": "replay", "from": ...}`` on a channel of a
        retained topic. A value nsqd refuses is a 400 with nsqd's own line,
        which the operator can act on (nothing changed)."""
        if start is None or start == "":
            raise HttpError(400, "MISSING_ARG_FROM")
        if not isinstance(start, str) or len(start) > MAX_FROM:
            raise HttpError(400, "INVALID_FROM from is earliest, latest, an offset, an RFC 3339 time "
                                 "or Unix milliseconds (<digits>ms), as a string")
        try:
            return await self.cluster.replay_channel(topic, channel, start)
        except Refused as error:
            raise HttpError(400, str(error)) from None

    async def topic_action(self, request):
        return await self._action(request, None)

    async def channel_action(self, request):
        return await self._action(request, channel_from(request))

    async def delete_topic(self, request):
        self.require_admin(request)
        topic = topic_from(request)
        errors = await self.cluster.delete_topic(topic)
        self.notifier.send("delete_topic", request, topic)
        return with_message({}, errors)

    async def delete_channel(self, request):
        self.require_admin(request)
        topic, channel = topic_from(request), channel_from(request)
        errors = await self.cluster.delete_channel(topic, channel)
        self.notifier.send("delete_channel", request, topic, channel)
        return with_message({}, errors)

    async def tombstone_topic(self, request):
        self.require_admin(request)
        node = request.match_info["node"]
        topic = (await json_body(request)).get("topic")
        if not isinstance(topic, str) or not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_TOPIC")
        try:
            errors = await self.cluster.tombstone_topic(topic, node)
        except LookupError:
            raise HttpError(404, "NODE_NOT_FOUND") from None
        self.notifier.send("tombstone_topic_producer", request, topic, node=node)
        return with_message({}, errors)

    async def clear_departed(self, request):
        """Beyond NSQ: the departed nodes listed now (and any that left
        before now) are no longer listed by this nsqadmin (departed.py)."""
        self.require_admin(request)
        _, departed, errors = await self.cluster.node_entries()
        self.cleared.clear(departed)
        self.notifier.send("clear_departed_nodes", request, "")
        return with_message({}, errors)

    # --- runtime configuration -----------------------------------------------------------------

    def require_config_access(self, request: web.Request) -> None:
        try:
            remote = ipaddress.ip_address(request.remote or "")
        except ValueError:
            raise HttpError(400, "INVALID_REMOTE_ADDR") from None
        if remote not in ipaddress.ip_network(self.options.allow_config_from_cidr, strict=False):
            raise HttpError(403, "FORBIDDEN")

    async def config_get(self, request):
        self.require_config_access(request)
        return json_response(option_value(self.options, request.match_info["opt"]))

    async def config_put(self, request):
        self.require_config_access(request)
        name = request.match_info["opt"]
        if name not in ("nsqlookupd_http_addresses", "log_level"):
            raise HttpError(400, "INVALID_OPTION")
        body = await read_body(request, MAX_CONFIG_BODY, "INVALID_VALUE")
        if name == "log_level":
            put_log_level(self.options, self.admin.log, body)
        else:
            addresses = address_list(body, check_upstream_address)
            if not self.options.nsqlookupd_http_addresses or not addresses:
                raise HttpError(400, "INVALID_VALUE")  # nsqadmin stays in the mode it started in
            self.options.nsqlookupd_http_addresses = addresses
        return json_response(option_value(self.options, name))
