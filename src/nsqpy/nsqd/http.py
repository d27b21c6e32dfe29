"""nsqd's HTTP API on aiohttp, with NSQ's paths, status codes and bodies."""

import asyncio
import socket

from aiohttp import web

from ..version import version_line
from ..httpapi import (MAX_CONFIG_BODY, HttpError, address_list, bool_param, empty_response, encoded_json_response,
                       json_response, made_on_first_request, new_app, option_value, put_log_level, read_body, serve,
                       text_response, topic_and_channel_params, topic_param)
from ..net import split_host_port
from ..options import parse_int
from ..protocol import NSQ_VERSION
from ..protocol.commands import parse_mpub_body
from ..protocol.errors import ProtocolError
from ..protocol.keyed import key_problem, keyed_lines, parse_kmpub_body
from ..protocol.names import is_valid_topic_name
from . import publishing, stats as stats_module
from .dead_letter import is_valid_dead_letter_topic, parse_max_attempts
from .bounds import QueueFull, parse_full_policy, parse_max_depth
from .deferred_view import DEFAULT_LIMIT, MAX_LIMIT, deferred_listing
from .expiry import parse_expire_action, parse_ttl_ms
from .http_log import ContentAuth, LogApi
from .publish_keys import KeysRefused, parse_key_window
from .retention import parse_retention, parse_retention_bytes
from .replication.links import ReplicationShort
from .topic import TopicExiting

