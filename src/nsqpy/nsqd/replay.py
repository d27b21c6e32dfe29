"""Replay: a channel of a retained topic reads its topic's log from a point,
then takes live messages again, each once; consumers need no change. Three
things start one:

* a rewind (``POST /channel/create?from=``, ``POST /channel/rewind?from=``):
  the log again from an offset or a time;
* the first channel of a retained topic that had none: the backlog the log
  kept for it (topic.py);
* a channel whose memory is full (``--mem-queue-size``): instead of writing
  the messages that do not fit to its own disk queue, it reads them back
  from the log, which holds them already, as its memory frees. So a
  retained topic writes each message once, however many channels lag.

A channel stays NSQ's channel throughout (its queue, in-flight, deferred
and dead-letter rules are untouched). While it replays it takes no live
messages from its topic but deferred ones (DPUB, which the log marks and
the replay skips from where it began), and a cursor moves the log's records
into its queue, a window at a time, as its consumers make room: every live
message is in the log already, so the cursor reaches it. When the cursor
reaches the log's end, in the same step the channel takes live messages
again, so nothing falls between the two.

Rewinding drops whatever the channel held (queued, deferred and in flight,
as ``/channel/empty`` does), so nothing is delivered twice from it. Where
a restart resumes the replay is kept beside the log (replay_position.py):
after kill -9, the oldest record the replay queued that the channel has
not finished, so what memory lost comes again from the log.
"""

import os
import time
from itertools import count
from typing import Any, Final

from ..protocol.logchunk import DEFERRED, CorruptChunk, seconds_until_due
from .message import Message
from .replay_position import CURSOR_SUFFIX, ReplayPosition, cursor_path, read_cursor

WINDOW: Final = 10_000  # records queued in the channel ahead of its consumers
WINDOW_BYTES: Final = 8 * 1024 * 1024  # read from the log in one step
TICK: Final = 0.01  # seconds between looks while the window is full
RETRY: Final = 1.0  # seconds before trying again after a read or write failed


def remove_stale_cursors(topic) -> None:
    """At start, after ``topic``'s channels are made from nsqd.dat: the
    cursor of a channel nsqd.dat does not list goes. Such a channel was made
    just before nsqd died, before nsqd.dat listed it; if it was taking the
    topic's backlog, the backlog is still the topic's (Topic.get_channel),
    and a channel of that name made later starts afresh. (A durable-mode
    channel's cursor stays, as NSQ leaves such a channel's disk queue: a
    channel of that name made later goes on from it.)"""
    topic_log = topic.topic_log
    if topic_log is None:
        return
    for file_name in os.listdir(topic_log.directory):
        if file_name.endswith(CURSOR_SUFFIX) and file_name[:-len(CURSOR_SUFFIX)] not in topic.channels:
            os.remove(os.path.join(topic_log.directory, file_name))


def has_saved_place(topic_log, channel_name: str) -> bool:
    """Whether ``channel_name`` has its place in the log saved: a replay
    it was in, or its cursor (durable mode). A channel nsqd.dat lists with
    one had taken the topic's backlog before nsqd stopped."""
    from ..topiclog.cursor import cursor_files

    return (os.path.exists(os.path.join(topic_log.directory, channel_name + CURSOR_SUFFIX))
            or os.path.exists(cursor_files(topic_log.directory, channel_name)[0]))


def chunk_messages(chunk) -> list[Message]:
    """A log chunk's records as messages, with their original ids,
    timestamps and offsets."""
    return [Message(message_id, body, timestamp, 0, 0.0, offset)
            for offset, message_id, body, timestamp in zip(count(chunk.first_offset), chunk.ids, chunk.bodies,
                                                           chunk.timestamps)]


