"""nsq_stat: one line of a channel's figures every ``--interval``, summed
over every nsqd that has the topic, in NSQ's columns (a header before the
first line and every 25th). Rates are per second over the last interval:
ingress is what the channel received, egress what left its depth."""

import asyncio
import dataclasses

import aiohttp

from ..options import option
from . import lookupd
from .app import ToolError

HEADER = ("------rate------+----------------depth----------------+--------------metadata---------------\n"
          f"{'ingress':>7} {'egress':>7} | {'total':>7} {'mem':>7} {'disk':>7} {'inflt':>5} {'def':>5} | "
          f"{'req':>7} {'t-o':>7} {'msgs':>12} {'clients':>7}")
HEADER_EVERY = 25


@dataclasses.dataclass
class StatOptions:
    topic: str = option("", "NSQ topic")
    channel: str = option("", "NSQ channel")
    interval: float = option(2.0, "duration of time between polling/printing output", duration=True)
    count: int = option(0, "number of reports (default: until interrupted)")
    nsqd_http_addresses: list[str] = option([], "nsqd HTTP address (may be given multiple times)",
                                            flag="nsqd-http-address")
    lookupd_http_addresses: list[str] = option([], "lookupd HTTP address (may be given multiple times)",
                                               flag="lookupd-http-address")
    http_client_connect_timeout: float = option(2.0, "timeout for HTTP connect", duration=True)
    http_client_request_timeout: float = option(5.0, "timeout for HTTP request", duration=True)


@dataclasses.dataclass(frozen=True)
class ChannelFigures:
    depth: int = 0
    backend_depth: int = 0
    in_flight: int = 0
    deferred: int = 0
    requeued: int = 0
    timed_out: int = 0
    messages: int = 0
    clients: int = 0

    @classmethod
    def from_stats(cls, channel: dict) -> "ChannelFigures":
        return cls(channel["depth"], channel["backend_depth"], channel["in_flight_count"],
                   channel["deferred_count"], channel["requeue_count"], channel["timeout_count"],
                   channel["message_count"], channel["client_count"])

    def __add__(self, other: "ChannelFigures") -> "ChannelFigures":
        return ChannelFigures(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


def report_line(now: ChannelFigures, before: ChannelFigures, interval: float) -> str:
    ingress = int((now.messages - before.messages) / interval)
    egress = int((now.messages - before.messages - (now.depth - before.depth)) / interval)
    return (f"{ingress:7d} {egress:7d} | {now.depth:7d} {now.depth - now.backend_depth:7d} "
            f"{now.backend_depth:7d} {now.in_flight:5d} {now.deferred:5d} | {now.requeued:7d} "
            f"{now.timed_out:7d} {now.messages:12d} {now.clients:7d}")


def check(options: StatOptions) -> None:
    if not options.topic or not options.channel:
        raise ToolError("--topic and --channel are required")
    if not options.nsqd_http_addresses and not options.lookupd_http_addresses:
        raise ToolError("--nsqd-http-address or --lookupd-http-address required")
    if options.nsqd_http_addresses and options.lookupd_http_addresses:
        raise ToolError("use --nsqd-http-address or --lookupd-http-address not both")
    for flag, addresses in (("nsqd-http-address", options.nsqd_http_addresses),
                            ("lookupd-http-address", options.lookupd_http_addresses)):
        if any("://" in address for address in addresses):
            raise ToolError(f"--{flag} error - address should not contain scheme")
    if options.count < 0:
        raise ToolError("--count should be positive")
    if options.interval <= 0:
        raise ToolError("--interval should be positive")


async def channel_figures(session: aiohttp.ClientSession, options: StatOptions) -> ChannelFigures:
    """The channel's figures summed over the nsqd that have the topic."""
    nodes = options.nsqd_http_addresses or await lookupd.topic_http_addresses(
        session, options.lookupd_http_addresses, options.topic)
    replies = await asyncio.gather(*(lookupd.get_json(session, f"http://{node}/stats", format="json",
                                                      topic=options.topic, include_clients="false")
                                     for node in nodes), return_exceptions=True)
    errors = [f"{node}: {reply or type(reply).__name__}" for node, reply in zip(nodes, replies)
              if isinstance(reply, Exception)]
    if errors and len(errors) == len(nodes):
        raise ToolError(f"failed to get topic producers - failed to query any nsqd ({'; '.join(errors)})")
    total, found = ChannelFigures(), False
    for reply in replies:
        if isinstance(reply, Exception):
            continue
        for topic in reply.get("topics") or []:
            if topic["topic_name"] != options.topic:
                continue
            for channel in topic.get("channels") or []:
                if channel["channel_name"] == options.channel:
                    total, found = total + ChannelFigures.from_stats(channel), True
    if not found:
        raise ToolError(f"failed to find channel({options.channel}) in stats metadata for topic({options.topic})")
    return total


async def run(options: StatOptions, stop: asyncio.Event, log) -> int:
    check(options)
    timeout = aiohttp.ClientTimeout(total=options.http_client_request_timeout,
                                    sock_connect=options.http_client_connect_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        before = await channel_figures(session, options)
        report = 0
        while not options.count or report < options.count:
            try:
                await asyncio.wait_for(stop.wait(), options.interval)
                return 0
            except asyncio.TimeoutError:
                pass
            now = await channel_figures(session, options)
            report += 1
            if report == 1 or report % HEADER_EVERY == 0:
                print(HEADER)
            print(report_line(now, before, options.interval), flush=True)
            before = now
    return 0
