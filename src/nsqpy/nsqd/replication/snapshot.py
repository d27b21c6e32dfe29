"""What this nsqd still owes, as ``P`` records for a peer that has no copy
of it: a new successor (the one before it died or another member joined
between), or the survivor that took this node's epoch over while it was
away (a hand-over).

Every message queued (memory and disk), in flight and deferred is
copied, each owed to the channel that holds it (a message held by two
channels comes once per channel: the peer's shadow joins them). What it
is made of is fixed in the turn the snapshot is taken: the messages in
memory as they are then, and each disk queue's unread files opened, up
to what is written then. The records are made a slice at a time, as
they are sent, so a backlog of millions never holds the event loop for
long; a message finished meanwhile is told to the peer again after the
last slice (Replicator), and a channel or topic deleted or emptied
meanwhile is left out from then on (``forget``). The keys of keyed
publishes each topic holds come first, as ``K`` records.
"""

from typing import Callable, Iterator

from ...protocol.commands import encode_mpub_body
from ...protocol.replication import keys_records, published_record
from ..message import Message
from .shadow import SLICE, SLICE_BYTES

#: (record, messages in it) pairs, of about SLICE messages or SLICE_BYTES in all
Slice = list[tuple[bytes, int]]


class Source:
    """One topic's or one channel's messages: those in memory (with when
    each deferred one is due on the loop's clock, 0.0 for the others), then
    those still on its disk queue."""

    __slots__ = ("topic", "channel", "held", "disk")

    def __init__(self, topic: str, channel: str | None, held: list[tuple[Message, float]], disk: Iterator[bytes]):
        self.topic = topic
        self.channel = channel  # None: waiting in the topic
        self.held = held
        self.disk = disk

    def messages(self) -> Iterator[tuple[Message, float]]:
        yield from self.held
        for encoded in self.disk:
            yield Message.decode(encoded), 0.0


class Snapshot:
    def __init__(self, sources: list[Source], clock: Callable[[], float], keys: list[bytes] = ()):
        self._sources = sources
        self._keys = list(keys)  # K records
        self._clock = clock  # what a deferred message's due time is on
        self._forgotten: set[tuple[str, str | None]] = set()  # (topic, channel); (topic, "") for a whole topic

    @classmethod
    def of(cls, nsqd) -> "Snapshot":
        """What ``nsqd`` holds now."""
        sources = []
        keys = []
        for topic in list(nsqd.topics.values()):
            if topic.publish_keys is not None:
                keys += keys_records(topic.name, round(topic.publish_key_window * 1000), topic.publish_keys.held())
            waiting = [(m, 0.0) for m in topic.queue.in_memory()]
            sources.append(Source(topic.name, None, waiting, topic.queue.on_disk()))
            for channel in topic.channels.values():
                held = [(m, 0.0) for m in channel.queue.in_memory() + channel.in_flight.messages()]
                held += [(m, due) for due, _, m in channel.deferred]
                sources.append(Source(topic.name, channel.name, held, channel.queue.on_disk()))
        return cls(sources, nsqd.loop.time, keys)  # deferred messages are due on the loop's clock

    def forget(self, topic: str, channel: str | None, whole_topic: bool = False) -> None:
        """What is left of ``channel`` (None: the messages waiting in the
        topic; ``whole_topic``: everything of it) is owed to nobody now."""
        self._forgotten.add((topic, "" if whole_topic else channel))

    def payloads(self) -> Iterator[bytes]:
        """Each slice's records joined: a REPL batch's payload."""
        for part in self.slices():
            yield b"".join(record for record, _ in part)

    def slices(self) -> Iterator[Slice]:
        parts: Slice = []
        count = size = 0
        try:
            for record in self._keys:
                parts.append((record, 0))
                size += len(record)
                if size >= SLICE_BYTES:
                    yield parts
                    parts, size = [], 0
            for source in self._sources:
                for record, messages, body_bytes in self._records(source):
                    parts.append((record, messages))
                    count += messages
                    size += body_bytes
                    if count >= SLICE or size >= SLICE_BYTES:
                        yield parts
                        parts, count, size = [], 0, 0
            if parts:
                yield parts
        finally:
            self.close()

    def close(self) -> None:
        """The disk queues' files are let go (also when not all was taken)."""
        for source in self._sources:
            close = getattr(source.disk, "close", None)
            if close is not None:
                close()

    def _forgot(self, source: Source) -> bool:
        return (source.topic, "") in self._forgotten or (source.topic, source.channel) in self._forgotten

    def _records(self, source: Source) -> Iterator[tuple[bytes, int, int]]:
        """(record, messages, bytes of bodies) for ``source``: each run of
        messages with one timestamp (an MPUB's) is one record of at most
        SLICE messages and about SLICE_BYTES; a deferred message is one
        record with what is left of its delay."""
        channels = () if source.channel is None else (source.channel,)
        run: list[Message] = []
        run_bytes = 0
        for message, due in source.messages():
            if self._forgot(source):
                return
            if run and (due or message.timestamp != run[0].timestamp or len(run) == SLICE
                        or run_bytes >= SLICE_BYTES):
                yield self._record(source.topic, run, 0, channels), len(run), run_bytes
                run, run_bytes = [], 0
            if due:
                defer_ms = max(0, int((due - self._clock()) * 1000))
                yield self._record(source.topic, [message], defer_ms, channels), 1, len(message.body)
            else:
                run.append(message)
                run_bytes += len(message.body)
        if run and not self._forgot(source):
            yield self._record(source.topic, run, 0, channels), len(run), run_bytes

    @staticmethod
    def _record(topic: str, messages: list[Message], defer_ms: int, channels: tuple[str, ...]) -> bytes:
        return published_record(topic, messages[0].timestamp, defer_ms, [m.id for m in messages],
                                encode_mpub_body([m.body for m in messages]), channels)
