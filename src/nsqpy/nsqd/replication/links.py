"""An origin's connections to its peers, and the wait of a publish for
their acknowledgements.

A link is a V2 connection to a peer's TCP port that carries ``REPL``
batches and reads the ``OK`` the peer answers to each, in order. Each
batch the origin sends in one event-loop turn carries an ``Acks``: the
publishes of that turn are answered once every chosen peer has said OK
(or, when one is lost, another has taken its copy: Replicator._replace)."""

import asyncio
import collections
import json
import ssl
import time

from ...protocol import commands
from ...protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_RESPONSE, HEARTBEAT, MAGIC_V2, OK, FrameReader
from ...protocol.replication import RAUTH_HELLO, BatchWriter, membership_proof, rauth_command, repl_command

BATCH_BYTES = 16 * 1024 * 1024  # a batch past this is cut between records (a peer takes up to 32 MiB)


class ReplicationShort(Exception):
    """A publish could not have the copies --replication-min-copies asks
    for: its publisher gets an error it may retry."""


class Acks:
    """The publishes of one turn: resolved once every peer they were sent
    to has answered, with how many hold them, or failed with
    ``ReplicationShort`` when fewer than ``required`` do. A peer lost
    before it answered is replaced by the next successor, which gets a
    copy of everything held (Replicator._ring_changed), and answers for it."""

    __slots__ = ("future", "required", "pending", "copies", "holders", "messages", "counted_short", "replaceable")

    def __init__(self, loop: asyncio.AbstractEventLoop, required: int, replaceable: bool = True):
        self.future: asyncio.Future = loop.create_future()
        # a turn's publishes all wait on it, but adopted copies have no publisher to hear a failure
        self.future.add_done_callback(lambda done: done.cancelled() or done.exception())
        self.required = required  # peers that must hold the messages
        self.pending = 0  # peers sent the messages that have not answered
        self.copies = 0  # peers that answered
        self.holders: set[str] = set()  # peers that were sent the messages
        self.messages = 0
        self.counted_short = False  # counted in under_replicated_messages already
        self.replaceable = replaceable  # False: only the peers it was sent to can answer (a hand-over)

    def sent_to(self, holders: set[str]) -> None:
        self.holders = holders
        self.pending = len(holders)
        self._settle()

    def acked(self) -> None:
        self.pending -= 1
        self.copies += 1
        self._settle()

    def short(self) -> None:
        """A peer that will not answer, and no other could take its place."""
        self.pending -= 1
        self._settle()

    def _settle(self) -> None:
        if self.pending > 0 or self.future.done():
            return
        if self.copies >= self.required:
            self.future.set_result(self.copies)
        else:
            self.future.set_exception(ReplicationShort(
                f"replication: {self.copies + 1} of {self.required + 1} copies could be made"))


class PeerLink(asyncio.Protocol):
    def __init__(self, node: str, host: str, port: int, origin: str, secret: bytes, tls: ssl.SSLContext | None,
                 on_lost, on_ready, trouble):
        """Before it is ready the link proves to the peer that ``origin``
        (this node) is a member, with the cluster's ``secret``
        (protocol/replication.py's RAUTH). ``tls``: peers require TLS
        (--tls-required): first the link upgrades as any NSQ client does,
        IDENTIFY with ``tls_v1``, then the handshake and the peer's OK
        through it."""
        self.node = node
        self.origin = origin
        self.secret = secret
        self.tls = tls
        self.host = host
        self.port = port
        self.on_lost = on_lost
        self.on_ready = on_ready
        self.trouble = trouble  # a rate-limited log: a peer redialled every look may fail every look
        self.transport: asyncio.Transport | None = None
        self.frames = FrameReader()
        self.writer = BatchWriter()
        # per batch sent and not yet answered: the publishes waiting for it, when, how many messages
        self.unacked: collections.deque[tuple[list[Acks], float, int]] = collections.deque()
        self.ready = False
        # the answer awaited before the link is ready: "identify", "tls" (upgrading), "confirm", "nonce", "proof"
        self.handshake = ""
        self.opened = time.monotonic()
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
        if self.tls is None:
            self._ask_nonce()
            return
        transport.write(commands.identify({"tls_v1": True, "feature_negotiation": True,
                                           "client_id": "nsqpy-replication", "user_agent": "nsqpy-replication"}))
        self.handshake = "identify"

    def _ask_nonce(self) -> None:
        self.transport.write(RAUTH_HELLO)
        self.handshake = "nonce"

    def _handshake_answer(self, frame_type: int, payload: bytes) -> None:
        if frame_type != FRAME_TYPE_RESPONSE:
            self._refused(payload)
        elif self.handshake == "nonce":
            self.transport.write(rauth_command(self.origin, membership_proof(self.secret, payload, self.origin)))
            self.handshake = "proof"
        elif self.handshake == "proof" and payload == OK:
            self.handshake = ""
            self.ready = True
            self.on_ready(self)
        elif self.handshake == "confirm" and payload == OK:
            self._ask_nonce()
        elif self.handshake == "identify" and payload.startswith(b"{") and json.loads(payload).get("tls_v1"):
            self.handshake = "tls"
            asyncio.get_running_loop().create_task(self._start_tls())
        else:
            self.trouble.error(f"REPLICATION: peer {self.node} does not offer TLS (it needs --tls-cert and "
                               "--tls-key); closing")
            self.close()

    async def _start_tls(self) -> None:
        try:
            async with asyncio.timeout(5):
                self.transport = await asyncio.get_running_loop().start_tls(self.transport, self, self.tls,
                                                                            server_hostname=self.host)
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as error:
            self.trouble.error(f"REPLICATION: TLS with peer {self.node} failed: {error or 'timeout'}; closing")
            self.close()
            self.on_lost(self, [])  # a handshake that failed may never report the connection lost
            return
        self.handshake = "confirm"

    def _refused(self, payload: bytes) -> None:
        self.trouble.error(f"REPLICATION: peer {self.node} refused: {payload.decode('utf-8', 'replace')}; closing")
        self.close()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.frames.feed(data)
        except Exception as error:  # a peer that does not speak V2
            self.trouble.error(f"REPLICATION: peer {self.node}: {error}; closing")
            self.close()
            return
        for frame_type, payload in frames:
            if self.handshake and not (frame_type == FRAME_TYPE_RESPONSE and payload == HEARTBEAT):
                self._handshake_answer(frame_type, payload)
                if self.closing:
                    return
            elif frame_type == FRAME_TYPE_RESPONSE and payload == OK and self.unacked:
                for acks in self.unacked.popleft()[0]:
                    acks.acked()
            elif frame_type == FRAME_TYPE_RESPONSE and payload == HEARTBEAT:
                self.transport.write(commands.encode_command(b"NOP"))
            elif frame_type == FRAME_TYPE_ERROR:
                self._refused(payload)
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
