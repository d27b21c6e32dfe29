"""Several consumers of one channel acting as one, so a batch is not capped by one connection.

nsqd caps what one connection may hold in flight (``--max-rdy-count``, 2500
by default), and a consumer has one connection per nsqd. The source keeps a
whole batch in flight until it commits, and wants room for two (the next one
fills while Spark writes this one); so with nsqd's defaults one connection
per node would cap every batch at 2500. ``WideConsumer`` opens as many
consumers (one connection per node each) as that room needs, shares the
in-flight budget among them, and answers each message through the consumer
whose connection brought it. The consumers are bulk ones: the holder gets
each read's messages as they came, and answers them by id.
"""

import asyncio
import itertools
import logging
import math

from ..client.consumer import Consumer, ConnectionStats
from ..client.config import Config
from ..client.errors import ConnectionClosedError

log = logging.getLogger("nsqpy.spark")

DEFAULT_MAX_RDY_COUNT = 2500  # nsqd's default, when a node does not say
# nsq_to_parquet's batches of 100,000 want 200,000 in flight: 80 connections
# at nsqd's default cap. At 64 the next batch could not be all in while Spark
# wrote this one, and each read() waited for the rest after its FINs.
MAX_CONNECTIONS_PER_NODE = 128


def consumers_needed(in_flight: int, max_rdy_count: int) -> int:
    """How many connections per node hold ``in_flight`` messages at ``max_rdy_count`` each."""
    return max(1, min(MAX_CONNECTIONS_PER_NODE, math.ceil(in_flight / max(1, max_rdy_count))))


class WideConsumer:
    def __init__(self, topic: str, channel: str, handler, config: Config):
        self.topic, self.channel, self.handler, self.config = topic, channel, handler, config
        self.consumers: list[Consumer] = []

    async def connect(self, nsqd_tcp_addresses, lookupd_http_addresses, patience: float = 20.0) -> None:
        """One consumer first, to learn nsqd's cap; then as many more as the
        budget needs. Each is tried again for ``patience`` seconds (an nsqd
        restarting, or slow to accept on a busy machine, where a dial can
        outlast its ``dial_timeout``); one of the others that still cannot
        connect is left out (fewer connections, smaller batches), and said so."""
        first = await self._joined(self.config.max_in_flight, nsqd_tcp_addresses, lookupd_http_addresses, patience,
                                   say=True)
        self.consumers.append(first)
        caps = [conn.max_rdy_count or DEFAULT_MAX_RDY_COUNT for conn in first.connections.values()]
        wanted = consumers_needed(self.config.max_in_flight, min(caps, default=DEFAULT_MAX_RDY_COUNT))
        share = math.ceil(self.config.max_in_flight / wanted)
        first.change_max_in_flight(share)
        results = await asyncio.gather(*(self._joined(share, nsqd_tcp_addresses, lookupd_http_addresses, patience)
                                         for _ in range(wanted - 1)), return_exceptions=True)
        self.consumers += [result for result in results if isinstance(result, Consumer)]
        failed = [result for result in results if isinstance(result, BaseException)]
        if failed:
            log.warning("nsq source: %d of %d connections per node could not be opened (%s): batches are "
                        "smaller", len(failed), wanted, failed[0])
            self.change_max_in_flight(self.config.max_in_flight)

    async def _joined(self, max_in_flight: int, nsqd_tcp_addresses, lookupd_http_addresses, patience: float,
                      say: bool = False) -> Consumer:
        """A bulk consumer connected to every node, tried again until
        ``patience`` runs out (``say``: each retry logged)."""
        deadline = asyncio.get_running_loop().time() + patience
        pause = 0.2
        while True:
            consumer = Consumer(self.topic, self.channel, self.handler, config=self.config, bulk=True)
            try:
                await self._join(consumer, max_in_flight, nsqd_tcp_addresses, lookupd_http_addresses)
                return consumer
            except ConnectionClosedError as error:
                await consumer.stop(timeout=1.0)
                if asyncio.get_running_loop().time() + pause > deadline:
                    raise
                if say:
                    log.warning("nsq source: %s; trying again in %.1fs", error, pause)
                await asyncio.sleep(pause)
                pause = min(2.0, pause * 2)
            except Exception:
                await consumer.stop(timeout=1.0)
                raise

    @staticmethod
    async def _join(consumer: Consumer, max_in_flight: int, nsqd_tcp_addresses, lookupd_http_addresses) -> None:
        consumer.change_max_in_flight(max_in_flight)
        await consumer.connect_to_nsqds(nsqd_tcp_addresses)
        await consumer.connect_to_nsqlookupds(lookupd_http_addresses)

    def connections(self) -> list:
        return [conn for consumer in self.consumers for conn in consumer.connections.values()]

    def forget_connection(self, conn) -> None:
        """Take ``conn`` out of its consumer's hands (the caller closes it)."""
        for consumer in self.consumers:
            if consumer.connections.get(conn.address) is conn:
                del consumer.connections[conn.address]

    def change_max_in_flight(self, count: int) -> None:
        share = math.ceil(count / len(self.consumers)) if self.consumers else 0
        for consumer in self.consumers:
            consumer.change_max_in_flight(share)

    def finish(self, chunks) -> list:
        """FIN each chunk (``chunks.Chunk``) through the consumer whose
        connection brought it; returns those that could not be answered
        (their connection closed: nsqd delivers them again)."""
        return self._answer(chunks, Consumer.finish_ids)

    def requeue(self, chunks) -> list:
        """REQ each chunk, for redelivery at once; returns those whose connection closed."""
        return self._answer(chunks, Consumer.requeue_ids)

    def _answer(self, chunks, answer) -> list:
        owners = {conn: consumer for consumer in self.consumers for conn in consumer.connections.values()}
        orphans = []
        for chunk in chunks:
            owner = owners.get(chunk.conn)
            if owner is None or chunk.conn.closed:
                orphans.append(chunk)
            else:
                answer(owner, chunk.conn, chunk.ids)
        return orphans

    @staticmethod
    def touch(chunk) -> None:
        Consumer.touch_ids(chunk.conn, chunk.ids)

    def is_saturated(self) -> bool:
        return bool(self.consumers) and all(consumer.is_saturated() for consumer in self.consumers)

    def connection_stats(self) -> list[ConnectionStats]:
        return list(itertools.chain.from_iterable(c.connection_stats() for c in self.consumers))

    async def flushed(self) -> None:
        await asyncio.gather(*(consumer.flushed() for consumer in self.consumers))

    async def stop(self, timeout: float) -> None:
        await asyncio.gather(*(consumer.stop(timeout=timeout) for consumer in self.consumers),
                             return_exceptions=True)