class HttpApi:
    def __init__(self, nsqd):
        self.nsqd = nsqd
        self.content_auth = ContentAuth(nsqd.auth)
        self.log_api = LogApi(nsqd, self._existing_channel, self.content_auth)
        self._runner: web.AppRunner | None = None

    async def start(self, sites) -> None:
        """``sites``: (listening socket, SSL context or None) pairs."""
        app = new_app(self.nsqd.log)
        if self.nsqd.options.tls_required == "true":
            app.middlewares.append(self._require_tls)
        get, post, put = web.get, web.post, web.put
        app.add_routes([
            get("/ping", self.ping, allow_head=False),
            get("/info", self.info, allow_head=False),
            post("/pub", self.pub),
            post("/mpub", self.mpub),
            post("/kpub", self.kpub),
            post("/kmpub", self.kmpub),
            get("/stats", self.stats, allow_head=False),
            get("/metrics", made_on_first_request(self._metrics_endpoint), allow_head=False),
            post("/topic/create", self.topic_create),
            post("/topic/delete", self.topic_delete),
            post("/topic/empty", self.topic_empty),
            post("/topic/pause", self.topic_pause),
            post("/topic/unpause", self.topic_unpause),
            post("/channel/create", self.channel_create),
            post("/channel/delete", self.channel_delete),
            post("/channel/empty", self.channel_empty),
            post("/channel/pause", self.channel_pause),
            post("/channel/unpause", self.channel_unpause),
            get("/channel/deferred", self.channel_deferred, allow_head=False),
            get("/channel/config", self.channel_config_get, allow_head=False),
            get("/topic/config", self.topic_config_get, allow_head=False),
            post("/topic/config", self.topic_config_post),
            post("/channel/config", self.channel_config_post),
            get("/config/{opt}", self.config_get, allow_head=False),
            put("/config/{opt}", self.config_put),
            *self.log_api.routes(),
        ])
        self._runner = await serve(app, sites)

    def _metrics_endpoint(self):
        from ..metrics import daemon_registry, metrics_endpoint
        from .metrics import NsqdCollector

        collector = NsqdCollector(self.nsqd)
        return metrics_endpoint(daemon_registry("nsqd", collector), collector.topic_families)

    @web.middleware
    async def _require_tls(self, request, handler):
        """--tls-required=true: plain HTTP answers 403 and names the HTTPS port."""
        if not request.secure:
            return json_response({"message": "TLS_REQUIRED", "https_port": self.nsqd.https_port}, 403)
        return await handler(request)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- health and identity -------------------------------------------------------

    async def ping(self, request):
        nsqd = self.nsqd
        health = nsqd.health
        if health != "OK":
            return web.Response(status=500, text=health)
        return web.Response(text="OK")

    async def info(self, request):
        nsqd = self.nsqd
        options = nsqd.options
        return json_response({
            "version": NSQ_VERSION,
            "broadcast_address": options.broadcast_address,
            "hostname": socket.gethostname(),
            "http_port": nsqd.http_port,
            "tcp_port": nsqd.tcp_port,
            "start_time": nsqd.start_time,
            "max_heartbeat_interval": int(options.max_heartbeat_interval * 1e9),
            "max_output_buffer_size": options.max_output_buffer_size,
            "max_output_buffer_timeout": int(options.max_output_buffer_timeout * 1e9),
            "max_deflate_level": options.max_deflate_level,
            "topology_zone": "",
            "topology_region": "",
        })

    # --- publishing -------------------------------------------------------------------

    async def _publish(self, topic_name: str, bodies: list[bytes], defer: float = 0.0, keys: list[bytes] | None = None):
        """Queue ``bodies`` (keyed: those whose keys the topic does not
        remember), then OK once they are as safe as a TCP publish's."""
        nsqd = self.nsqd
        if nsqd.exiting:
            raise HttpError(503, "EXITING")
        refused = nsqd.publish_refusal()
        if refused is not None:
            raise HttpError(503, f"PUB_FAILED {refused}")
        try:
            if keys is None:
                publishing.publish(nsqd, topic_name, bodies, defer)
            else:
                publishing.publish_keyed(nsqd, topic_name, keys, bodies, defer)
        except KeysRefused as error:
            raise HttpError(503 if error.code == "KEYS_FULL" else 400, f"{error.code} {error}") from None
        except TopicExiting:
            raise HttpError(503, "EXITING") from None
        except QueueFull as error:
            raise HttpError(503, f"QUEUE_FULL {error}") from None
        except OSError:
            raise HttpError(500, "INTERNAL_ERROR") from None
        nsqd.dirty.flush()  # a retained topic's records, publish keys, are in their files before the OK
        acks = None if nsqd.replication is None else nsqd.replication.acks()
        if acks is not None:  # a replicated nsqd answers once its peers hold copies
            try:
                await asyncio.shield(acks)  # shared by the turn's publishes: one request's end cancels none
                nsqd.replication.check_answer()  # no OK once its lease may have ended
            except ReplicationShort as error:
                raise HttpError(503, f"PUB_FAILED {error}") from None
        return text_response("OK")

    async def pub(self, request):
        _refuse_key(request, "/kpub")
        topic_name, body, defer = await self._one_message(request)
        return await self._publish(topic_name, [body], defer)

    async def kpub(self, request):
        """Beyond NSQ: a /pub that may be repeated safely (protocol/keyed.py);
        ``key`` in the query."""
        key = _key_param(request)
        topic_name, body, defer = await self._one_message(request)
        return await self._publish(topic_name, [body], defer, [key])

    async def _one_message(self, request) -> tuple[str, bytes, float]:
        options = self.nsqd.options
        body = await read_body(request, options.max_msg_size, "MSG_TOO_BIG")
        if not body:
            raise HttpError(400, "MSG_EMPTY")
        topic_name = topic_param(request, invalid="INVALID_TOPIC")
        max_defer_ms = int(options.max_req_timeout * 1000)
        defer_ms = _query_setting(request, "defer", lambda text: parse_int(text, 0, max_defer_ms), "INVALID_DEFER")
        return topic_name, body, (defer_ms or 0) / 1000

    async def kmpub(self, request):
        """Beyond NSQ: an /mpub whose every message may be repeated safely:
        lines ``<key> <body>``, or with ``binary=true`` a KMPUB body."""
        options = self.nsqd.options
        topic_name = topic_param(request, invalid="INVALID_TOPIC")
        body = await read_body(request, options.max_body_size, "BODY_TOO_BIG")
        try:
            if _binary(request):
                keys, bodies = parse_kmpub_body(body, options.max_msg_size, options.max_body_size)
            else:
                keys, bodies = keyed_lines(body, options.max_msg_size)
        except ProtocolError as error:
            status = 413 if "too big" in error.description else 400
            raise HttpError(status, f"{error.code.removeprefix('E_')} {error.description}") from None
        if not bodies:
            return text_response("OK")
        return await self._publish(topic_name, bodies, keys=keys)

    async def mpub(self, request):
        _refuse_key(request, "/kmpub")
        options = self.nsqd.options
        topic_name = topic_param(request, invalid="INVALID_TOPIC")
        body = await read_body(request, options.max_body_size, "BODY_TOO_BIG")
        if _binary(request):
            try:
                bodies = parse_mpub_body(body, options.max_msg_size, options.max_body_size, exact=False)
            except ProtocolError as error:
                raise HttpError(413, error.code.removeprefix("E_")) from None
        else:
            bodies = [piece for piece in body.split(b"\n") if piece]
            if any(len(piece) > options.max_msg_size for piece in bodies):
                raise HttpError(413, "MSG_TOO_BIG")
        if not bodies:
            return text_response("OK")
        return await self._publish(topic_name, bodies)

    # --- stats --------------------------------------------------------------------------

    async def stats(self, request):
        # what the turn left for the disk first: FINs the counts show as done are
        # journaled where kill -9 cannot reach them, as before a TCP answer (dirty.py)
        self.nsqd.dirty.flush()
        selection = dict(
            topic_filter=request.query.get("topic") or None,
            channel_filter=request.query.get("channel") or None,
            include_clients=bool_param(request, "include_clients", True),
            include_mem=bool_param(request, "include_mem", True),
        )
        if request.query.get("format") == "json":
            return encoded_json_response(stats_module.stats_json(self.nsqd, **selection))
        data = stats_module.stats(self.nsqd, **selection)
        return text_response(stats_module.render_text(data, version_line("nsqd")))

    # --- topics -----------------------------------------------------------------------------

    def _existing_topic(self, request, validate: bool = True):
        name = request.query.get("topic")
        if not name:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if validate and not is_valid_topic_name(name):
            raise HttpError(400, "INVALID_TOPIC")
        topic = self.nsqd.topics.get(name)
        if topic is None:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return topic

    async def _persisted(self, topic, channel=None) -> None:
        """Answer a change to a topic or its channel only once nsqd.dat holds
        it (ephemeral ones are never written): a crash right after the
        answer loses nothing the client was told exists."""
        if topic.ephemeral or (channel is not None and channel.ephemeral):
            return
        if not await self.nsqd.persist_metadata(topic):
            raise HttpError(500, "INTERNAL_ERROR")  # the failure is in the log

    async def topic_create(self, request):
        try:
            topic = self.nsqd.get_topic(topic_param(request, invalid="INVALID_TOPIC"))
        except TopicExiting:
            raise HttpError(503, "EXITING") from None
        await self._persisted(topic)
        return empty_response()

    async def topic_delete(self, request):
        topic = self._existing_topic(request, validate=False)
        self.nsqd.delete_topic(topic.name)
        await self._persisted(topic)
        return empty_response()

    async def topic_empty(self, request):
        topic = self._existing_topic(request)
        try:
            topic.empty()
        except OSError:
            raise HttpError(500, "INTERNAL_ERROR") from None
        return empty_response()

    async def topic_pause(self, request):
        topic = self._existing_topic(request)
        topic.pause()
        await self._persisted(topic)
        return empty_response()

    async def topic_unpause(self, request):
        topic = self._existing_topic(request)
        topic.unpause()
        await self._persisted(topic)
        return empty_response()

    # --- channels ------------------------------------------------------------------------------

    def _existing_channel(self, request):
        topic_name, channel_name = topic_and_channel_params(request)
        topic = self.nsqd.topics.get(topic_name)
        if topic is None:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        channel = topic.channels.get(channel_name)
        if channel is None:
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        return topic, channel

    async def channel_create(self, request):
        topic_name, channel_name = topic_and_channel_params(request)
        topic = self.nsqd.topics.get(topic_name)
        if topic is None:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        if "from" in request.query:  # beyond NSQ: a new channel replaying a retained topic (http_log.py)
            if channel_name in topic.channels:
                raise HttpError(400, f"CHANNEL_EXISTS {channel_name}: POST /channel/rewind moves an existing channel")
            answer = self.log_api.replay(topic, channel_name, request)
            await self._persisted(topic, topic.channels[channel_name])
            return json_response(answer)
        await self._persisted(topic, topic.get_channel(channel_name))
        return empty_response()

    async def channel_delete(self, request):
        topic, channel = self._existing_channel(request)
        topic.delete_channel(channel.name)
        await self._persisted(topic, channel)
        return empty_response()

    async def channel_empty(self, request):
        _, channel = self._existing_channel(request)
        try:
            channel.empty()
        except OSError:
            raise HttpError(500, "INTERNAL_ERROR") from None
        return empty_response()

    async def channel_pause(self, request):
        topic, channel = self._existing_channel(request)
        channel.pause()
        await self._persisted(topic, channel)
        return empty_response()

    async def channel_unpause(self, request):
        topic, channel = self._existing_channel(request)
        channel.unpause()
        await self._persisted(topic, channel)
        return empty_response()

    async def channel_deferred(self, request):
        topic, channel = self._existing_channel(request)
        limit = _query_setting(request, "limit", lambda text: parse_int(text, 1, MAX_LIMIT), "INVALID_LIMIT")
        include_body = bool_param(request, "body", False)
        if include_body:  # message content: what a SUB to this channel needs (sizes alone are /stats' kind)
            await self.content_auth.require(request, topic.name, channel.name)
        return json_response(deferred_listing(channel, limit or DEFAULT_LIMIT, include_body))

    async def channel_config_get(self, request):
        _, channel = self._existing_channel(request)
        return json_response(stats_module.channel_config(channel))

    async def channel_config_post(self, request):
        """Beyond NSQ: ``max_attempts``, ``dead_letter_topic`` and ``ttl_ms``
        (any of them) for one channel; persisted in nsqd.dat."""
        topic, channel = self._existing_channel(request)
        if channel.ephemeral:
            raise HttpError(400, "EPHEMERAL_CHANNEL")  # gone with its last consumer: nothing to keep
        max_attempts = _query_setting(request, "max_attempts", parse_max_attempts, "INVALID_MAX_ATTEMPTS")
        ttl_ms = _query_setting(request, "ttl_ms", parse_ttl_ms, "INVALID_TTL")
        limit = _limit_settings(request)
        dead_letter_topic = None
        if "dead_letter_topic" in request.query:
            dead_letter_topic = request.query["dead_letter_topic"]
            if not is_valid_dead_letter_topic(dead_letter_topic, topic.name):
                raise HttpError(400, "INVALID_DEAD_LETTER_TOPIC")
        elif not is_valid_dead_letter_topic(channel.dead_letter_topic, topic.name) and max_attempts:
            raise HttpError(400, "INVALID_DEAD_LETTER_TOPIC")  # <topic>.dead is too long: name one
        channel.configure_dead_letter(max_attempts, dead_letter_topic)
        if ttl_ms is not None:
            channel.configure_ttl(ttl_ms / 1000)
        channel.limit.configure(*limit)
        await self._persisted(topic, channel)
        return json_response(stats_module.channel_config(channel))

    async def topic_config_get(self, request):
        return json_response(stats_module.topic_config(self._existing_topic(request)))

    async def topic_config_post(self, request):
        """Beyond NSQ: ``ttl_ms``, ``expire_action``, ``retention``,
        ``retention_bytes`` and ``publish_key_window`` (any of them) for one
        topic and its channels; persisted in nsqd.dat."""
        topic = self._existing_topic(request)
        if topic.ephemeral:
            raise HttpError(400, "EPHEMERAL_TOPIC")
        ttl_ms = _query_setting(request, "ttl_ms", parse_ttl_ms, "INVALID_TTL")
        expire_action = _query_setting(request, "expire_action", parse_expire_action, "INVALID_EXPIRE_ACTION")
        retention = _query_setting(request, "retention", parse_retention, "INVALID_RETENTION")
        retention_bytes = _query_setting(request, "retention_bytes", parse_retention_bytes, "INVALID_RETENTION_BYTES")
        key_window = _query_setting(request, "publish_key_window", parse_key_window, "INVALID_PUBLISH_KEY_WINDOW")
        limit = _limit_settings(request)
        if (retention or retention_bytes) and self.nsqd.replication is not None:
            raise HttpError(400, "RETENTION_NOT_SUPPORTED a retained topic's log is not replicated yet")
        try:
            topic.configure_retention(retention, retention_bytes)
        except ValueError as error:
            raise HttpError(400, f"REPLAYING {error}") from None
        except OSError as error:
            raise HttpError(500, f"INTERNAL_ERROR {error.strerror or error}") from None
        topic.configure_expiry(None if ttl_ms is None else ttl_ms / 1000, expire_action)
        topic.limit.configure(*limit)
        if key_window is not None:
            topic.publish_key_window_setting = key_window
        await self._persisted(topic)
        return json_response(stats_module.topic_config(topic))

    # --- runtime configuration -------------------------------------------------------------------

    def _config_value(self, name: str):
        if "/" in name:
            raise HttpError(404, "NOT_FOUND")  # an escaped path, not an option name
        if name == "nsqlookupd_tcp_addresses":
            return self.nsqd.nsqlookupd_tcp_addresses
        return option_value(self.nsqd.options, name)

    async def config_get(self, request):
        return json_response(self._config_value(request.match_info["opt"]))

    async def config_put(self, request):
        name = request.match_info["opt"]
        if name not in ("nsqlookupd_tcp_addresses", "log_level"):
            self._config_value(name)  # 404 or 400 as for a GET
            raise HttpError(400, "INVALID_OPTION")
        body = await read_body(request, MAX_CONFIG_BODY, "INVALID_VALUE")
        nsqd = self.nsqd
        if name == "log_level":
            put_log_level(nsqd.options, nsqd.log, body)
        else:
            nsqd.set_lookupd_addresses(address_list(body, split_host_port))
        return json_response(self._config_value(name))


