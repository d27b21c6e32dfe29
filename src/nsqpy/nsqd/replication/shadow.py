"""What a peer holds for an origin nsqd: its messages not yet done, per
topic, with the channels each is still owed to. Never delivered; adopted
whole by the survivor that takes the origin over (takeover.py).

The origin names the channels each message went to; one that waits in
its topic (no channel yet, paused, or before nsqlookupd's channels are
known) goes to the channel(s) that appear first while none are (the
origin hands its backlog to them in the same event-loop turn, so their
records come in one batch).

A copy costs a peer what it costs the origin, or less: the messages of
one PUB or MPUB stay as the one record they came in (``Copies``), and
each id points at its place there. Only a message that some channels
are done with, and others not yet, gets a set of its own. Past
``memory_messages`` per topic (nsqd's ``--mem-queue-size``), the bodies of
the oldest records go to disk (shadowspill.py); their ids, and which
channels each is owed to, stay in memory.

The keys of the origin's keyed publishes (``K`` records) are kept per
topic for the origin's window, so that the survivor recognises a repeat
of a publish the origin acknowledged.
"""

import time
from collections import OrderedDict, deque
from typing import Iterator

from ...protocol.commands import encode_mpub_body
from ...protocol.replication import (CHANNEL, DELETED, EMPTIED, PAUSED, RESET, UNPAUSED, ChannelEvent, Done, Keyed,
                                     Published, event_record, keys_records, published_record, split_bodies)
from .shadowspill import Spill


SLICE = 5000  # messages handled per event-loop turn when a whole shadow is adopted, handed over or kept
SLICE_BYTES = 8 * 1024 * 1024  # and bodies' bytes: a slice's records fit a REPL batch (protocol/commands.py)


def _channel_names(owed: set[str] | None) -> tuple[str, ...]:
    return () if owed is None else tuple(sorted(owed))


class Copies:
    """The messages of one ``Published`` record."""

    __slots__ = ("record", "deliver_at", "owed", "partly_done", "spilled")

    def __init__(self, record: Published, owed: set[str] | None):
        self.record = record
        self.deliver_at = time.time() + record.defer_ms / 1000 if record.defer_ms else 0.0
        self.owed = owed  # the channels each message is owed to; None: waiting in the topic
        self.partly_done: dict[bytes, set[str]] = {}  # id -> its own channels still owed
        self.spilled: tuple[Spill, tuple[int, int, int]] | None = None  # where the bodies went, once on disk

    def bodies(self) -> bytes:
        """The record's bodies (an MPUB body), from memory or from disk."""
        if self.spilled is None:
            return self.record.bodies
        spill, place = self.spilled
        return spill.read(place)

    def owed_by(self, message_id: bytes) -> set[str] | None:
        """``message_id``'s channels still owed; None while it waits in the topic."""
        own = self.partly_done.get(message_id)
        if own is not None:
            return own
        return self.owed


