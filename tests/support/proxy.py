"""A loopback TCP proxy that a test can cut, heal and reset, so that one
daemon loses a peer (etcd, its clients, the other nsqd) while every
process keeps running: a network partition, not a crash.

``cut()`` stops forwarding both ways and holds every connection open:
nothing passes, nothing is refused, as when packets are dropped on the
wire; a connection accepted meanwhile reaches its target only once the
proxy is healed. ``reset()`` closes every connection, as a crashed router
would. ``lose_answers(n)`` drops the next ``n`` OK frames coming back
from the target and resets each of their connections: a publish reached
nsqd, its answer never reached the publisher. ``hold_requests()`` stops
the client's side only (until ``heal()``): a consumer still receives
messages, its FINs never reach nsqd. Each direction holds at most one read (``CHUNK`` bytes) of its own
and then stops reading, so the kernel's buffers and the sender's window
bound what piles up during a cut.

The proxy runs an event loop in a thread of its own: a test that blocks
on a socket or sleeps does not stall what the proxy forwards.
"""

import asyncio

from tests.support.loopthread import LoopThread

CHUNK = 65536
OK_FRAME = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"


class Proxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self._flowing = asyncio.Event()  # set: forwarding; only the loop's thread waits on it or changes it
        self._flowing.set()
        self._requests_flowing = asyncio.Event()  # the client's side, held by hold_requests()
        self._requests_flowing.set()
        self._connections: set[asyncio.StreamWriter] = set()
        self._answers_to_lose = 0  # only the loop's thread reads or changes it
        self._server: asyncio.AbstractServer | None = None
        self._loop = LoopThread(f"proxy-to-{target_port}")
        self.port: int = self._loop.call(self._listen())

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """From now on nothing passes either way, until ``heal()``."""
        self._loop.call(self._set_flowing(False))

    def heal(self) -> None:
        self._loop.call(self._set_flowing(True))

    def hold_requests(self) -> None:
        """From now on nothing passes from clients to the target, until ``heal()``."""
        self._loop.call(self._hold_requests())

    def reset(self) -> None:
        """Close every connection through the proxy (new ones are accepted)."""
        self._loop.call(self._close_connections())

    def lose_answers(self, count: int) -> None:
        self._loop.call(self._set_losses(count))

    def close(self) -> None:
        if not self._loop.closed:
            self._loop.call(self._shut())
            self._loop.close()

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _set_flowing(self, flowing: bool) -> None:
        if flowing:
            self._flowing.set()
            self._requests_flowing.set()
        else:
            self._flowing.clear()

    async def _hold_requests(self) -> None:
        self._requests_flowing.clear()

    async def _set_losses(self, count: int) -> None:
        self._answers_to_lose = count

    async def _close_connections(self) -> None:
        for writer in list(self._connections):
            writer.transport.abort()
        self._connections.clear()

    async def _shut(self) -> None:
        self._server.close()
        await self._close_connections()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        writers = [client_writer]
        self._connections.add(client_writer)
        try:
            await self._flowing.wait()
            try:
                target_reader, target_writer = await asyncio.open_connection(*self.target)
            except OSError:
                return
            writers.append(target_writer)
            self._connections.add(target_writer)
            pumps = [asyncio.ensure_future(self._pump(client_reader, target_writer)),
                     asyncio.ensure_future(self._pump(target_reader, client_writer, answers=True))]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
        except asyncio.CancelledError:
            pass  # the proxy is closing: the connection ends with it
        finally:
            for writer in writers:  # either side's end ends the connection both ways
                self._connections.discard(writer)
                writer.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answers: bool = False) -> None:
        """One direction, one read at a time, held while the proxy is cut;
        ``answers``: the target's, of which ``lose_answers`` drops OKs."""
        try:
            while data := await reader.read(CHUNK):
                await self._flowing.wait()
                if not answers:
                    await self._requests_flowing.wait()
                if answers and self._answers_to_lose and OK_FRAME in data:
                    self._answers_to_lose -= 1
                    return  # the connection ends, the OK with it
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
