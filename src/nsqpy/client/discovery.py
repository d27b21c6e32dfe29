"""Asking nsqlookupd which nsqd nodes have a topic (consumers), or which exist (producers)."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the callers load aiohttp when they ask nsqlookupd, not on import
    import aiohttp

NSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}
LOOKUPD_HTTP_PORT = "give nsqlookupd's HTTP port (its --http-address, 4161 by default)"


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
        if response.status == 404 and await _unknown_topic(response):
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


async def _unknown_topic(response: "aiohttp.ClientResponse") -> bool:
    """nsqlookupd's 404 for a topic it does not know yet, not the 404 of a
    server without ``/lookup`` (nsqd's HTTP port given for nsqlookupd's)."""
    try:
        answer = await response.json(content_type=None)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("message") == "TOPIC_NOT_FOUND"


def failure_reason(error: BaseException) -> str:
    """Why a request to nsqlookupd failed, in one line that names the likely
    wrong port: aiohttp's own text for an answer that is not HTTP is a
    multi-line dump of the bytes, repeated at every poll."""
    from aiohttp import ClientResponseError
    from aiohttp.http_exceptions import BadStatusLine

    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, BadStatusLine):
        cause = cause.__cause__
    if cause is not None:
        if "E_BAD_PROTOCOL" in str(cause):  # nsqd's or nsqlookupd's TCP port, refusing "GET " as a magic
            return f"it answers in NSQ's TCP protocol, not HTTP: this looks like a TCP port; {LOOKUPD_HTTP_PORT}"
        return f"it does not answer in HTTP; {LOOKUPD_HTTP_PORT}"
    if isinstance(error, ClientResponseError) and error.status == 404:
        return (f"it has no {error.request_info.url.path}, so it is not nsqlookupd (nsqd's HTTP port?); "
                f"{LOOKUPD_HTTP_PORT}")
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _tcp_address(producer: dict[str, Any]) -> str:
    host = producer["broadcast_address"]
    return f"[{host}]:{producer['tcp_port']}" if ":" in host else f"{host}:{producer['tcp_port']}"
