"""What a replicated nsqd tells its peers: the ``REPL`` command's payload.

An origin nsqd sends ``REPL <origin> <epoch>\\n[int32 size][records]`` on a
V2 connection to each peer; the peer answers ``OK`` once it holds every
record of the batch, in the order the batches came. ``origin`` is the
sender's ``host:tcp_port`` and ``epoch`` its etcd lease id: the peer keeps
what each origin told it apart, per epoch, as a shadow that is not
delivered (``nsqd/replication``).

A record is a kind byte, then its fields; names are ``[uint16 size][ascii]``:

- ``P`` a message the origin accepted: topic, ``[16] id``,
  ``[int64] timestamp``, ``[uint32] defer ms``, ``[uint16] channel count``
  (``0xFFFF``: the channels the topic has when the record arrives) and
  that many channel names, ``[uint32 size][body]``.
- ``F`` messages done on a channel (finished, dead-lettered, expired):
  topic, channel, ``[uint32] count``, ``count`` ids.
- ``C`` a channel exists; ``D`` a channel (or with an empty channel name,
  the topic) was deleted; ``E`` emptied: topic, channel.

Bytes in, values out, as every codec here.
"""

import struct
from typing import Final, Iterator, NamedTuple

PUBLISHED: Final = ord("P")
DONE: Final = ord("F")
CHANNEL: Final = ord("C")
DELETED: Final = ord("D")
EMPTIED: Final = ord("E")

#: a ``P`` record whose message goes to the channels its topic has then
TOPIC_CHANNELS: Final = 0xFFFF

_NAME: Final = struct.Struct(">H")
_PUB_HEAD: Final = struct.Struct(">16sqIH")
_SIZE: Final = struct.Struct(">I")
ID_SIZE: Final = 16


class Published(NamedTuple):
    topic: str
    id: bytes
    timestamp: int
    defer_ms: int
    channels: tuple[str, ...] | None  # None: the topic's channels when it arrives
    body: bytes


class Done(NamedTuple):
    topic: str
    channel: str
    ids: list[bytes]


class ChannelEvent(NamedTuple):
    kind: int  # CHANNEL, DELETED or EMPTIED
    topic: str
    channel: str  # "" with DELETED or EMPTIED: the topic itself


class ReplicationError(ValueError):
    """A payload that does not parse: the link that sent it is broken."""


def _name(value: str) -> bytes:
    raw = value.encode("ascii")
    return _NAME.pack(len(raw)) + raw


def published_record(topic: str, message_id: bytes, timestamp: int, defer_ms: int, body: bytes,
                     channels: tuple[str, ...] | None = None) -> bytes:
    if channels is None:
        head = _PUB_HEAD.pack(message_id, timestamp, defer_ms, TOPIC_CHANNELS)
    else:
        head = _PUB_HEAD.pack(message_id, timestamp, defer_ms, len(channels)) + b"".join(map(_name, channels))
    return b"P" + _name(topic) + head + _SIZE.pack(len(body)) + body


def done_record(topic: str, channel: str, ids: list[bytes]) -> bytes:
    return b"F" + _name(topic) + _name(channel) + _SIZE.pack(len(ids)) + b"".join(ids)


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

    def take(self) -> bytes:
        payload = b"".join(self.parts)
        self.parts = []
        self.published = 0
        return payload


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

    def name(self) -> str:
        (size,) = self.unpack(_NAME)
        try:
            return self.take(size).decode("ascii")
        except UnicodeDecodeError:
            raise ReplicationError("a name that is not ASCII") from None


def read_records(payload: bytes) -> Iterator[Published | Done | ChannelEvent]:
    """The records of one ``REPL`` payload, in order; raises
    ``ReplicationError`` at the first that does not parse."""
    cursor = _Cursor(payload)
    while cursor.pos < len(payload):
        kind = payload[cursor.pos]
        cursor.pos += 1
        topic = cursor.name()
        if kind == PUBLISHED:
            message_id, timestamp, defer_ms, count = cursor.unpack(_PUB_HEAD)
            channels = None if count == TOPIC_CHANNELS else tuple(cursor.name() for _ in range(count))
            (size,) = cursor.unpack(_SIZE)
            yield Published(topic, message_id, timestamp, defer_ms, channels, cursor.take(size))
        elif kind == DONE:
            channel = cursor.name()
            (count,) = cursor.unpack(_SIZE)
            ids = cursor.take(count * ID_SIZE)
            yield Done(topic, channel, [ids[i:i + ID_SIZE] for i in range(0, len(ids), ID_SIZE)])
        elif kind in (CHANNEL, DELETED, EMPTIED):
            yield ChannelEvent(kind, topic, cursor.name())
        else:
            raise ReplicationError(f"unknown record kind {kind!r}")


def repl_command(origin: str, epoch: int, payload: bytes) -> bytes:
    return b"REPL %s %d\n%s%s" % (origin.encode("ascii"), epoch, _SIZE.pack(len(payload)), payload)
