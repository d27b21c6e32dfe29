"""What a replicated nsqd tells its peers: the ``REPL`` command's payload.

An origin nsqd sends ``REPL <origin> <epoch>\\n[int32 size][records]`` on a
V2 connection to each peer; the peer answers ``OK`` once it holds every
record of the batch, in the order the batches came. ``origin`` is the
nsqd whose messages they are (the sender's ``host:tcp_port``, or a dead
node's whose copies the sender hands over) and ``epoch`` its etcd lease
id: the peer keeps what each origin told it apart, per epoch, as a shadow
that is not delivered (``nsqd/replication``).

A batch changes what a peer holds for others, so only a member may send
one (anyone who reaches port 4150 may PUB, but must not be able to erase
a node's copies). Before its first ``REPL`` a connection proves it:
``RAUTH`` asks the peer for a fresh nonce (the answer: 32 hex digits),
and ``RAUTH <node> <proof>`` answers it, the proof being the hex of an
HMAC-SHA256 (its first 16 bytes) of nonce and node under the cluster's
secret; the peer says ``OK``, or ``E_UNAUTHORIZED`` and closes. A proof
is good for one connection only: one seen on the network opens no other.
Once proved, batches cost nothing more (TLS, where the network may be
watched, keeps anyone from writing into the connection).

A record is a kind byte, then its fields; names are ``[uint16 size][ascii]``:

- ``P`` messages the origin accepted together (a PUB, an MPUB): topic,
  ``[int64] timestamp``, ``[uint32] defer ms``, ``[uint16] channel count``
  (0: none, the messages wait in the topic) and that many channel names, ``[uint32 count]`` and ``count`` 16-byte ids,
  ``[uint32 size]`` and the bodies as an MPUB carries them
  (``[int32 count]([int32 size][body])*``), so an MPUB's body is copied
  on as it came.
- ``F`` messages done on a channel (finished, dead-lettered, expired):
  topic, channel, ``[uint32] count``, ``count`` ids.
- ``K`` keys of keyed publishes the origin queued (protocol/keyed.py),
  after their ``P`` record in the same batch: topic, ``[uint32]`` the
  topic's window in ms, ``[uint32 count]`` and ``count`` times
  ``[int64] accepted at (unix ms)[uint8 size][key]``, so that a survivor
  that takes the origin over recognises a repeat sent to it.
- ``C`` a channel exists; ``D`` a channel (or with an empty channel name,
  the topic) was deleted; ``E`` emptied; ``S`` paused; ``U`` unpaused:
  topic, channel. ``X`` (empty topic and channel): forget everything of
  this origin's epoch, what follows rebuilds it (a link that starts again).

Bytes in, values out, as every codec here.
"""

import functools
import hashlib
import hmac
import secrets
import struct
from typing import Final, Iterator, NamedTuple

from .commands import REPL_MAX_BODY, check_mpub_body, int32_at
from .errors import ProtocolError

PUBLISHED: Final = ord("P")
DONE: Final = ord("F")
KEYS: Final = ord("K")
CHANNEL: Final = ord("C")
DELETED: Final = ord("D")
EMPTIED: Final = ord("E")
PAUSED: Final = ord("S")
UNPAUSED: Final = ord("U")
RESET: Final = ord("X")

_NAME: Final = struct.Struct(">H")
_PUB_HEAD: Final = struct.Struct(">qIH")
_SIZE: Final = struct.Struct(">I")
_KEY_HEAD: Final = struct.Struct(">qB")
ID_SIZE: Final = 16
NONCE_BYTES: Final = 16
PROOF_HEX: Final = 32


class Published(NamedTuple):
    topic: str
    timestamp: int
    defer_ms: int
    channels: tuple[str, ...]  # (): waiting in the topic
    ids: tuple[bytes, ...]
    bodies: bytes  # [int32 count]([int32 size][body])*, as in an MPUB


class Done(NamedTuple):
    topic: str
    channel: str
    ids: tuple[bytes, ...]


class Keyed(NamedTuple):
    topic: str
    window_ms: int
    keys: tuple[tuple[int, bytes], ...]  # (accepted at, unix ms; key)


class ChannelEvent(NamedTuple):
    kind: int  # CHANNEL, DELETED, EMPTIED, PAUSED, UNPAUSED or RESET
    topic: str
    channel: str  # "" with DELETED or EMPTIED: the topic itself


class ReplicationError(ValueError):
    """A payload that does not parse: the link that sent it is broken."""


class NotAMember(Exception):
    """A connection that has not proved it is a member (RAUTH) sent a batch,
    or proved nothing with its proof."""


def _name(value: str) -> bytes:
    raw = value.encode("ascii")
    return _NAME.pack(len(raw)) + raw


def published_record(topic: str, timestamp: int, defer_ms: int, ids: list[bytes], bodies: bytes,
                     channels: tuple[str, ...]) -> bytes:
    """``bodies``: as an MPUB carries them (``commands.encode_mpub_body``)."""
    head = _PUB_HEAD.pack(timestamp, defer_ms, len(channels)) + b"".join(map(_name, channels))
    return b"".join((b"P", _name(topic), head, _SIZE.pack(len(ids)), *ids, _SIZE.pack(len(bodies)), bodies))


def done_record(topic: str, channel: str, ids: list[bytes]) -> bytes:
    return b"F" + _name(topic) + _name(channel) + _SIZE.pack(len(ids)) + b"".join(ids)


def keys_record(topic: str, window_ms: int, keys: list[tuple[int, bytes]]) -> bytes:
    parts = [b"K", _name(topic), _SIZE.pack(window_ms), _SIZE.pack(len(keys))]
    for accepted, key in keys:
        parts += (_KEY_HEAD.pack(accepted, len(key)), key)
    return b"".join(parts)


