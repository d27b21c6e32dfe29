"""What the tools ask nsqlookupd over HTTP: is it there, which topics exist,
which nsqd (HTTP addresses) have a topic. Addresses are ``host:port`` or URLs."""

import asyncio

import aiohttp

from ..client.discovery import NSQ_ACCEPT, failure_reason
from .app import ToolError

HTTP_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ValueError)


def base_url(address: str) -> str:
    return address.rstrip("/") if "://" in address else f"http://{address}"


async def get_json(session: aiohttp.ClientSession, url: str, **params) -> dict:
    async with session.get(url, params=params, headers=NSQ_ACCEPT) as response:
        if response.status == 404:
            return {}
        response.raise_for_status()
        return await response.json(content_type=None)


async def check_reachable(session: aiohttp.ClientSession, addresses: list[str]) -> None:
    """At start, at least one nsqlookupd must answer: a typo in an address is
    reported at once instead of as an idle consumer."""
    errors = []
    for address in addresses:
        try:
            async with session.get(f"{base_url(address)}/ping") as response:
                if response.status == 200:
                    return
                errors.append(f"{address}: HTTP {response.status}")
        except HTTP_ERRORS as error:
            errors.append(f"{address}: {failure_reason(error)}")
    raise ToolError(f"no nsqlookupd reachable ({'; '.join(errors)})")


async def topics(session: aiohttp.ClientSession, addresses: list[str]) -> set[str]:
    """Every topic any of the nsqlookupd know (those that answer)."""
    found = set()
    for address in addresses:
        try:
            found.update((await get_json(session, f"{base_url(address)}/topics")).get("topics") or [])
        except HTTP_ERRORS:
            continue
    return found


async def topic_http_addresses(session: aiohttp.ClientSession, addresses: list[str], topic: str) -> list[str]:
    """``host:http_port`` of every nsqd the nsqlookupd list for ``topic``."""
    found = []
    errors = []
    for address in addresses:
        try:
            data = await get_json(session, f"{base_url(address)}/lookup", topic=topic)
        except HTTP_ERRORS as error:
            errors.append(f"{address}: {failure_reason(error)}")
            continue
        for producer in data.get("producers") or []:
            node = f"{producer['broadcast_address']}:{producer['http_port']}"
            if node not in found:
                found.append(node)
    if errors and len(errors) == len(addresses):
        raise ToolError(f"failed to query any nsqlookupd ({'; '.join(errors)})")
    return found
