"""Asking nsqlookupd which nsqd nodes have a topic."""

import aiohttp

NSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}


def lookup_url(address: str) -> str:
    """``host:port`` or a URL; the path defaults to ``/lookup``."""
    if "://" not in address:
        return f"http://{address}/lookup"
    scheme, _, rest = address.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host}/{path if slash and path else 'lookup'}"


async def lookup_producers(session: aiohttp.ClientSession, address: str, topic: str) -> list[str]:
    """``broadcast_address:tcp_port`` of every nsqd lookupd lists for ``topic``
    (none when lookupd does not know the topic yet)."""
    async with session.get(lookup_url(address), params={"topic": topic}, headers=NSQ_ACCEPT) as response:
        if response.status == 404:
            return []
        response.raise_for_status()
        data = await response.json(content_type=None)
    return [f"{p['broadcast_address']}:{p['tcp_port']}" for p in data.get("producers") or []]
