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

BATCH_BYTES = 16 * 1024 * 1024  # a batch past this is cut between records (a peer takes up to 256 MB)


class Acks:
    """The publishes of one turn: resolved once ``needed`` peers hold them.
    A peer lost before it answered is replaced by the next successor, which
    gets a copy of everything held (Replicator._ring_changed), and answers
    for it."""

    __slots__ = ("future", "needed", "holders", "messages")

    def __init__(self, loop: asyncio.AbstractEventLoop, needed: int):
        self.future: asyncio.Future = loop.create_future()
        self.needed = needed
        self.holders: set[str] = set()  # peers that were sent the messages
        self.messages = 0

    def acked(self) -> None:
        self.needed -= 1
        if self.needed <= 0 and not self.future.done():
            self.future.set_result(None)

    def short(self) -> None:
        """One copy fewer than asked for: no other peer could take it."""
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
        # per batch sent and not yet answered: the publishes waiting for it, when, how many messages
        self.unacked: collections.deque[tuple[list[Acks], float, int]] = collections.deque()
        self.ready = False
        self.closing = False
        self.batches = 0
        self.messages = 0

    # --- asyncio callbacks ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.closing:  # the peer left the members while this connected
            transport.abort()
            return
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
                for acks in self.unacked.popleft()[0]:
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
        self.on_lost(self, [acks for waiting, _, _ in unacked for acks in waiting])

    # --- sending ------------------------------------------------------------------------------------

    def send(self, origin: str, epoch: int, acks: list[Acks]) -> bool:
        """The records written since the last send, as ``REPL`` batches of
        at most ``BATCH_BYTES`` (cut between records); ``acks`` learn of
        the last one's OK. False when the link is not up: nothing is sent,
        and the records are dropped (the link's next start copies anew)."""
        parts, published = self.writer.take_parts()
        if self.transport is None or not self.ready:
            return False
        if not parts:
            for waiting in acks:  # nothing of theirs is on this link
                waiting.acked()
            return True
        batches, current, size = [], [], 0
        for part in parts:
            if size and size + len(part) > BATCH_BYTES:
                batches.append(current)
                current, size = [], 0
            current.append(part)
            size += len(part)
        batches.append(current)
        now = time.monotonic()
        for index, batch in enumerate(batches):
            last = index == len(batches) - 1
            self.transport.write(repl_command(origin, epoch, b"".join(batch)))
            self.unacked.append((acks if last else [], now, published if last else 0))
        self.batches += len(batches)
        self.messages += published
        return True

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
