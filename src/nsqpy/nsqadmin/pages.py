"""nsqadmin's HTML pages, rendered on the server from the same cluster
queries the JSON API makes (no second trip through HTTP).

Templates autoescape everything: client ids, hostnames and user agents come
from whoever connects to nsqd and are shown as text, never as markup. The
small scripts in static/ refresh a page's content while it is open, draw the
charts and send the actions to the JSON API.
"""

import jinja2
from aiohttp import web

from ..version import __version__
from ..httpapi import HttpError
from ..protocol import NSQ_VERSION
from ..protocol.names import is_valid_channel_name, is_valid_topic_name
from . import aggregate, figures
from .cluster import AllFailed


def is_web_url(value) -> bool:
    """Only http(s) links are rendered as links (never ``javascript:``)."""
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def quantiles_of(*stats: dict) -> list[float]:
    """The e2e quantiles any of these stats carry, highest first (columns of a table)."""
    found = {p["quantile"] for s in stats for p in s["e2e_processing_latency"]["percentiles"] or ()}
    return sorted(found, reverse=True)


def new_environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("nsqpy.nsqadmin", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(count=figures.count, duration=figures.duration, rate=figures.rate,
                       drain_label=figures.drain_label, latency=figures.latency, size=figures.size,
                       moment=figures.moment, retention=figures.retention, since=figures.since)
    env.tests["web_url"] = is_web_url
    env.globals.update(nsq_version=NSQ_VERSION, nsqpy_version=__version__)
    return env


class Pages:
    def __init__(self, admin):
        self.admin = admin
        self.cluster = admin.cluster
        self.history = admin.history
        self.base = admin.options.base_path
        self.env = new_environment()

    def routes(self) -> list:
        base = self.base
        get = web.get
        return [
            get(f"{base}/", self._as_page(self.topics_page), allow_head=False),
            get(f"{base}/topics", self._as_page(self.topics_page), allow_head=False),
            get(f"{base}/topics/{{topic}}", self._as_page(self.topic_page), allow_head=False),
            get(f"{base}/topics/{{topic}}/{{channel}}", self._as_page(self.channel_page), allow_head=False),
            get(f"{base}/nodes", self._as_page(self.nodes_page), allow_head=False),
            get(f"{base}/nodes/{{node}}", self._as_page(self.node_page), allow_head=False),
            get(f"{base}/counter", self._as_page(self.counter_page), allow_head=False),
            get(f"{base}/lookup", self._as_page(self.lookup_page), allow_head=False),
        ]

    def _as_page(self, handler):
        """A page that cannot be shown says why, as a page (with the status
        code the JSON API would give), not as JSON."""
        async def page(request):
            try:
                return await handler(request)
            except HttpError as error:
                return self.render(request, "problem.html", status=error.status, reason=error.message, warnings=[])
            except AllFailed as error:
                return self.render(request, "problem.html", status=502, reason=f"UPSTREAM_ERROR: {error}", warnings=[])
        return page

    def render(self, request: web.Request, template: str, status: int = 200, **context) -> web.Response:
        """``can_act``: whether to offer the actions (only admin users may take them)."""
        page = self.env.get_template(template).render(
            base=self.base, graphite=self.admin.graphite.enabled, history_enabled=self.history.enabled,
            history_interval=self.history.interval, uses_lookupd=self.cluster.uses_lookupd,
            can_act=self.admin.options.is_admin(request.headers), **context)
        return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")

    async def topics_page(self, request):
        topics, errors = await self.cluster.topics()
        rows = [{"name": t, **self.history.summary(t)} for t in topics]
        return self.render(request, "topics.html", page="topics", warnings=errors, topics=rows)

    async def topic_page(self, request):
        topic = _name(request, "topic")
        per_node, errors = await self.cluster.topic_stats(topic)
        if not per_node:
            return await self.lookupd_only(request, errors, topic)
        stats = aggregate.aggregate_topic(topic, per_node)
        return self.render(request, "topic.html", page="topics", warnings=errors, topic_name=topic, topic=stats,
                           summary=self.history.summary(topic),
                           quantiles=quantiles_of(stats, *stats["nodes"], *stats["channels"]),
                           graphite_target=self.admin.graphite.rate_target(topic))

    async def channel_page(self, request):
        topic, channel = _name(request, "topic"), _name(request, "channel")
        per_node, errors = await self.cluster.topic_stats(topic, channel)
        channels = [c for t in per_node for c in t["channels"] if c["channel_name"] == channel]
        if not channels:
            return await self.lookupd_only(request, errors, topic, channel)
        stats = aggregate.aggregate_channel(topic, channel, channels)
        return self.render(request, "channel.html", page="topics", warnings=errors, topic_name=topic, channel_name=channel,
                           channel=stats, summary=self.history.summary(topic, channel),
                           quantiles=quantiles_of(stats, *stats["nodes"]),
                           graphite_target=self.admin.graphite.rate_target(topic, channel))

    async def lookupd_only(self, request, errors: list[str], topic: str, channel: str | None = None):
        """A topic (or channel) that nsqlookupd lists but no nsqd has: created
        on the lookup page before any producer, or left behind by producers
        that went away. It has no figures (Go's nsqadmin answers
        ``UPSTREAM_ERROR: failed to query any nsqd``), but it is shown, with
        its channels and the delete that removes it from nsqlookupd."""
        channels, lookup_errors = await self.cluster.registered_channels(topic)
        if channels is None:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        if channel is not None and channel not in channels:
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        return self.render(request, "lookupd_only.html", page="topics", warnings=errors + lookup_errors,
                           topic_name=topic, channel_name=channel, channels=channels)

    async def nodes_page(self, request):
        nodes, departed, errors = await self.cluster.node_entries()
        return self.render(request, "nodes.html", page="nodes", warnings=errors, nodes=nodes,
                           departed=self.admin.cleared.visible(departed))

    async def node_page(self, request):
        node = request.match_info["node"]
        producer, errors = await self.cluster.find_producer(node)
        if producer is None:
            raise HttpError(404, "NODE_NOT_FOUND")
        topics, replication, stats_errors = await self.cluster.node_detail(producer)
        return self.render(request, "node.html", page="nodes", warnings=errors + stats_errors, node=node, producer=producer,
                           summary=aggregate.node_summary(node, topics, replication))

    async def counter_page(self, request):
        return self.render(request, "counter.html", page="counter", warnings=[])

    async def lookup_page(self, request):
        inactive, errors = await self.cluster.inactive_topics()
        return self.render(request, "lookup.html", page="lookup", warnings=errors, inactive=inactive,
                           lookupds=self.cluster.lookupds)


def _name(request: web.Request, kind: str) -> str:
    name = request.match_info[kind]
    valid = is_valid_topic_name if kind == "topic" else is_valid_channel_name
    if not valid(name):
        raise HttpError(400, f"INVALID_{kind.upper()}")
    return name
