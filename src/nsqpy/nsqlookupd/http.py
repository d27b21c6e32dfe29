"""nsqlookupd's HTTP API: what consumers query and operators edit."""


from aiohttp import web

from ..httpapi import (HttpError, empty_response, json_response, made_on_first_request, new_app, serve,
                       topic_and_channel_params, topic_param)
from ..protocol import NSQ_VERSION


class LookupHttpApi:
    def __init__(self, lookupd):
        self.lookupd = lookupd
        self.db = lookupd.db
        self._runner = None

    async def start(self, sock) -> None:
        app = new_app(self.lookupd.log)
        get, post = web.get, web.post
        app.add_routes([
            get("/ping", self.ping, allow_head=False),
            get("/info", self.info, allow_head=False),
            get("/debug", self.debug, allow_head=False),
            get("/lookup", self.lookup, allow_head=False),
            get("/topics", self.topics, allow_head=False),
            get("/channels", self.channels, allow_head=False),
            get("/nodes", self.nodes, allow_head=False),
            get("/metrics", made_on_first_request(self._metrics_endpoint), allow_head=False),
            post("/topic/create", self.topic_create),
            post("/topic/delete", self.topic_delete),
            post("/channel/create", self.channel_create),
            post("/channel/delete", self.channel_delete),
            post("/topic/tombstone", self.topic_tombstone),
        ])
        self._runner = await serve(app, sock)

    def _metrics_endpoint(self):
        from ..metrics import daemon_registry, metrics_endpoint
        from .metrics import LookupdCollector

        return metrics_endpoint(daemon_registry("nsqlookupd", LookupdCollector(self.lookupd)))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _active(self, producers):
        options = self.lookupd.options
        return self.db.active(producers, options.inactive_producer_timeout, options.tombstone_lifetime)

    async def ping(self, request):
        return web.Response(text="OK")

    async def info(self, request):
        return json_response({"version": NSQ_VERSION})

    async def lookup(self, request):
        topic = request.query.get("topic")
        if not topic:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if not self.db.find_registrations("topic", topic, ""):
            raise HttpError(404, "TOPIC_NOT_FOUND")
        channels = sorted(r[2] for r in self.db.find_registrations("channel", topic, "*"))
        producers = self._active(self.db.find_producers("topic", topic, ""))
        return json_response({"channels": channels, "producers": [p.peer.public() for p in producers]})

    async def topics(self, request):
        return json_response({"topics": sorted(r[1] for r in self.db.find_registrations("topic", "*", ""))})

    async def channels(self, request):
        topic = request.query.get("topic")
        if not topic:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        return json_response({"channels": sorted(r[2] for r in self.db.find_registrations("channel", topic, "*"))})

    async def nodes(self, request):
        db = self.db
        options = self.lookupd.options
        now = db.clock()
        nodes = []
        for producer in db.live(db.find_producers("client", "", ""), options.inactive_producer_timeout):
            peer = producer.peer
            topics, tombstones = [], []
            for registration in sorted(db.registrations_of(peer.id)):
                if registration[0] != "topic":
                    continue
                topics.append(registration[1])
                entry = db.registrations[registration][peer.id]
                tombstones.append(entry.is_tombstoned(options.tombstone_lifetime, now))
            nodes.append({**peer.public(), "tombstones": tombstones, "topics": topics})
        return json_response({"producers": nodes})

    async def topic_create(self, request):
        topic = topic_param(request)
        self.lookupd.log.info("DB: adding topic(%s)", topic)
        self.db.add_registration(("topic", topic, ""))
        return empty_response()

    async def topic_delete(self, request):
        topic = request.query.get("topic")
        if not topic:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        for registration in self.db.find_registrations("channel", topic, "*"):
            self.db.remove_registration(registration)
        for registration in self.db.find_registrations("topic", topic, ""):
            self.db.remove_registration(registration)
        self.lookupd.log.info("DB: removed topic(%s)", topic)
        return empty_response()

    async def channel_create(self, request):
        topic, channel = topic_and_channel_params(request)
        self.db.add_registration(("channel", topic, channel))
        self.db.add_registration(("topic", topic, ""))
        self.lookupd.log.info("DB: adding channel(%s) in topic(%s)", channel, topic)
        return empty_response()

    async def channel_delete(self, request):
        topic, channel = topic_and_channel_params(request)
        registrations = self.db.find_registrations("channel", topic, channel)
        if not registrations:
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        for registration in registrations:
            self.db.remove_registration(registration)
        self.lookupd.log.info("DB: removed channel(%s) from topic(%s)", channel, topic)
        return empty_response()

    async def topic_tombstone(self, request):
        topic = request.query.get("topic")
        if not topic:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        node = request.query.get("node")
        if not node:
            raise HttpError(400, "MISSING_ARG_NODE")
        now = self.db.clock()
        for producer in self.db.find_producers("topic", topic, ""):
            if producer.peer.node == node:
                self.lookupd.log.info("DB: setting tombstone for producer@%s of topic(%s)", node, topic)
                producer.tombstone(now)
        return empty_response()

    async def debug(self, request):
        data = {}
        for (category, key, subkey), producers in self.db.registrations.items():
            data[f"{category}:{key}:{subkey}"] = [{
                "id": p.peer.id, "hostname": p.peer.hostname, "broadcast_address": p.peer.broadcast_address,
                "tcp_port": p.peer.tcp_port, "http_port": p.peer.http_port, "version": p.peer.version,
                "last_update": int(p.peer.last_update * 1e9), "tombstoned": p.tombstoned,
                "tombstoned_at": int(p.tombstoned_at * 1e9),
            } for p in producers.values()]
        return json_response(data)
