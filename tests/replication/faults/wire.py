"""V2 over asyncio streams for the workload's raw publisher and consumer,
on the protocol's own codecs: every wait is bounded, heartbeats are
answered, and an error frame is an exception, so a publish counts only
when nsqd said OK."""

import asyncio

from nsqpy.protocol import commands
from nsqpy.protocol.errors import parse_error_frame
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_RESPONSE, HEARTBEAT, MAGIC_V2, FrameReader

#: how long a connect, or an answer, may take before the node counts as not answering
ANSWER_TIMEOUT = 5.0


class V2:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.frames = FrameReader()
        self.pending: list[tuple[int, bytes]] = []

    @classmethod
    async def open(cls, node: str) -> "V2":
        host, _, port = node.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), ANSWER_TIMEOUT)
        writer.write(MAGIC_V2)
        return cls(reader, writer)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def frame(self, timeout: float = ANSWER_TIMEOUT) -> tuple[int, bytes]:
        """The next frame other than a heartbeat (answered with NOP)."""
        async with asyncio.timeout(timeout):
            while not self.pending:
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("closed by nsqd")
                for frame in self.frames.feed(data):
                    if frame == (FRAME_TYPE_RESPONSE, HEARTBEAT):
                        self.send(commands.NOP)
                    else:
                        self.pending.append(frame)
        return self.pending.pop(0)

    async def answer(self) -> bytes:
        frame_type, data = await self.frame()
        if frame_type == FRAME_TYPE_ERROR:
            raise parse_error_frame(data)
        return data

    def close(self) -> None:
        self.writer.transport.abort()
