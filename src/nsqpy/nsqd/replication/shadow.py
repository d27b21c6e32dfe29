"""What a peer holds for an origin nsqd: its messages not yet done, per
topic, with the channels each is still owed to. Never delivered; adopted
whole by the survivor that takes the origin over (takeover.py).

The channels a message is owed to follow the origin's fan-out: a message
goes to the channels its topic has when it is published there; one
published while the topic has none waits in the topic, and goes to the
channel(s) that appear first (the origin hands its backlog to them in the
same event-loop turn, so their records come in one batch).
"""

import time

from ...protocol.replication import CHANNEL, DELETED, EMPTIED, ChannelEvent, Done, Published


class ShadowMessage:
    __slots__ = ("id", "body", "timestamp", "deliver_at", "owed")

    def __init__(self, message_id: bytes, body: bytes, timestamp: int, deliver_at: float,
                 owed: set[str] | None):
        self.id = message_id
        self.body = body
        self.timestamp = timestamp
        self.deliver_at = deliver_at  # wall-clock seconds for a deferred one, else 0
        self.owed = owed  # channels still to finish it; None: waiting in the topic


class ShadowTopic:
    __slots__ = ("channels", "messages", "_resolved")

    def __init__(self) -> None:
        self.channels: set[str] = set()
        self.messages: dict[bytes, ShadowMessage] = {}  # in publish order
        self._resolved: list[ShadowMessage] = []  # waited in the topic until this batch's first channel

    def add(self, record: Published) -> None:
        owed = set(record.channels) if record.channels is not None else (set(self.channels) or None)
        deliver_at = time.time() + record.defer_ms / 1000 if record.defer_ms else 0.0
        self.messages[record.id] = ShadowMessage(record.id, record.body, record.timestamp, deliver_at, owed)

    def done(self, channel: str, ids: list[bytes]) -> None:
        messages = self.messages
        for message_id in ids:
            message = messages.get(message_id)
            if message is None:
                continue
            if message.owed is None:
                message.owed = set(self.channels)
            message.owed.discard(channel)
            if not message.owed:
                del messages[message_id]

    def channel_created(self, channel: str) -> None:
        if not self.channels:
            self._resolved = [m for m in self.messages.values() if m.owed is None]
            for message in self._resolved:
                message.owed = set()
        for message in self._resolved:
            message.owed.add(channel)  # type: ignore[union-attr]
        self.channels.add(channel)

    def batch_ended(self) -> None:
        self._resolved = []

    def forget_channel(self, channel: str) -> None:
        """Deleted or emptied at the origin: nothing is owed to it."""
        for message_id, message in list(self.messages.items()):
            if message.owed is not None and channel in message.owed:
                message.owed.discard(channel)
                if not message.owed:
                    del self.messages[message_id]

    def forget_waiting(self) -> None:
        """The topic's own queue was emptied at the origin."""
        self.messages = {key: m for key, m in self.messages.items() if m.owed is not None}


class Shadow:
    """One origin's epoch, as told by its ``REPL`` batches."""

    def __init__(self, origin: str, epoch: int):
        self.origin = origin
        self.epoch = epoch
        self.topics: dict[str, ShadowTopic] = {}
        self.created = time.monotonic()

    def __len__(self) -> int:
        return sum(len(topic.messages) for topic in self.topics.values())

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
            else:
                self._event(record, touched)
        for name in touched:
            topic = self.topics.get(name)
            if topic is not None:
                topic.batch_ended()

    def _event(self, event: ChannelEvent, touched: set[str]) -> None:
        if event.kind == CHANNEL:
            self._topic(event.topic).channel_created(event.channel)
            touched.add(event.topic)
            return
        topic = self.topics.get(event.topic)
        if topic is None:
            return
        if event.kind == DELETED:
            if event.channel:
                topic.forget_channel(event.channel)
                topic.channels.discard(event.channel)
            else:
                del self.topics[event.topic]
        elif event.kind == EMPTIED:
            if event.channel:
                topic.forget_channel(event.channel)
            else:
                topic.forget_waiting()
