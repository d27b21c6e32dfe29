"""Graphite, for clusters whose nsqd push statsd: message rates the way Go's
nsqadmin shows them, and the optional ``/render`` proxy (``--proxy-graphite``)
so browsers need no direct access to Graphite."""

import json
from urllib.parse import urlsplit

from aiohttp import web

from ..httpapi import HttpError
from .upstream import UpstreamError


class Graphite:
    def __init__(self, options, upstream):
        self.options = options
        self.upstream = upstream

    @property
    def enabled(self) -> bool:
        return bool(self.options.graphite_url)

    def _render_url(self) -> str:
        return self.options.graphite_url.rstrip("/") + "/render"

    def rate_target(self, topic: str, channel: str | None = None) -> str:
        """The Graphite target summing a topic's (or channel's) message counter over every nsqd."""
        prefix = self.options.statsd_prefix.replace("%s", "*") if "%s" in self.options.statsd_prefix \
            else self.options.statsd_prefix
        key = f"topic.{topic}.channel.{channel}.message_count" if channel else f"topic.{topic}.message_count"
        key = f"{prefix}.{key}" if prefix else key
        counter_format = self.options.statsd_counter_format
        if counter_format:
            key = counter_format.replace("%s", key)
        return f"sumSeries({key})"

    async def rate(self, target: str) -> str:
        """Messages per second over the last complete statsd interval, as text ("N/A" when unknown)."""
        if not self.enabled:
            return "N/A"
        interval = int(self.options.statsd_interval)
        params = {"from": f"-{2 * interval}sec", "until": f"-{interval}sec", "format": "json", "target": target}
        try:
            _, body = await self.upstream.request("GET", self._render_url(), params=params)
            series = json.loads(body)
            value = series[0]["datapoints"][0][0]
        except (UpstreamError, ValueError, LookupError, TypeError):
            return "N/A"
        if value is None:
            return "N/A"
        return f"{value / self.options.statsd_interval:.2f}"

    async def proxy_render(self, request: web.Request) -> web.Response:
        """``/render``: Graphite's answer relayed (credentials in --graphite-url are used, never shown)."""
        try:
            status, body = await self.upstream.request("GET", self._render_url(), params=request.query)
        except UpstreamError as error:
            host = urlsplit(self.options.graphite_url).hostname
            raise HttpError(502, f"UPSTREAM_ERROR: graphite at {host}: {error.status or 'no answer'}") from None
        return web.Response(body=body, status=status, content_type="application/json")
