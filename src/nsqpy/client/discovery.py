"""Asking nsqlookupd which nsqd nodes have a topic (consumers), or which exist (producers)."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the callers load aiohttp when they ask nsqlookupd, not on import
    import aiohttp

NSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}


def lookup_url(address: str, endpoint: str = "lookup") -> str:
    """``host:port`` or a URL; the path defaults to ``/lookup`` (or ``endpoint``)."""
    if "://" not in address:
        return f"http://{address}/{endpoint}"
    scheme, _, rest = address.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host}/{path if slash and path else endpoint}"


async def lookup_producers(session: "aiohttp.ClientSession", address: str, topic: str) -> list[str]:
    """``broadcast_address:tcp_port`` of every nsqd lookupd lists for ``topic``
    (none when lookupd does not know the topic yet)."""
    async with session.get(lookup_url(address), params={"topic": topic}, headers=NSQ_ACCEPT) as response:
        if response.status == 404:
            return []
        response.raise_for_status()
        data = await response.json(content_type=None)
    return [_tcp_address(p) for p in data.get("producers") or []]


async def list_nodes(session: "aiohttp.ClientSession", address: str) -> list[str]:
    """``broadcast_address:tcp_port`` of every nsqd registered with lookupd:
    where a Producer over many nodes may publish."""
    async with session.get(lookup_url(address, "nodes"), headers=NSQ_ACCEPT) as response:
        response.raise_for_status()
        data = await response.json(content_type=None)
    return [_tcp_address(p) for p in data.get("producers") or []]


def _tcp_address(producer: dict[str, Any]) -> str:
    host = producer["broadcast_address"]
    return f"[{host}]:{producer['tcp_port']}" if ":" in host else f"{host}:{producer['tcp_port']}"
