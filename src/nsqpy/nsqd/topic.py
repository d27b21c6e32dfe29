"""A topic: takes published messages and gives every channel a copy.

While a topic has no channel, or is paused, messages wait in its own queue
(memory, then disk). The first channel to appear, or an unpause, drains that
backlog in chunks so a large one never stalls the event loop. A retained
topic (retention.py) with no channel keeps that backlog in its log instead,
where every message is already: the first channel replays it (replay.py),
and nothing is stored twice.
"""

from collections.abc import Collection
from time import time_ns
from typing import Any, Final

from ..protocol.commands import encode_mpub_body
from ..protocol.names import is_ephemeral
from ..protocol.replication import EMPTIED, PAUSED, UNPAUSED
from .batch import Batch
from .bounds import DepthLimit
from .channel import Channel
from .guid import GuidFactory
from .message import Message
from .publish_keys import PublishKeys
from .queue import MessageQueue, MessagesLost
from .replay import Replay, has_saved_place

DRAIN_CHUNK: Final = 1000


class TopicExiting(Exception):
    """The topic is being deleted or the daemon is stopping."""


def _copied(messages: list[Message]) -> list[Message]:
    """Another channel's own copies of ``messages``."""
    return [message.copy() for message in messages]


class Topic:
    def __init__(self, name: str, nsqd):
        self.name = name
        self.nsqd = nsqd
        self.replication: Any = nsqd.replication  # fixed once nsqd is made; read by every publish
        self.ephemeral = is_ephemeral(name)
        self.loop = nsqd.loop
        self.queue: MessageQueue = nsqd.new_queue(name, self.ephemeral)
        self.channels: dict[str, Channel] = {}
        self.guid = GuidFactory(nsqd.options.node_id)
        self.paused = False
        self.exiting = False
        # a new topic waits for nsqlookupd's list of its channels before
        # handing messages out (see NSQD.get_topic); until then they queue here
        self.started = True
        self.message_count = 0
        self.message_bytes = 0
        # expiry (expiry.py): None settings follow nsqd's flags
        self.ttl_setting: float | None = None
        self.expire_action_setting: str | None = None
        self.limit = DepthLimit(f"topic {name}", nsqd.options.max_depth, nsqd.options.full_policy)
        self._drain_scheduled = False
        # retention (retention.py): None settings follow nsqd's flags; the
        # log (topiclog/) exists while the topic is retained
        self.retention_setting: float | None = None
        self.retention_bytes_setting: int | None = None
        self.topic_log = None if self.ephemeral or not self.retained else nsqd.open_topic_log(name)
        # keyed publishes (publish_keys.py): opened by the first one
        self.publish_key_window_setting: float | None = None
        self.publish_keys: PublishKeys | None = None
        self.turn: list[bytes] = []  # this loop turn's PUBs, queued at its end (publish_in_turn)

    @property
    def depth(self) -> int:
        """Messages waiting for a channel: in the topic's queue, or in its
        log while a retained topic has none, or while it holds back the
        channels that read its log (paused, durable mode)."""
        topic_log = self.topic_log
        if topic_log is None:
            return len(self.queue)
        if self.channels:
            ends = [channel.cursor.end for channel in self.channels.values() if channel.cursor is not None]
            return len(self.queue) + (topic_log.latest - min(ends) if ends else 0)
        if topic_log.backlog_from is None:
            return len(self.queue)
        return len(self.queue) + topic_log.latest - topic_log.backlog_from

    # --- publishing -------------------------------------------------------------

    def publish(self, bodies: list[bytes], timestamp: int, defer: float = 0.0, ids: list[bytes] | None = None) -> None:
        """Queue ``bodies`` in order, with new ids unless ``ids`` are given (a
        dead letter keeps its id), after this turn's PUBs. Raises
        ``TopicExiting``, ``QueueFull`` or ``OSError`` (disk refused the write)."""
        self._settle_turn()
        self._check_open(len(bodies))
        self._publish_checked(bodies, timestamp, defer, ids)

    def publish_in_turn(self, body: bytes) -> bool:
        """A PUB, queued with this loop turn's others to the topic in one
        publish (``flush``) when the turn's answers are written, before they
        leave (dirty.py): the caller queues the PUB's. A crowd of publishers
        with one PUB in flight each then costs the topic what their MPUB
        would, and shares its disk writes and fsyncs.

        Raises what can be known now (``TopicExiting``, ``QueueFull``,
        counting the turn's PUBs). A disk refusing the batch later takes
        back all their OKs (dirty.py), as it does an MPUB's: what it took
        before refusing may still be delivered, at least once. -> False when
        the topic queues each publish at once: a retained topic's log and a
        replicated nsqd's peers take records as they come."""
        if self.topic_log is not None or self.replication is not None:
            return False
        turn = self.turn
        self._check_open(1, len(turn))
        if not turn:
            self.nsqd.dirty.before_answers(self)
        turn.append(body)
        return True

    def flush(self) -> None:
        """This turn's PUBs, queued as one publish (checked when they came)."""
        bodies = self.turn
        if bodies:
            self.turn = []
            self._publish_checked(bodies, time_ns(), 0.0, None)

    def _settle_turn(self) -> None:
        """This turn's PUBs queued before what comes next (another publish,
        a channel made or gone, an operator's action), as they came first;
        with the turn's other writes (dirty.py), which take back their OKs
        should the disk refuse them."""
        if self.turn:
            self.nsqd.dirty.flush()

    def _publish_checked(self, bodies: list[bytes], timestamp: int, defer: float, ids: list[bytes] | None) -> None:
        if ids is None:
            ids = self.guid.new_ids(len(bodies))
        topic_log = self.topic_log
        if topic_log is not None:
            first = topic_log.append(ids, bodies, timestamp, round(defer * 1000))
            if self._backlog_in_log():
                topic_log.mark_backlog(first)
                self._counted(bodies)
                return
            if self._to_cursors(first, len(bodies), bool(defer)) and not defer:
                live = self._live_channels()
                if live:
                    self._put_copies(live, self._messages(ids, bodies, timestamp, defer))
                self._counted(bodies)
                return
            if not defer:
                self._overflow_to_log(first, len(bodies))
        messages = self._messages(ids, bodies, timestamp, defer)
        replication = self.replication
        if replication is not None:
            replication.published(self.name, messages, int(defer * 1000), self._fan_out_channels())
        if not self._to_channels_now():
            self.queue.put_many(messages)
            if self.limit.drops:
                self.limit.trim(self.queue)
        elif defer:
            for message in messages:
                self._fan_out(message)
        else:
            self._put_copies(self.channels.values(), messages)
        self._counted(bodies)

    def publish_keyed(self, keys: list[bytes], bodies: list[bytes], timestamp: int, defer: float = 0.0) -> None:
        """Queue the messages whose keys the topic does not remember
        (publish_keys.py); a repeat is answered as the first was and queued
        nowhere. Raises ``KeysRefused`` and what ``publish`` raises; a key is
        remembered only once its message is queued."""
        remembered = self.publish_keys
        if remembered is None:
            remembered = self.publish_keys = self.nsqd.open_publish_keys(self)
        fresh = remembered.fresh(keys)
        if not fresh:
            return
        if len(fresh) < len(keys):
            keys = [keys[index] for index in fresh]
            bodies = [bodies[index] for index in fresh]
        hold = self.nsqd.sync_hold if remembered.path is not None else None
        if hold is not None:  # durable mode: the keys are written between the messages' write and fsync
            hold.hold()
        try:
            if len(bodies) > 1 and not defer:  # queued as one buffer, as an MPUB is (batch.py)
                self.publish_mpub(encode_mpub_body(bodies), len(bodies), timestamp)
            else:
                self.publish(bodies, timestamp, defer)
            accepted = remembered.remember(keys)
        finally:
            if hold is not None:
                hold.release()
        replication = self.replication
        if replication is not None:
            replication.keyed(self.name, self.publish_key_window, [(accepted, key) for key in keys])

    def adopt_keys(self, keys) -> list[tuple[int, bytes]]:
        """A dead node's keys for this topic (replication/takeover.py): a
        repeat sent here is recognised as it was there. -> those kept."""
        if self.publish_keys is None:
            self.publish_keys = self.nsqd.open_publish_keys(self)
        return self.publish_keys.adopt(keys)

    @property
    def publish_key_window(self) -> float:
        setting = self.publish_key_window_setting
        return self.nsqd.options.publish_key_window if setting is None else setting

    @staticmethod
    def _messages(ids: list[bytes], bodies: list[bytes], timestamp: int, defer: float) -> list[Message]:
        return [Message(message_id, body, timestamp, 0, defer) for message_id, body in zip(ids, bodies)]

    def _put_copies(self, channels: Collection[Channel], messages: list[Message]) -> None:
        """One batch per channel: one disk write batch, one fsync."""
        for channel, own in zip(channels, self._copies(messages, _copied, len(channels))):
            channel.put_many(own)

    def _put_batch_copies(self, channels: Collection[Channel], batch: Batch) -> None:
        for channel, own in zip(channels, self._copies(batch, Batch.copy, len(channels))):
            channel.put_batch(own)

    def _counted(self, bodies: list[bytes]) -> None:
        self.message_count += len(bodies)
        for body in bodies:
            self.message_bytes += len(body)

    def _backlog_in_log(self) -> bool:
        """A retained topic with no channel: its log holds the backlog."""
        return self.started and not self.channels and not len(self.queue)

    def _to_cursors(self, first: int, count: int, deferred: bool) -> bool:
        """Channels that read the log (durable mode: topiclog/cursor.py) may
        hand out its records ``first`` to ``first + count`` now, if the
        topic hands messages out (else from the unpause on). -> whether the
        topic has such channels: if so, of a message that is not deferred
        only the others take a copy, live (``_live_channels``). A deferred
        publish reaches every channel's deferred messages as usual; the
        cursors skip it."""
        found = False
        delivering = self.started and not self.paused
        for channel in self.channels.values():
            cursor = channel.cursor
            if cursor is not None:
                found = True
                if delivering:
                    cursor.extend(first + count, count if deferred else 0)
                    if not deferred:
                        channel.logged(count)
        return found

    def _live_channels(self) -> list[Channel]:
        """Beside channels that read the log, those that do not (in durable
        mode the ephemeral ones): they take live messages, while the topic
        hands messages out, or none (they keep nothing for later)."""
        if not self.started or self.paused:
            return []
        return [channel for channel in self.channels.values() if channel.cursor is None]

    def hand_out_log(self) -> None:
        """Channels that read the log see it to its end (the topic hands
        messages out again, or for the first time since the start)."""
        topic_log = self.topic_log
        if topic_log is None or not self.started or self.paused:
            return
        latest = topic_log.latest
        for channel in self.channels.values():
            cursor = channel.cursor
            if cursor is not None and cursor.end < latest:
                held_back = latest - cursor.end
                cursor.extend(latest)
                channel.logged(held_back)

    def _overflow_to_log(self, first: int, count: int) -> None:
        """A retained topic's channel whose memory is full does not write
        these messages to its own disk queue: the log holds them already, and
        the channel reads them back from it as its memory frees (replay.py)."""
        if self._to_channels_now():
            for channel in self.channels.values():
                if channel.spills(count):
                    Replay.overflow(channel, first)

    def publish_mpub(self, body: bytes, count: int, timestamp: int) -> None:
        """An MPUB's validated body (``commands.check_mpub_body``), queued as
        it is (batch.py). Raises as ``publish`` does."""
        self._settle_turn()
        self._check_open(count)
        batch = Batch(body, count, timestamp, self.guid.reserve(count))
        topic_log = self.topic_log
        if topic_log is not None:
            first = topic_log.append_mpub(body, count, timestamp, batch.ids.copy().take(count))
            in_log_only = self._backlog_in_log()
            if in_log_only:
                topic_log.mark_backlog(first)
            if in_log_only or self._to_cursors(first, count, False):
                if not in_log_only:
                    self._put_batch_copies(self._live_channels(), batch)
                self.message_count += count
                self.message_bytes += len(body) - 4 * (count + 1)
                return
            self._overflow_to_log(first, count)
        replication = self.replication
        if replication is not None:
            replication.published_mpub(self.name, timestamp, batch.ids.copy().take(count), body,
                                       self._fan_out_channels())
        if not self._to_channels_now():
            self.queue.put_batch(batch)
            if self.limit.drops:
                self.limit.trim(self.queue)
        else:
            self._put_batch_copies(self.channels.values(), batch)
        self.message_count += count
        self.message_bytes += len(body) - 4 * (count + 1)

    def _fan_out_channels(self) -> tuple[str, ...]:
        """The channels a message published now goes to; none while it
        waits in the topic (a replicated nsqd's peers are told which)."""
        return tuple(self.channels) if self._to_channels_now() else ()

    def _check_open(self, incoming: int, in_turn: int = 0) -> None:
        if self.exiting:
            raise TopicExiting("exiting")
        self._check_limits(incoming, in_turn)

    @staticmethod
    def _copies(first, copy, count: int) -> list:
        """``first`` for the first of ``count`` channels and ``copy(first)``
        for each other, all made before any channel takes from its own (a
        channel without room in memory takes a whole batch at once). One
        channel, the commonest, takes ``first`` and nothing is made."""
        if count == 1:
            return [first]
        return [first, *(copy(first) for _ in range(count - 1))]

    def _to_channels_now(self) -> bool:
        """Straight to the channels, or into the topic's own queue first."""
        return self.started and bool(self.channels) and not self.paused and not len(self.queue)

    def _check_limits(self, incoming: int, in_turn: int) -> None:
        """Raises ``QueueFull`` before anything is queued, so an MPUB is all
        or nothing; the turn's PUBs count as queued (``publish_in_turn``)."""
        if self.limit.rejects:
            self.limit.check(len(self.queue) + in_turn, incoming)
        for channel in self.channels.values():
            if channel.limit.rejects:
                channel.limit.check(channel.depth + in_turn, incoming)

    def _fan_out(self, message: Message) -> None:
        defer = message.defer
        first = True
        for channel in self.channels.values():
            copy = message if first else message.copy()
            first = False
            if defer:
                copy.defer = 0.0
                channel.put_deferred(copy, defer)
            else:
                channel.put(copy)

    def start(self) -> None:
        self.started = True
        self._schedule_drain()
        self.hand_out_log()

    def _schedule_drain(self) -> None:
        if (not self._drain_scheduled and self.started and self.channels and not self.paused
                and len(self.queue)):
            self._drain_scheduled = True
            self.loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        if self.exiting or self.paused or not self.started or not self.channels:
            return
        queue = self.queue
        for _ in range(DRAIN_CHUNK):
            message = queue.pop()
            if message is None:
                return
            if message.disk_token is None:
                self._fan_out(message)
            else:  # its record goes once every channel holds a copy
                self._fan_out(message.copy())
                queue.ack(message)
        self._schedule_drain()

    # --- expiry -----------------------------------------------------------------

    @property
    def message_ttl(self) -> float:
        return self.nsqd.options.message_ttl if self.ttl_setting is None else self.ttl_setting

    @property
    def expire_action(self) -> str:
        return self.expire_action_setting or self.nsqd.options.expire_action

    def configure_expiry(self, ttl: float | None, expire_action: str | None) -> None:
        """Set either or both (None keeps the current setting); every channel follows."""
        if ttl is not None:
            self.ttl_setting = ttl
        if expire_action is not None:
            self.expire_action_setting = expire_action
        for channel in self.channels.values():
            channel.follow_topic_expiry(self.message_ttl, self.expire_action)

    # --- retention ----------------------------------------------------------------

    @property
    def retention(self) -> float:
        return self.nsqd.options.retention if self.retention_setting is None else self.retention_setting

    @property
    def retention_bytes(self) -> int:
        options = self.nsqd.options
        return options.retention_bytes if self.retention_bytes_setting is None else self.retention_bytes_setting

    @property
    def retained(self) -> bool:
        return not self.ephemeral and bool(self.retention or self.retention_bytes)

    def log_owed_from(self) -> int | None:
        """The first offset a channel has yet to receive from the log, or
        to receive again after kill -9 (a replay's saved position: the
        oldest record it queued and the channel has not finished):
        retention keeps it, as NSQ keeps a channel's backlog. None: nothing
        is owed. (The backlog kept for a first channel that does not exist
        yet is owed to nobody: retention applies, or a topic read only by
        offset would keep everything.)"""
        owed = [channel.replay_position.offset for channel in self.channels.values()
                if channel.replay_position is not None]
        owed += [channel.cursor.durable_position for channel in self.channels.values() if channel.cursor is not None]
        return min(owed) if owed else None

    def configure_retention(self, seconds: float | None, max_bytes: int | None) -> None:
        """Set either or both (None keeps the current setting). A topic that
        becomes retained starts its log; one that stops being retained
        deletes it (refused while a channel replays from it)."""
        before = (self.retention_setting, self.retention_bytes_setting)
        if seconds is not None:
            self.retention_setting = seconds
        if max_bytes is not None:
            self.retention_bytes_setting = max_bytes
        if self.retained and self.topic_log is None:
            self.topic_log = self.nsqd.open_topic_log(self.name)
            for channel in self.channels.values():
                self.nsqd.read_log(self, channel)
        elif not self.retained and self.topic_log is not None:
            replaying = [channel.name for channel in self.channels.values()
                         if channel.replay is not None or (channel.cursor is not None and channel.cursor.owes)]
            if replaying:
                self.retention_setting, self.retention_bytes_setting = before
                raise ValueError(f"channel {replaying[0]} still reads from the log; "
                                 "let it catch up (or delete it) first")
            for channel in self.channels.values():
                channel.leave_log()
            topic_log, self.topic_log = self.topic_log, None
            topic_log.delete()

    # --- channels ---------------------------------------------------------------

    def get_channel(self, name: str) -> Channel:
        channel = self.channels.get(name)
        if channel is None:
            self._settle_turn()
            ephemeral = self.ephemeral or is_ephemeral(name)
            queue = self.nsqd.new_queue(f"{self.name}:{name}", ephemeral)  # its disk: a cursor's side queue
            channel = Channel(self, name, queue, self.loop, self.nsqd.new_latency_window(),
                              self.nsqd.new_deferred_disk(f"{self.name}:{name}", ephemeral),
                              max_attempts=self.nsqd.options.max_attempts, message_ttl=self.message_ttl,
                              expire_action=self.expire_action,
                              limit=DepthLimit(f"channel {self.name}/{name}", self.nsqd.options.max_depth,
                                               self.nsqd.options.full_policy),
                              timed=self.nsqd.timed_channels, replication=self.replication)
            self.channels[name] = channel
            topic_log = self.topic_log
            took_it = topic_log is not None and self.nsqd.loading and has_saved_place(topic_log, name)
            self.nsqd.read_log(self, channel)
            if topic_log is not None and topic_log.backlog_from is not None:  # the first channel takes the backlog
                if took_it:  # nsqd.dat lists it, and its place in the log is saved: nsqd died before the marker went
                    topic_log.take_backlog()
                else:
                    Replay.start(channel, topic_log.backlog_from)
                    self._forget_backlog_once_listed(channel)
            self.nsqd.notify_changed(self, channel)
            self._schedule_drain()
        return channel

    def _forget_backlog_once_listed(self, channel: Channel) -> None:
        """The topic's backlog marker goes once nsqd.dat lists ``channel``,
        which took the backlog: nsqd killed before then finds the backlog
        still the topic's, for whichever channel comes first again."""
        def listed(_written) -> None:
            if self.topic_log is not None and self.channels.get(channel.name) is channel:
                self.topic_log.take_backlog()
        self.nsqd.persist_metadata(self).add_done_callback(listed)

    def delete_channel(self, name: str) -> None:
        self._settle_turn()
        channel = self.channels.pop(name, None)
        if channel is None:
            raise KeyError(name)
        channel.delete()
        self.nsqd.notify_changed(self, channel, deleted=True)
        if self.ephemeral and not self.channels and not self.exiting:
            self.nsqd.delete_topic(self.name)

    # --- operator actions ---------------------------------------------------------

    def pause(self) -> None:
        self._settle_turn()
        self.paused = True
        for channel in self.channels.values():
            if channel.cursor is not None:
                channel.cursor.hold()
        self._tell_peers(PAUSED)

    def unpause(self) -> None:
        self._settle_turn()
        self.paused = False
        self._schedule_drain()
        self.hand_out_log()
        self._tell_peers(UNPAUSED)

    def empty(self) -> None:
        """What the topic holds and has not given its channels yet is
        dropped, as NSQ empties its topic's queue: its own queue, the
        backlog its log keeps for a first channel, and what a paused
        topic holds back from the channels that read its log."""
        self._settle_turn()
        self.queue.clear()
        topic_log = self.topic_log
        if topic_log is not None:
            topic_log.take_backlog()
            for channel in self.channels.values():
                if channel.cursor is not None:
                    channel.cursor.skip_held(topic_log.latest)
        self._tell_peers(EMPTIED)

    def _tell_peers(self, kind: int) -> None:
        """A replicated nsqd's peers keep up with what operators do (replication/)."""
        replication = self.replication
        if replication is not None:
            replication.changed(self.name, None, kind)

    def close(self) -> int:
        """Persist everything (channels first) and stop. Returns messages persisted."""
        self._settle_turn()
        self.exiting = True
        try:
            return MessagesLost.tally([*(channel.close for channel in self.channels.values()),
                                       lambda: self.queue.persist([])])
        finally:
            self.queue.close()
            if self.topic_log is not None:
                self.nsqd.close_topic_log(self.topic_log)
            if self.publish_keys is not None:
                self.nsqd.close_publish_keys(self.publish_keys)

    def delete(self) -> None:
        self._settle_turn()
        self.exiting = True
        for channel in self.channels.values():
            channel.delete()
        self.channels.clear()
        self.queue.delete()
        if self.topic_log is not None:
            self.topic_log.delete()
        self.nsqd.delete_publish_keys(self)
