"""What the workload knows of the cluster, it learns from nsqlookupd, as
any NSQ client does: the nodes registered now (publishers) and the
producers of a topic (consumers), each by its broadcast address, which
is also its name as a replicated node. A node killed, or brought back
under another port, leaves or joins these lists by itself."""

import aiohttp

from .wire import ANSWER_TIMEOUT


class Directory:
    def __init__(self, lookupd_http_address: str):
        self.url = f"http://{lookupd_http_address}"
        self._session: aiohttp.ClientSession | None = None

    async def _get(self, path: str) -> list[dict]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ANSWER_TIMEOUT))
        async with self._session.get(self.url + path) as response:
            return (await response.json(content_type=None)).get("producers", [])  # a topic not known yet: none

    async def nodes(self) -> dict[str, str]:
        """Every registered node's TCP address (its name) -> its HTTP address."""
        return {f"{p['broadcast_address']}:{p['tcp_port']}": f"{p['broadcast_address']}:{p['http_port']}"
                for p in await self._get("/nodes")}

    async def producers(self, topic: str) -> set[str]:
        return {f"{p['broadcast_address']}:{p['tcp_port']}" for p in await self._get(f"/lookup?topic={topic}")}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