KEYS_PER_RECORD: Final = 50_000  # a record of held keys stays far below a batch's size


def keys_records(topic: str, window_ms: int, keys: list[tuple[int, bytes]]) -> list[bytes]:
    """Every key held for ``topic``, as records a batch can carry."""
    return [keys_record(topic, window_ms, keys[start:start + KEYS_PER_RECORD])
            for start in range(0, len(keys), KEYS_PER_RECORD)]


def event_record(kind: int, topic: str, channel: str) -> bytes:
    return bytes((kind,)) + _name(topic) + _name(channel)


class BatchWriter:
    """Records appended in the order they happened; ``take()`` hands the
    payload over and starts the next batch."""

    __slots__ = ("parts", "published")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.published = 0  # P records in this batch

    def __bool__(self) -> bool:
        return bool(self.parts)

    def add(self, record: bytes, published: int = 0) -> None:
        self.parts.append(record)
        self.published += published

    def take_parts(self) -> tuple[list[bytes], int]:
        """(the records, how many messages they carry), and a fresh batch."""
        taken = self.parts, self.published
        self.parts = []
        self.published = 0
        return taken


@functools.lru_cache(maxsize=1024)
def _ids_shape(count: int) -> struct.Struct:
    """``count`` ids one after another: split by one C call (an MPUB's
    hundreds of ids would otherwise cost a slice each)."""
    return struct.Struct("16s" * count)


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise ReplicationError(f"record cut short at byte {self.pos}")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def unpack(self, shape: struct.Struct) -> tuple:
        return shape.unpack(self.take(shape.size))

    def ids(self) -> tuple[bytes, ...]:
        (count,) = self.unpack(_SIZE)
        if count * ID_SIZE > len(self.data) - self.pos:
            raise ReplicationError(f"{count} ids in a record of {len(self.data) - self.pos} bytes")
        return _ids_shape(count).unpack(self.take(count * ID_SIZE))

    def name(self) -> str:
        (size,) = self.unpack(_NAME)
        try:
            return self.take(size).decode("ascii")
        except UnicodeDecodeError:
            raise ReplicationError("a name that is not ASCII") from None


def read_records(payload: bytes) -> Iterator[Published | Done | Keyed | ChannelEvent]:
    """The records of one ``REPL`` payload, in order; raises
    ``ReplicationError`` at the first that does not parse."""
    cursor = _Cursor(payload)
    while cursor.pos < len(payload):
        kind = payload[cursor.pos]
        cursor.pos += 1
        topic = cursor.name()
        if kind == PUBLISHED:
            timestamp, defer_ms, count = cursor.unpack(_PUB_HEAD)
            channels = tuple(cursor.name() for _ in range(count))
            ids = cursor.ids()
            (size,) = cursor.unpack(_SIZE)
            bodies = cursor.take(size)
            try:
                count = check_mpub_body(bodies, REPL_MAX_BODY, REPL_MAX_BODY)
            except ProtocolError as error:
                raise ReplicationError(f"bodies: {error.description}") from None
            if count != len(ids):
                raise ReplicationError(f"{len(ids)} ids for {count} bodies")
            yield Published(topic, timestamp, defer_ms, channels, ids, bodies)
        elif kind == DONE:
            channel = cursor.name()
            yield Done(topic, channel, cursor.ids())
        elif kind == KEYS:
            (window_ms,) = cursor.unpack(_SIZE)
            (count,) = cursor.unpack(_SIZE)
            if count * (_KEY_HEAD.size + 1) > len(payload) - cursor.pos:
                raise ReplicationError(f"{count} keys in a record of {len(payload) - cursor.pos} bytes")
            keys = []
            for _ in range(count):
                accepted, size = cursor.unpack(_KEY_HEAD)
                keys.append((accepted, cursor.take(size)))
            yield Keyed(topic, window_ms, tuple(keys))
        elif kind in (CHANNEL, DELETED, EMPTIED, PAUSED, UNPAUSED, RESET):
            yield ChannelEvent(kind, topic, cursor.name())
        else:
            raise ReplicationError(f"unknown record kind {kind!r}")


def split_bodies(bodies: bytes) -> list[bytes]:
    """The bodies of a ``Published`` record, one by one."""
    found = []
    pos = 4
    for _ in range(int32_at(bodies, 0)):
        size = int32_at(bodies, pos)
        found.append(bodies[pos + 4:pos + 4 + size])
        pos += 4 + size
    return found


def new_nonce() -> bytes:
    """What a peer asks a connection to prove itself with."""
    return secrets.token_hex(NONCE_BYTES).encode("ascii")


def membership_proof(secret: bytes, nonce: bytes, node: str) -> bytes:
    mac = hmac.new(secret, b"%s %s" % (nonce, node.encode("ascii")), hashlib.sha256)
    return mac.hexdigest()[:PROOF_HEX].encode("ascii")


def proves_membership(secret: bytes, nonce: bytes, node: str, proof: bytes) -> bool:
    return bool(nonce) and hmac.compare_digest(membership_proof(secret, nonce, node), proof)


RAUTH_HELLO: Final = b"RAUTH\n"


def rauth_command(node: str, proof: bytes) -> bytes:
    return b"RAUTH %s %s\n" % (node.encode("ascii"), proof)


def repl_command(origin: str, epoch: int, payload: bytes) -> bytes:
    return b"REPL %s %d\n%s%s" % (origin.encode("ascii"), epoch, _SIZE.pack(len(payload)), payload)
