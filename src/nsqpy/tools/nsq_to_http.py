"""nsq_to_http: one HTTP request per message of a topic.

``--get`` URLs carry the body query-escaped in place of their ``%s``;
``--post`` URLs get it as the request body. ``-n`` requests run at once.
A message is FINished once its request succeeded (2xx for POST, 200 for
GET), and REQueued with backoff otherwise, so a failing service slows the
consumer down instead of losing messages. ``--sample`` sends only that
fraction (the rest are FINished unsent).
"""

import asyncio
import dataclasses
import random
import time
from urllib.parse import quote_plus

import aiohttp
from yarl import URL

from ..client import Consumer
from ..options import option
from .app import ToolError, user_agent
from .clientopts import DELIVERING_DEFAULTS, client_config
from .consuming import stop_all, subscribe
from .hostpool import MODES, selector
from .options import SourceOptions, check_names, check_sources
from .timing import StatusEvery

DEFAULT_CONTENT_TYPE = "application/octet-stream"


@dataclasses.dataclass
class NsqToHttpOptions(SourceOptions):
    topic: str = option("", "nsq topic")
    channel: str = option("nsq_to_http", "nsq channel")
    gets: list[str] = option([], "HTTP address to make a GET request to. '%s' will be printf replaced with data "
                             "(may be given multiple times)", flag="get")
    posts: list[str] = option([], "HTTP address to make a POST request to.  data will be in the body (may be "
                              "given multiple times)", flag="post")
    content_type: str = option(DEFAULT_CONTENT_TYPE, "the Content-Type used for POST requests")
    headers: list[str] = option([], "Custom header for HTTP requests, key=value (may be given multiple times)",
                                flag="header")
    mode: str = option("hostpool", "the upstream request mode options: round-robin, hostpool (default), "
                       "epsilon-greedy")
    n: int = option(100, "number of concurrent publishers")
    sample: float = option(1.0, "% of messages to publish (float b/w 0 -> 1)")
    status_every: int = option(250, "the # of requests between logging status (per handler), 0 disables")
    http_client_connect_timeout: float = option(2.0, "timeout for HTTP connect", duration=True)
    http_client_request_timeout: float = option(20.0, "timeout for HTTP request", duration=True)


class RequestFailed(Exception):
    pass


def parse_headers(settings: list[str]) -> dict:
    headers = {}
    for setting in settings:
        key, equals, value = setting.partition("=")
        if not equals or not key.strip():
            raise ToolError("--header value format should be 'key=value'")
        headers[key.strip()] = value.strip()
    return headers


def check(options: NsqToHttpOptions, log) -> None:
    check_names([options.topic] if options.topic else [], options.channel)
    if options.content_type != DEFAULT_CONTENT_TYPE and not options.posts:
        raise ToolError("--content-type only used with --post")
    if not options.content_type:
        raise ToolError("--content-type requires a value when used")
    check_sources(options)
    if not options.gets and not options.posts:
        raise ToolError("--get or --post required")
    if options.gets and options.posts:
        raise ToolError("use --get or --post not both")
    if any(url.count("%s") != 1 for url in options.gets):
        raise ToolError("invalid GET address - must be a printf string")
    if not 0.0 <= options.sample <= 1.0:
        raise ToolError("--sample must be between 0.0 and 1.0")
    if options.n < 1:
        raise ToolError(f"-n must be at least 1 (got {options.n})")
    if options.mode not in MODES:
        log.warning("--mode %r is none of %s: every message goes to every URL (as NSQ does)",
                    options.mode, ", ".join(MODES))


class HttpForwarder:
    def __init__(self, session: aiohttp.ClientSession, options: NsqToHttpOptions, log):
        self.session = session
        self.method = "GET" if options.gets else "POST"
        self.urls = options.gets or options.posts
        self.headers = {"User-Agent": user_agent("nsq_to_http"), **parse_headers(options.headers)}
        if self.method == "POST":
            self.headers.setdefault("Content-Type", options.content_type)
        self.sample = options.sample
        self.selector = selector(options.mode, self.urls)
        self.log = log
        self._status = StatusEvery(options.status_every, "[aggregate]:", log)
        self._per_url = {url: StatusEvery(options.status_every, f"[{url}]:", log) for url in self.urls}

    async def handle(self, message) -> None:
        if self.sample < 1.0 and random.random() > self.sample:
            return  # FINished unsent
        message.disable_auto_response()
        started = time.monotonic()
        try:
            if self.selector is None:
                for url in self.urls:
                    await self._timed(url, message.body)
            else:
                url = self.selector.pick()
                try:
                    await self._timed(url, message.body)
                except RequestFailed:
                    self.selector.mark(url, False)
                    raise
                self.selector.mark(url, True, time.monotonic() - started)
        except RequestFailed as error:
            self.log.warning("%s; requeueing %s", error, message.id.decode())
            message.requeue()
            return
        message.finish()
        self._status.record(time.monotonic() - started)

    async def _timed(self, url: str, body: bytes) -> None:
        started = time.monotonic()
        await self._request(url, body)
        self._per_url[url].record(time.monotonic() - started)

    async def _request(self, url: str, body: bytes) -> None:
        try:
            if self.method == "GET":
                target = URL(url.replace("%s", quote_plus(body)), encoded=True)
                async with self.session.get(target, headers=self.headers) as response:
                    await response.read()
                    ok = response.status == 200
            else:
                async with self.session.post(url, data=body, headers=self.headers) as response:
                    await response.read()
                    ok = 200 <= response.status < 300
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
            raise RequestFailed(f"{self.method} {url} failed: {error or type(error).__name__}") from None
        if not ok:
            raise RequestFailed(f"{self.method} {url} got status code {response.status}")


async def run(options: NsqToHttpOptions, stop: asyncio.Event, log) -> int:
    check(options, log)
    config = client_config(user_agent("nsq_to_http"), "consumer-opt", options.consumer_opts,
                           defaults=DELIVERING_DEFAULTS, max_in_flight=options.max_in_flight)
    timeout = aiohttp.ClientTimeout(total=options.http_client_request_timeout,
                                    sock_connect=options.http_client_connect_timeout)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=options.n)) as session:
        forwarder = HttpForwarder(session, options, log)
        consumer = Consumer(options.topic, options.channel, forwarder.handle, config=config, concurrency=options.n)
        try:
            await subscribe([consumer], options)
            await stop.wait()
        finally:
            await stop_all([consumer])
    return 0
