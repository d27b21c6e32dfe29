"""Where to_nsq and nsq_to_nsq publish: one nsqpy ``Producer`` per
``--nsqd-tcp-address`` (as NSQ's tools hold one go-nsq producer each), and
``--mode`` choosing among them. Everything the tools publish goes through
``Destinations.publish``, so a multi-node Producer can replace the
per-address ones here without touching the tools."""

import asyncio
import time

from ..client import Config, NSQError, Producer, ProtocolError
from . import hostpool
from .app import ToolError

PUBLISH_ERRORS = (NSQError, ProtocolError, OSError, asyncio.TimeoutError)
EVERY_DESTINATION = "all"


class Destinations:
    def __init__(self, addresses: list[str], config: Config, mode: str = EVERY_DESTINATION):
        self.addresses = list(addresses)
        self._producers = {address: Producer(address, config) for address in self.addresses}
        self._selector = hostpool.selector(mode, self.addresses)

    @property
    def shares(self) -> int:
        """Into how many parts a batch is worth splitting: one per destination
        when ``--mode`` picks one, else one (it goes to every destination)."""
        return len(self.addresses) if self._selector is not None else 1

    async def connect(self) -> None:
        """Reach every destination now: a wrong address is a one-line error at start."""
        async def reach(address: str) -> None:
            try:
                await self._producers[address].ping()
            except PUBLISH_ERRORS as error:
                raise ToolError(f"cannot publish to nsqd at {address}: {error or type(error).__name__}") from None
        await asyncio.gather(*(reach(address) for address in self.addresses))

    async def publish(self, topic: str, bodies: list[bytes]) -> str:
        """All of ``bodies`` (PUB for one, MPUB for more: nsqd takes all or
        none) to the destination ``--mode`` picks, or to every destination.
        Returns where they went; raises one of ``PUBLISH_ERRORS``."""
        if self._selector is None:
            await asyncio.gather(*(self._send(address, topic, bodies) for address in self.addresses))
            return ", ".join(self.addresses)
        address = self._selector.pick()
        started = time.monotonic()
        try:
            await self._send(address, topic, bodies)
        except PUBLISH_ERRORS:
            self._selector.mark(address, False)
            raise
        self._selector.mark(address, True, time.monotonic() - started)
        return address

    async def _send(self, address: str, topic: str, bodies: list[bytes]) -> None:
        producer = self._producers[address]
        if len(bodies) == 1:
            await producer.publish(topic, bodies[0])
        else:
            await producer.multi_publish(topic, bodies)

    async def close(self) -> None:
        for producer in self._producers.values():
            await producer.close()