class Replay:
    """The cursor of one channel catching up with its topic's log."""

    def __init__(self, channel, offset: int, live_from: int):
        self.channel = channel
        self.offset = offset  # the next record to queue
        self.log = channel.topic.nsqd.log
        self._handle: Any = None  # the loop's handle of the next step
        channel.replay = self
        # kept from a replay that caught up while the channel holds records it queued
        position: ReplayPosition = channel.replay_position or ReplayPosition(channel)
        position.live_from = live_from
        self.position = position
        position.save()
        self._schedule(0)

    @classmethod
    def start(cls, channel, offset: int) -> None:
        """Rewind ``channel`` to ``offset``: what it holds is dropped. A
        channel reading the log through a cursor (durable mode) moves it."""
        if channel.replay is not None:
            channel.replay.cancel()
        channel.empty()
        latest = channel.topic.topic_log.latest
        if channel.cursor is not None:
            channel.cursor.rewind(offset, latest)
            channel.schedule_dispatch()
        else:
            cls(channel, offset, latest)

    @classmethod
    def overflow(cls, channel, offset: int) -> None:
        """``channel``'s memory is full: it reads from ``offset`` on from the
        log, keeping what it holds."""
        cls(channel, offset, offset)

    @classmethod
    def resume(cls, channel) -> None:
        """After a restart, the replay ``channel`` was in, if it was in one;
        or, out of durable mode now, where its cursor over the log was."""
        topic_log = channel.topic.topic_log
        if topic_log is None or channel.cursor is not None:
            return
        from_cursor = False
        try:
            offset, live_from = read_cursor(cursor_path(channel))
        except FileNotFoundError:
            from ..topiclog.cursor import saved_position

            kept = saved_position(topic_log.directory, channel.name)
            if kept is None:
                return
            offset, live_from = kept
            from_cursor = True
        except (OSError, ValueError) as error:
            channel.topic.nsqd.log.error("CHANNEL(%s): cannot read its replay cursor: %s", channel.name, error)
            return
        if channel.replay is not None:  # started from the topic's backlog: the cursor is further on
            channel.replay.cancel()
        cls(channel, offset, live_from)
        if from_cursor:  # the replay's own cursor file holds the position now
            from ..topiclog.cursor import remove_cursor

            remove_cursor(topic_log.directory, channel.name)

    def backlog(self) -> int:
        """Records of the log the channel has yet to queue."""
        topic_log = self.channel.topic.topic_log
        return 0 if topic_log is None else max(topic_log.latest - self.offset, 0)

    # --- moving records ----------------------------------------------------------------

    def _schedule(self, delay: float) -> None:
        loop = self.channel.loop
        self._handle = loop.call_soon(self._step) if delay <= 0 else loop.call_later(delay, self._step)

    def _step(self) -> None:
        self._handle = None
        channel = self.channel
        topic_log = channel.topic.topic_log
        if channel.replay is not self or topic_log is None:
            return
        if channel.topic.paused:  # what a paused topic takes waits in its queue for the unpause, as NSQ's does
            self._schedule(TICK)
            return
        queue = channel.queue
        # into memory while the channel keeps one (the log is its disk), else its disk queue; room is
        # counted over both, so records still on the disk queue (what memory held at a clean stop) are
        # delivered before any the replay moves in after them, in the log's order
        room = min((queue.capacity or WINDOW) - len(queue), WINDOW)
        if room > 0:
            try:
                self._move(topic_log, room)
            except CorruptChunk as error:  # a bad disk: the rest of that segment is lost, the replay goes on
                skipped_to = topic_log.segment_end(self.offset)
                self.log.error("TOPIC(%s): CHANNEL(%s): replay skips offsets %d to %d: %s", channel.topic.name,
                               channel.name, self.offset, skipped_to - 1, error)
                self.offset = skipped_to
            except OSError as error:
                self.log.error("TOPIC(%s): CHANNEL(%s): replay at offset %d failed: %s", channel.topic.name,
                               channel.name, self.offset, error)
                self._schedule(RETRY)
                return
        if self.offset >= topic_log.latest:
            self._caught_up()
            return
        self._schedule(0 if room > 0 else TICK)

    def _move(self, topic_log, room: int) -> None:
        earliest, latest = topic_log.earliest, topic_log.latest
        if self.offset > latest:  # a cursor past the log's end (its tail cut after a crash): the end
            self.log.warning("TOPIC(%s): CHANNEL(%s): replay cursor %d is past the log's end %d; continuing "
                             "from the end", self.channel.topic.name, self.channel.name, self.offset, latest)
            self.offset = latest
            return
        if self.offset < earliest:
            self.log.warning("TOPIC(%s): CHANNEL(%s): replay skips offsets %d to %d, removed by retention",
                             self.channel.topic.name, self.channel.name, self.offset, earliest - 1)
            self.offset = earliest
        chunks, next_offset = topic_log.records(self.offset, self.offset + room, WINDOW_BYTES)
        position = self.position
        live_from = position.live_from
        messages: list[Message] = []
        for chunk in chunks:
            deferred = chunk.flags & DEFERRED
            if deferred and chunk.first_offset >= live_from:  # it reached the channel live
                continue
            position.took(chunk.first_offset, len(chunk.ids))
            if deferred:
                self._defer(chunk)
            else:
                messages.extend(chunk_messages(chunk))
        if messages:
            self.channel.put_replayed(messages)
        self.offset = next_offset

    def _defer(self, chunk) -> None:
        """A deferred publish the channel did not get live: due when the
        publish asked for, or now if that has passed."""
        left = seconds_until_due(chunk.timestamps[0], chunk.flags, time.time_ns())
        if left > 0:
            for message in chunk_messages(chunk):
                self.channel.put_deferred(message, left)
        else:
            self.channel.put_replayed(chunk_messages(chunk))

    def _caught_up(self) -> None:
        """The log's end: the channel takes live messages from now on."""
        channel = self.channel
        channel.replay = None
        self.position.caught_up()
        self.log.info("TOPIC(%s): CHANNEL(%s): replay caught up at offset %d", channel.topic.name,
                      channel.name, self.offset)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
