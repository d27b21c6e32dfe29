"""Subscribing a tool's consumers the way NSQ's tools do: to the nsqd given,
or through nsqlookupd, with an unreachable address reported in one line."""

import asyncio

import aiohttp

from ..client import Consumer, NSQError, ProtocolError
from . import lookupd
from .app import ToolError
from .options import SourceOptions


async def subscribe(consumers: list[Consumer], options: SourceOptions) -> None:
    if options.lookupd_http_addresses:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            await lookupd.check_reachable(session, options.lookupd_http_addresses)
    for consumer in consumers:
        try:
            await consumer.connect_to_nsqds(options.nsqd_tcp_addresses)
        except (NSQError, ProtocolError, OSError) as error:
            raise ToolError(str(error)) from None
        await consumer.connect_to_nsqlookupds(options.lookupd_http_addresses)


async def stop_all(consumers: list[Consumer]) -> None:
    """CLS everywhere first, then wait: every consumer drains at once."""
    await asyncio.gather(*(consumer.stop() for consumer in consumers))
