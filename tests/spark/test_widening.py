"""The source's extra connections (a batch wider than nsqd's --max-rdy-count)
against an nsqd that is slow to take some of them."""

import asyncio
import itertools

from nsqpy.client import Config
from nsqpy.spark.widening import WideConsumer


class DroppingProxy:
    """Forwards connections to nsqd, except the ones whose number (from 1)
    is in ``dropped``: those are closed at once, as a dial that timed out
    on a busy machine ends."""

    def __init__(self, target: tuple[str, int], dropped: set[int]):
        self.target, self.dropped = target, dropped
        self.numbers = itertools.count(1)
        self.tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader, writer) -> None:
        if next(self.numbers) in self.dropped:
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self.tasks.add(task)

    @staticmethod
    async def _pipe(reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def test_an_extra_connection_refused_once_is_tried_again(start_nsqd, topic):
    """At nsqd's default cap (2500) a budget of 6000 needs three connections;
    the second and third dials fail once, and the source still gets all three
    (before, it went on with one, and batches were capped at 2500)."""
    nsqd = start_nsqd()

    async def widen() -> list[int]:
        proxy = DroppingProxy((nsqd.tcp_hostport[0], nsqd.tcp_hostport[1]), dropped={2, 3})
        address = await proxy.start()
        wide = WideConsumer(topic, "archive", lambda *_: None, Config(max_in_flight=6000, max_attempts=0))
        try:
            await wide.connect([address], [], patience=30)
            return [consumer.max_in_flight for consumer in wide.consumers]
        finally:
            await wide.stop(timeout=5)
            await proxy.stop()

    assert asyncio.run(asyncio.wait_for(widen(), 60)) == [2000, 2000, 2000]
