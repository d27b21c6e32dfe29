"""An origin's connections to its peers, and the wait of a publish for
their acknowledgements.

A link is a V2 connection to a peer's TCP port that carries ``REPL``
batches and reads the ``OK`` the peer answers to each, in order. Each
batch the origin sends in one event-loop turn carries an ``Acks``: the
publishes of that turn are answered once every chosen peer has said OK
(or, when one is lost, another has taken its copy: links.resend)."""

import asyncio
import collections
import time

from ...protocol import commands
from ...protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_RESPONSE, HEARTBEAT, MAGIC_V2, OK, FrameReader
from ...protocol.replication import BatchWriter, repl_command


class Acks:
    """The publishes of one turn: resolved once ``needed`` peers hold them.
    ``published`` is the turn's P records alone, sent again to another
    peer when one is lost before it answered."""

    __slots__ = ("future", "needed", "holders", "published", "messages", "under_replicated")

    def __init__(self, loop: asyncio.AbstractEventLoop, needed: int):
        self.future: asyncio.Future = loop.create_future()
        self.needed = needed
        self.holders: set[str] = set()  # peers that were sent the messages
        self.published: list[bytes] = []
        self.messages = 0
        self.under_replicated = 0  # copies that no peer could take

    def acked(self) -> None:
        self.needed -= 1
        if self.needed <= 0 and not self.future.done():
            self.future.set_result(None)

    def short(self) -> None:
        """One copy fewer than asked for: no other peer could take it."""
        self.under_replicated += 1
        self.acked()


class PeerLink(asyncio.Protocol):
    def __init__(self, node: str, host: str, port: int, on_lost, on_ready, log):
        self.node = node
        self.host = host
        self.port = port
        self.on_lost = on_lost
        self.on_ready = on_ready
        self.log = log
        self.transport: asyncio.Transport | None = None
        self.frames = FrameReader()
        self.writer = BatchWriter()
        self.unacked: collections.deque[tuple[Acks | None, float, int]] = collections.deque()
        self.ready = False
        self.closing = False
        self.batches = 0
        self.messages = 0

    # --- asyncio callbacks ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(MAGIC_V2)
        self.ready = True
        self.on_ready(self)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.frames.feed(data)
        except Exception as error:  # a peer that does not speak V2
            self.log.error("REPLICATION: peer %s: %s; closing", self.node, error)
            self.close()
            return
        for frame_type, payload in frames:
            if frame_type == FRAME_TYPE_RESPONSE and payload == OK and self.unacked:
                acks, _, _ = self.unacked.popleft()
                if acks is not None:
                    acks.acked()
            elif frame_type == FRAME_TYPE_RESPONSE and payload == HEARTBEAT:
                self.transport.write(commands.encode_command(b"NOP"))
            elif frame_type == FRAME_TYPE_ERROR:
                self.log.error("REPLICATION: peer %s refused a batch: %s; closing", self.node,
                               payload.decode("utf-8", "replace"))
                self.close()
                return

    def connection_lost(self, exc) -> None:
        self.ready = False
        unacked, self.unacked = self.unacked, collections.deque()
        self.on_lost(self, [acks for acks, _, _ in unacked if acks is not None])

    # --- sending ------------------------------------------------------------------------------------

    def send(self, origin: str, epoch: int, acks: Acks | None, payload: bytes | None = None) -> None:
        """The records written since the last send (or ``payload``) as one
        ``REPL`` batch; ``acks`` learns of its OK."""
        if payload is None:
            published = self.writer.published
            payload = self.writer.take()
        else:
            published = 0
        if not payload or self.transport is None or not self.ready:
            return
        self.transport.write(repl_command(origin, epoch, payload))
        self.unacked.append((acks, time.monotonic(), published))
        self.batches += 1
        self.messages += published

    def lag(self) -> tuple[int, float]:
        """(messages sent and not yet acknowledged, age in ms of the oldest such batch)."""
        if not self.unacked:
            return 0, 0.0
        return sum(count for _, _, count in self.unacked), (time.monotonic() - self.unacked[0][1]) * 1000

    def close(self) -> None:
        """At once, unsent bytes and all: a peer that left the members may
        be frozen, and its batches go to another peer (Replicator._link_lost)."""
        self.closing = True
        if self.transport is not None:
            self.transport.abort()