class ShadowTopic:
    __slots__ = ("channels", "paused", "messages", "keys", "key_window_ms", "_resolved", "_in_memory",
                 "_in_memory_messages")

    def __init__(self) -> None:
        self.keys: OrderedDict[bytes, int] = OrderedDict()  # key -> accepted at (unix ms), oldest first
        self.key_window_ms = 0
        self.channels: set[str] = set()
        self.paused: set[str] = set()  # paused at the origin: channel names, "" for the topic
        self.messages: dict[bytes, Copies] = {}  # id -> the record that holds it, in publish order
        self._resolved: list[Copies] = []  # waited in the topic until this batch's first channel
        self._in_memory: deque[Copies] = deque()  # records whose bodies are in memory, oldest first
        self._in_memory_messages = 0  # their messages (done or not, until their record leaves memory)

    def add(self, record: Published) -> None:
        """A message held already (a snapshot sends one per channel that
        holds it) is owed to the channels of both."""
        owed = set(record.channels) or None  # none: waiting in the topic
        copies = Copies(record, owed)
        self._in_memory.append(copies)
        self._in_memory_messages += len(record.ids)
        messages = self.messages
        if messages.keys().isdisjoint(record.ids):
            messages.update(dict.fromkeys(record.ids, copies))
            return
        for message_id in record.ids:
            held = messages.get(message_id)
            if held is None:
                messages[message_id] = copies
            elif owed is not None:
                before = held.owed_by(message_id)
                held.partly_done[message_id] = set(owed) if before is None else before | owed

    def add_keys(self, record: Keyed) -> None:
        self.key_window_ms = record.window_ms
        keys = self.keys
        for accepted, key in record.keys:
            if key not in keys:
                keys[key] = accepted
        self.live_keys()

    def live_keys(self) -> list[tuple[int, bytes]]:
        """The keys still in the origin's window, with when each was accepted."""
        horizon = round(time.time() * 1000) - self.key_window_ms
        keys = self.keys
        while keys and next(iter(keys.values())) <= horizon:
            keys.popitem(last=False)
        return [(accepted, key) for key, accepted in keys.items()]

    def spill(self, spill: Spill, memory_messages: int) -> None:
        """The bodies of the oldest records past ``memory_messages`` go to
        ``spill``, in one write (kept in memory when the disk refuses it)."""
        leaving: list[Copies] = []
        while self._in_memory_messages > memory_messages and self._in_memory:
            copies = self._in_memory.popleft()
            self._in_memory_messages -= len(copies.record.ids)
            messages = self.messages
            if any(messages.get(message_id) is copies for message_id in copies.record.ids):
                leaving.append(copies)
        if not leaving:
            return
        try:
            places = spill.write([copies.record.bodies for copies in leaving])
        except OSError:
            self._in_memory.extendleft(reversed(leaving))
            self._in_memory_messages += sum(len(copies.record.ids) for copies in leaving)
            raise
        for copies, place in zip(leaving, places):
            copies.record = copies.record._replace(bodies=b"")
            copies.spilled = (spill, place)

    def done(self, channel: str, ids) -> None:
        messages = self.messages
        for message_id in ids:
            copies = messages.get(message_id)
            if copies is None:
                continue
            owed = copies.partly_done.get(message_id)
            if owed is None:
                owed = set(copies.owed if copies.owed is not None else self.channels)
            owed.discard(channel)
            if owed:
                copies.partly_done[message_id] = owed
            else:
                del messages[message_id]
                copies.partly_done.pop(message_id, None)

    def _records(self) -> list[Copies]:
        return list({id(copies): copies for copies in self.messages.values()}.values())

    def channel_created(self, channel: str) -> None:
        if not self.channels:
            self._resolved = [copies for copies in self._records() if copies.owed is None]
            for copies in self._resolved:
                copies.owed = set()
        for copies in self._resolved:
            copies.owed.add(channel)  # type: ignore[union-attr]
        self.channels.add(channel)

    def batch_ended(self) -> None:
        self._resolved = []

    def forget_channel(self, channel: str) -> None:
        """Deleted or emptied at the origin: nothing is owed to it."""
        for copies in self._records():
            if copies.owed is not None:
                copies.owed.discard(channel)
            for owed in copies.partly_done.values():
                owed.discard(channel)
        self.messages = {message_id: copies for message_id, copies in self.messages.items()
                         if copies.owed_by(message_id) != set()}

    def forget_waiting(self) -> None:
        """The topic's own queue was emptied at the origin."""
        self.messages = {key: copies for key, copies in self.messages.items() if copies.owed is not None}

    def held_records(self) -> Iterator[tuple[Copies, list[bytes]]]:
        """Each record with the ids of it still held, in publish order (a
        record whose ids are not together comes once per run of them)."""
        current, ids = None, []
        for message_id, copies in self.messages.items():
            if copies is not current:
                if current is not None:
                    yield current, ids
                current, ids = copies, []
            ids.append(message_id)
        if current is not None:
            yield current, ids

    def owed(self) -> Iterator[tuple[bytes, bytes, int, float, set[str] | None]]:
        """Every message still owed: (id, body, timestamp, deliver_at,
        channels or None), in publish order, as they are taken (the
        topic must not change meanwhile)."""
        current, by_id = None, {}  # the record being read: its id -> body (a record's ids come together)
        for message_id, copies in self.messages.items():
            record = copies.record
            if copies is not current:
                current, by_id = copies, dict(zip(record.ids, split_bodies(copies.bodies())))
            yield (message_id, by_id[message_id], record.timestamp, copies.deliver_at, copies.owed_by(message_id))