def _binary(request) -> bool:
    binary = request.query.get("binary")
    return binary is not None and binary not in ("false", "0")


def _key_param(request) -> bytes:
    if "key" not in request.query:
        raise HttpError(400, "MISSING_ARG_KEY")
    key = request.query["key"].encode("utf-8")
    problem = key_problem(key)
    if problem is not None:
        raise HttpError(400, f"INVALID_KEY key {problem}")
    return key


def _refuse_key(request, keyed_route: str) -> None:
    """A key given to /pub or /mpub would be ignored, as NSQ's nsqd ignores
    it, and every repeat queued: say where keys go instead."""
    if "key" in request.query:
        raise HttpError(400, f"INVALID_ARG_KEY keyed publishes go to {keyed_route}")


def _query_setting(request, name: str, parse, invalid: str):
    """``parse(request.query[name])``, None when absent, 400 ``invalid`` when bad."""
    if name not in request.query:
        return None
    try:
        return parse(request.query[name])
    except ValueError:
        raise HttpError(400, invalid) from None


def _limit_settings(request) -> tuple[int | None, str | None]:
    """``max_depth`` and ``full_policy`` (bounds.py), each None when absent."""
    return (_query_setting(request, "max_depth", parse_max_depth, "INVALID_MAX_DEPTH"),
            _query_setting(request, "full_policy", parse_full_policy, "INVALID_FULL_POLICY"))
