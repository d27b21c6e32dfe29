"""Publishing to one nsqd: asyncio first.

One connection, made on first use and remade after it drops; any number of
concurrent callers, their commands pipelined and the answers matched in
order. Every pending call fails with a clear error on close or disconnect:
nothing waits forever.
"""

import asyncio

from ..protocol import commands
from .config import Config
from .conn import Connection
from .errors import StoppedError


class Producer:
    def __init__(self, address: str, config: Config | None = None):
        self.address = address
        self.config = config or Config()
        self._conn: Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._closed = False

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _connection(self) -> Connection:
        if self._closed:
            raise StoppedError("producer is closed")
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._conn is None or self._conn.closed:
                conn = Connection(self.address, self.config)
                await conn.connect()
                self._conn = conn
            return self._conn

    async def _request(self, command: bytes) -> None:
        conn = await self._connection()
        await conn.request(command)

    async def ping(self) -> None:
        """Connect if needed and check that nsqd answers. NOP has no answer; an
        IDENTIFY without feature negotiation does (``OK``) and changes nothing."""
        conn = await self._connection()
        await conn.request(commands.identify({**self.config.identify_body(), "feature_negotiation": False}))

    async def publish(self, topic: str, body: bytes) -> None:
        await self._request(commands.pub(topic, body))

    async def multi_publish(self, topic: str, bodies: list[bytes]) -> None:
        """All or nothing: nsqd queues every message or none."""
        await self._request(commands.mpub(topic, bodies))

    async def deferred_publish(self, topic: str, delay: float, body: bytes) -> None:
        """Deliver after ``delay`` seconds (whole milliseconds on the wire)."""
        await self._request(commands.dpub(topic, int(delay * 1000), body))

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
