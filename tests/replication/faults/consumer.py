"""A consumer of one channel that handles each message ``hold`` seconds
(a worker's latency: messages stay in flight meanwhile, where a node's
death can catch them), then FINs it and records it, with the node it came
from, as delivered; a message whose connection ended first was never
handled, and nsqd owes it again. It finds the topic's producers through
nsqlookupd every second and reads from each of them, as NSQ's consumers
do; a connection that stops hearing from its node (no frame for two
heartbeats: a node cut off, frozen or dead) is dropped and made again at
the next look."""

import asyncio

import aiohttp

from nsqpy.protocol import commands
from nsqpy.protocol.errors import ProtocolError
from nsqpy.protocol.frames import FRAME_TYPE_MESSAGE
from nsqpy.protocol.message import DecodedMessage, decode_message

from .directory import Directory
from .wire import V2

HEARTBEAT_MS = 2000
IN_FLIGHT = 200


class Consumer:
    def __init__(self, directory: Directory, topic: str, channel: str, hold: float = 0.0):
        self.directory = directory
        self.topic = topic
        self.channel = channel
        self.hold = hold
        self.deliveries: list[tuple[str, str]] = []  # (body, node)
        self.subscribed: set[str] = set()

    async def run(self) -> None:
        """Until cancelled (with the workload's loop, and every reader with it)."""
        readers: dict[str, asyncio.Task] = {}
        while True:
            try:
                producers = await self.directory.producers(self.topic)
            except (aiohttp.ClientError, TimeoutError):
                producers = set()
            for node in producers:
                if node not in readers or readers[node].done():
                    readers[node] = asyncio.create_task(self.read(node))
            await asyncio.sleep(1)

    async def read(self, node: str) -> None:
        try:
            connection = await V2.open(node)
        except (OSError, TimeoutError):
            return
        try:
            connection.send(commands.identify({"heartbeat_interval": HEARTBEAT_MS, "feature_negotiation": True}))
            await connection.answer()
            connection.send(commands.sub(self.topic, self.channel))
            await connection.answer()
            connection.send(commands.rdy(IN_FLIGHT))
            self.subscribed.add(node)
            while True:
                frame_type, data = await connection.frame(timeout=2 * HEARTBEAT_MS / 1000)
                if frame_type == FRAME_TYPE_MESSAGE:
                    asyncio.get_running_loop().call_later(self.hold, self.finish, connection, node,
                                                          decode_message(data))
        except (OSError, TimeoutError, ProtocolError):
            pass  # dropped: the next look at nsqlookupd connects again
        finally:
            self.subscribed.discard(node)
            connection.close()

    def finish(self, connection: V2, node: str, message: DecodedMessage) -> None:
        if not connection.writer.is_closing():
            connection.send(commands.fin(message.id))
            self.deliveries.append((message.body.decode(), node))
