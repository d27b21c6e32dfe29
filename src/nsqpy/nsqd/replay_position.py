"""Where a channel's replay resumes after nsqd stops, and the file that
keeps it: ``<topic>.log/<channel>.replay``.

A replay (replay.py) moves the log's records into the channel's queue, in
memory mode up to ``--mem-queue-size`` ahead of its consumers; kill -9
loses those, and what is in flight or deferred, as it loses any memory
queue. The log still holds every one of them, so the position kept is the
oldest record a replay took in that the channel is not yet through with:
a restart replays from there and skips nothing retained (what was
finished after it comes again: at least once). A record is through when it
is finished (FIN, dead letter, expiry, sampled out), dropped at a limit, or
written to the channel's own disk queue (a requeue when memory is full),
which keeps it itself.

The position outlives its replay: a replay that reached the log's end
keeps its file until what it queued is through. A clean stop writes what
the channel holds to its disk queue, so the position written then is
where the replay reads next, or none once it has caught up (``close``).
"""

import os
from collections import deque
from typing import Any, Final

from ..atomicfile import write_atomically

SAVE_INTERVAL: Final = 1.0  # seconds between writes of the position: a crash repeats at most that second
CURSOR_SUFFIX: Final = ".replay"


def cursor_path(channel) -> str:
    return os.path.join(channel.topic.topic_log.directory, channel.name + CURSOR_SUFFIX)


def read_cursor(path: str) -> tuple[int, int]:
    """(the offset to resume at, where live deferred publishes began) of a
    position file. Raises ``OSError`` or ``ValueError``."""
    with open(path, "rb") as f:
        offset, live_from = (int(field) for field in f.read().split())
    return offset, live_from


class ReplayPosition:
    """One channel's position, while a replay reads or records it queued
    are unfinished (the channel's ``replay_position``; None otherwise).

    Cost: each record a replay queues appends its offset to a deque (a
    chunk's offsets at once), ascending as the log is read; a record
    through at the head pops it, and the heads through before it; one
    through out of order waits in a set until the head reaches it: O(1)
    amortized per record, memory for what the channel holds. Written by a
    timer once a second, not per record."""

    def __init__(self, channel) -> None:
        self.channel = channel
        self.path = cursor_path(channel)
        # deferred publishes from here on reached the channel live: a replay skips them (set by each replay)
        self.live_from = 0
        self._taken: deque[int] = deque()  # offsets queued and not yet through, oldest first
        self._through_ahead: set[int] = set()  # through, behind an older one that is not
        self._handle: Any = channel.loop.call_later(SAVE_INTERVAL, self._tick)
        channel.replay_position = self

    @property
    def offset(self) -> int:
        """Where a restart resumes: the oldest record not through, else
        where the replay reads next (one of the two is there, ``through``)."""
        taken = self._taken
        return taken[0] if taken else self.channel.replay.offset

    def took(self, first: int, count: int) -> None:
        """Records ``first`` to ``first + count`` are in the channel now."""
        self._taken.extend(range(first, first + count))

    def through(self, offset: int) -> None:
        """The channel needs the log no more for record ``offset``."""
        taken = self._taken
        if not taken or offset < taken[0]:
            return  # not one it waits for: queued before the channel was emptied or rewound
        if taken[0] != offset:
            self._through_ahead.add(offset)
            return
        taken.popleft()
        ahead = self._through_ahead
        while taken and taken[0] in ahead:
            ahead.remove(taken.popleft())
        if not taken and self.channel.replay is None:  # caught up, and the last of it is through
            self.remove()

    def clear(self) -> None:
        """What the channel held is dropped (``/channel/empty``, a rewind)."""
        self._taken.clear()
        self._through_ahead.clear()
        if self.channel.replay is None:
            self.remove()

    def caught_up(self) -> None:
        """The replay reached the log's end: the file goes once what it queued is through."""
        if not self._taken:
            self.remove()

    def _tick(self) -> None:
        self.save()
        self._handle = self.channel.loop.call_later(SAVE_INTERVAL, self._tick)

    def save(self) -> None:
        try:  # fsynced in durable mode; otherwise written, which kill -9 does not undo
            write_atomically(self.path, b"%d %d\n" % (self.offset, self.live_from),
                             durable=self.channel.topic.nsqd.options.sync_every == 1)
        except OSError as error:
            self.channel.topic.nsqd.log.error("CHANNEL(%s): cannot write its replay cursor: %s",
                                              self.channel.name, error)

    def close(self) -> None:
        """A clean stop: what the channel holds goes to its disk queue, so a
        replay resumes where it reads next, and a caught-up one not at all."""
        if self.channel.replay is None or self.channel.ephemeral:  # an ephemeral one is not made again
            self.remove()
            return
        self._handle.cancel()
        self._taken.clear()
        self.save()
        self.channel.replay_position = None

    def remove(self) -> None:
        """No position any more (the channel caught up, went, or stopped with nothing to resume)."""
        self._handle.cancel()
        self.channel.replay_position = None
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