class Shadow:
    """One origin's epoch, as told by its ``REPL`` batches; with
    ``spill_directory``, the bodies past ``memory_messages`` per topic are
    kept there."""

    def __init__(self, origin: str, epoch: int, spill_directory: str | None = None, memory_messages: int = 0):
        self.origin = origin
        self.epoch = epoch
        self.topics: dict[str, ShadowTopic] = {}
        self.created = time.monotonic()
        self.memory_messages = memory_messages
        self._spill = None if spill_directory is None else Spill(spill_directory, origin, epoch)
        self.spill_failure: OSError | None = None  # the disk refused the last spill: the bodies stayed in memory

    @property
    def spilled_bytes(self) -> int:
        return 0 if self._spill is None else self._spill.bytes

    def close(self) -> None:
        """The shadow is done with: its bodies on disk go."""
        if self._spill is not None:
            self._spill.remove()

    def __len__(self) -> int:
        return sum(len(topic.messages) for topic in self.topics.values())

    def keys_held(self) -> int:
        return sum(len(topic.live_keys()) for topic in self.topics.values())

    def as_payload(self) -> bytes:
        """Records that rebuild this shadow: for a log rewritten (shadowlog.py)."""
        return b"".join(self.payload_slices())

    def payload_slices(self, messages: int = SLICE) -> Iterator[bytes]:
        """``as_payload`` in slices of about ``messages`` messages each, so
        that a big shadow is handed over or kept between other work (the
        shadow must not change while they are taken). A record none of
        whose messages is done yet goes on as it came, bodies and all."""
        parts: list[bytes] = []
        count = size = 0
        now = time.time()
        for name, topic in self.topics.items():
            parts.extend(event_record(CHANNEL, name, channel) for channel in sorted(topic.channels))
            parts.extend(event_record(PAUSED, name, channel) for channel in sorted(topic.paused))
            parts.extend(keys_records(name, topic.key_window_ms, topic.live_keys()))
            for copies, ids in topic.held_records():
                record = copies.record
                all_bodies = copies.bodies()
                defer_ms = max(0, int((copies.deliver_at - now) * 1000)) if copies.deliver_at else 0
                if len(ids) == len(record.ids) and not copies.partly_done:
                    parts.append(published_record(name, record.timestamp, defer_ms, ids, all_bodies,
                                                  _channel_names(copies.owed)))
                else:
                    bodies = dict(zip(record.ids, split_bodies(all_bodies)))
                    parts.extend(published_record(name, record.timestamp, defer_ms, [message_id],
                                                  encode_mpub_body([bodies[message_id]]),
                                                  _channel_names(copies.owed_by(message_id))) for message_id in ids)
                count += len(ids)
                size += len(all_bodies)
                if count >= messages or size >= SLICE_BYTES:
                    yield b"".join(parts)
                    parts, count, size = [], 0, 0
        if parts:
            yield b"".join(parts)

    def forget_ids(self, gone: set[tuple[str, bytes]]) -> None:
        """Drop the messages named by (topic, id): those already adopted."""
        for name, topic in self.topics.items():
            topic.messages = {message_id: copies for message_id, copies in topic.messages.items()
                              if (name, message_id) not in gone}

    def _topic(self, name: str) -> ShadowTopic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = ShadowTopic()
        return topic

    def apply(self, records) -> None:
        touched: set[str] = set()
        for record in records:
            if isinstance(record, Published):
                self._topic(record.topic).add(record)
            elif isinstance(record, Done):
                topic = self.topics.get(record.topic)
                if topic is not None:
                    topic.done(record.channel, record.ids)
            elif isinstance(record, Keyed):
                self._topic(record.topic).add_keys(record)
            else:
                self._event(record, touched)
        for name in touched:
            topic = self.topics.get(name)
            if topic is not None:
                topic.batch_ended()
        if self._spill is not None:
            self._spill_beyond_memory(self._spill)

    def _spill_beyond_memory(self, spill: Spill) -> None:
        self.spill_failure = None
        for topic in self.topics.values():
            try:
                topic.spill(spill, self.memory_messages)
            except OSError as error:
                self.spill_failure = error
                return
        if spill.rolled:
            spill.keep({copies.spilled[1][0] for topic in self.topics.values()
                        for copies in topic.messages.values() if copies.spilled is not None})

    def _event(self, event: ChannelEvent, touched: set[str]) -> None:
        if event.kind == RESET:
            self.topics.clear()
            return
        if event.kind == CHANNEL:
            self._topic(event.topic).channel_created(event.channel)
            touched.add(event.topic)
            return
        topic = self._topic(event.topic) if event.kind == PAUSED else self.topics.get(event.topic)
        if topic is None:
            return
        if event.kind == DELETED:
            if event.channel:
                topic.forget_channel(event.channel)
                topic.channels.discard(event.channel)
                topic.paused.discard(event.channel)
            else:
                del self.topics[event.topic]
        elif event.kind == EMPTIED:
            if event.channel:
                topic.forget_channel(event.channel)
            else:
                topic.forget_waiting()
        elif event.kind == PAUSED:
            topic.paused.add(event.channel)
        elif event.kind == UNPAUSED:
            topic.paused.discard(event.channel)
