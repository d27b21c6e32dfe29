"""Where to_nsq and nsq_to_nsq publish: one nsqpy ``Producer`` over every
``--nsqd-tcp-address``, with ``--mode`` as its way of choosing.

NSQ's tools hold one go-nsq producer per address and requeue a message when
the one they picked fails; the multi-node Producer sends it to another
address at once and sets the failed one aside until it answers again
(``hostpool`` and ``round-robin`` take the healthy ones in turn,
``epsilon-greedy`` the one with the fewest unanswered publishes, i.e. the
fastest). Any other mode sends every message to every address, as NSQ does:
a Producer whose replicas are all the addresses, without dedup keys.
"""

import asyncio

from ..client import Config, NSQError, Producer, ProtocolError
from .app import ToolError

PUBLISH_ERRORS = (NSQError, ProtocolError, OSError, asyncio.TimeoutError)
EVERY_DESTINATION = "all"
STRATEGIES = {"round-robin": "round-robin", "hostpool": "round-robin", "epsilon-greedy": "least-pending"}


class Destinations:
    def __init__(self, addresses: list[str], config: Config, mode: str = EVERY_DESTINATION):
        self.addresses = list(dict.fromkeys(addresses))
        self.config = config
        strategy = STRATEGIES.get(mode)
        self.every = strategy is None
        if self.every:
            self._producer = Producer(self.addresses, config, replicas=len(self.addresses), dedup_key=False)
        else:
            self._producer = Producer(self.addresses, config, strategy=strategy)

    @property
    def shares(self) -> int:
        """Into how many parts a batch is worth splitting: one per destination
        when ``--mode`` picks one, else one (it goes to every destination)."""
        return 1 if self.every else len(self.addresses)

    async def unreachable(self) -> list[str]:
        """One line per destination that does not answer now, naming it and why."""
        async def reach(address: str) -> str:
            try:
                async with Producer(address, self.config) as producer:
                    await producer.ping()
            except PUBLISH_ERRORS as error:
                return f"cannot publish to nsqd at {address}: {error or type(error).__name__}"
            return ""
        return [line for line in await asyncio.gather(*(reach(address) for address in self.addresses)) if line]

    async def connect(self) -> None:
        """Reach every destination now: a wrong address is a one-line error
        at start (to_nsq, whose input has nowhere to wait)."""
        problems = await self.unreachable()
        if problems:
            raise ToolError(problems[0])

    async def publish(self, topic: str, bodies: list[bytes], keys: list[str] | None = None) -> str:
        """All of ``bodies`` (PUB for one, MPUB for more: nsqd takes all or
        none; with ``keys``, keyed: KPUB, KMPUB) to the destination ``--mode``
        picks, or to every destination. Returns where they went; raises one
        of ``PUBLISH_ERRORS``."""
        if keys is None:
            if len(bodies) == 1:
                return await self._producer.publish(topic, bodies[0])
            return await self._producer.multi_publish(topic, bodies)
        if len(bodies) == 1:
            return await self._producer.publish(topic, bodies[0], key=keys[0])
        return await self._producer.multi_publish(topic, bodies, keys=keys)

    async def close(self) -> None:
        await self._producer.close()
