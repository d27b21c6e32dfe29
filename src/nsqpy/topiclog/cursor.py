"""A channel's queue as a cursor over its topic's log: durable mode's one write.

In durable mode (``--mem-queue-size=0``) a channel's whole queue is on disk.
On a retained topic every message is on disk already, in the log, fsynced
before its OK: a channel that wrote it again to its own disk queue would
write and fsync each message twice. So there a channel (not an ephemeral
one) keeps only its *state* over the log, #625's design:

* how far it has read (the next offset), and the offsets up to which it
  may read (``end``: the topic moves it as it hands messages out, so a
  paused topic holds its channels back as NSQ's does);
* the records handed out and not yet acknowledged, in offset order; the
  oldest of them is the *durable position*, from which a restart reads
  again;
* acknowledgements out of order, and each delivered record's attempts,
  kept in a journal (``diskqueue/journal.py``'s format, positions being
  offsets) exactly as a disk queue keeps them, so nothing finished comes
  back after kill -9 and attempts survive it.

Its files sit in the log's directory: ``<channel>.cursor`` (the durable
position, where live deferred publishes began, the end, a record being
dead-lettered) and ``<channel>.cursor.journal``. The channel's own disk
queue stays beside the cursor as its *side* queue, for what is not a log
record at the cursor: a topic's backlog from before it was retained, and
what a clean stop writes out. A requeued record stays where it is in the
log, unacknowledged; its message waits in memory to be handed out again
(a crash gives it back from the log, attempts and all).

Deferred publishes (DPUB) reach the channel live, into its deferred queue,
so the cursor skips them from ``live_from`` on; before it (a rewind) it
defers them itself, until the time they asked for.

The object stands where a ``DiskQueue`` stands in a ``MessageQueue`` and
answers the same calls; its tokens name log records as (generation,
sequence, ``LOG``, offset), the side queue's pass through as they are.
"""

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Final

from ..atomicfile import write_atomically
from ..diskqueue import DiskQueue
from ..diskqueue.journal import ACKED, DELIVERED_TO, FIRST_DELIVERY, READ_TO, Journal
from ..protocol.logchunk import DEFERRED, CorruptChunk, seconds_until_due
from ..protocol.message import encode_message
from .log import TopicLog

LOG: Final = -1  # a token's "file number" when it names a log record
READ_BYTES: Final = 1 << 20  # read from the log at once
CURSOR_SUFFIX: Final = ".cursor"
JOURNAL_SUFFIX: Final = ".cursor.journal"

Token = tuple[int, int, int, int]


def cursor_files(directory: str, channel: str) -> tuple[str, str]:
    """(the cursor's meta file, its journal) for ``channel`` in a log's ``directory``."""
    return os.path.join(directory, channel + CURSOR_SUFFIX), os.path.join(directory, channel + JOURNAL_SUFFIX)


def _read_meta(path: str) -> tuple[int, int, int, int, list[tuple[int, int]]]:
    """(durable position, live_from, end, record being moved or -1, ranges
    to skip) of a cursor's meta file (``CursorQueue._write_meta``). Raises
    ``OSError`` or ``ValueError``."""
    with open(path, "rb") as f:
        fields = [int(field) for field in f.read().split()]
    position, live_from, end, moving, *bounds = fields
    if len(bounds) % 2:
        raise ValueError(f"{path}: a skipped range without its end")
    return position, live_from, end, moving, list(zip(bounds[::2], bounds[1::2]))


def _position(meta_position: int, loaded) -> int:
    """The durable position: the meta file's, or the journal's furthest ``READ_TO`` past it."""
    return meta_position if loaded.read_to is None else max(meta_position, loaded.read_to[1])


def saved_position(directory: str, channel: str) -> tuple[int, int] | None:
    """(durable position, live_from) a cursor kept, or None without one:
    what a channel that no longer reads the log (nsqd restarted out of
    durable mode) replays from. Acknowledgements past the position are not
    read: those records come again (at least once)."""
    meta, journal = cursor_files(directory, channel)
    try:
        position, live_from = _read_meta(meta)[:2]
    except (OSError, ValueError):
        return None
    return _position(position, Journal(journal).load()), live_from


def remove_cursor(directory: str, channel: str) -> None:
    for path in cursor_files(directory, channel):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


class CursorQueue:
    def __init__(self, name: str, topic_log: TopicLog, channel: str, side: DiskQueue, *, start: int,
                 live_from: int, sync_every: int, logger: logging.Logger | None = None):
        """``start``/``live_from``: where a cursor that has no files yet begins."""
        self.name = name
        self.topic_log = topic_log
        self.side = side
        self.sync_every = max(1, sync_every)
        self.log = logger or logging.getLogger("nsqpy.topiclog")
        self.channel = channel
        self.meta_path, journal_path = cursor_files(topic_log.directory, channel)
        self._journal = Journal(journal_path)
        # the channel's deferred messages, for a deferred publish read before ``live_from``
        self.defer: Callable[[bytes, float], None] | None = None
        self.on_dirty: Callable[["CursorQueue"], None] | None = None
        self._dirty = False
        self._generation = 0
        self._next_sequence = 0
        # read from the log and not handed out yet: (sequence, offset, record); outstanding already
        self._buffer: deque[tuple[int, int, bytes]] = deque()
        self._again: deque[tuple[bytes, Token]] = deque()  # requeued, still unacknowledged in the log
        self._turn = 0  # which source goes first: requeued, side, log
        # read and not acknowledged, in offset order: (sequence, offset); the first is the durable position
        self._outstanding: deque[tuple[int, int]] = deque()
        self._acked: dict[int, int] = {}  # sequence -> offset, acknowledged behind an outstanding one
        self._marks: dict[int, tuple[int, int]] = {}  # sequence -> (offset, mark)
        self._unjournaled: list[int] = []
        self._acked_before: set[int] = set()  # offsets acknowledged before a restart, not read again yet
        self._marks_before: dict[int, int] = {}
        self._delivered_to: int | None = None  # furthest offset handed out for the first time
        self._journaled_delivered_to: int | None = None
        self._flushed_position = -1
        self._unsynced_ops = 0
        self.deferred_ahead = 0  # deferred publishes between the read offset and the end (skipped)
        self._moving: tuple[int, int] | None = None  # (LOG, offset) of a log record being dead-lettered
        # offset ranges the topic dropped while holding the cursor back (an
        # empty of a paused topic), in order, past the read offset
        self._skipped: list[tuple[int, int]] = []
        self._written_fields: tuple = ()
        self._closed = False
        if os.path.exists(self.meta_path):
            self._load()
        else:
            self.read_offset = self.end = start
            self.live_from = live_from
            self._journal.remove()  # one without its meta file says nothing (a channel made again)
            self._write_meta()
        self._flushed_position = self.durable_position

    # --- what it holds ------------------------------------------------------------------

    @property
    def depth(self) -> int:
        log_records = (self.end - self.read_offset + len(self._buffer) - len(self._acked_before)
                       - self.deferred_ahead
                       - sum(max(0, stop - max(start, self.read_offset)) for start, stop in self._skipped))
        # never too low: a dispatch stops at 0
        return max(log_records, 0) + len(self._again) + self.side.depth

    @property
    def durable_position(self) -> int:
        """The oldest offset not yet acknowledged: a restart reads from
        there, and retention keeps the log from there on (a record being
        dead-lettered is outstanding, so never before it)."""
        if self._outstanding:
            return self._outstanding[0][1]
        return self.read_offset

    @property
    def owes(self) -> bool:
        """Whether it has anything of the log left to hand out or hear back about."""
        return bool(self._outstanding or self.read_offset < self.end or self.end < self.topic_log.latest
                    or self._moving)

    @property
    def moving(self) -> tuple[int, int] | None:
        """The record a crash cut dead-lettering short for (dead_letter.py), here or on the side queue."""
        return self._moving if self._moving is not None else self.side.moving

    @property
    def unsynced_writes(self) -> int:
        return self.side.unsynced_writes

    @property
    def needs_sync(self) -> bool:
        return self._unsynced_ops > 0 or self.side.needs_sync

    # --- the topic's side ---------------------------------------------------------------

    def extend(self, end: int, deferred: int = 0) -> None:
        """The topic hands out the log up to ``end`` (``deferred`` of the
        new records are deferred publishes, which reach the channel live)."""
        if end > self.end:
            self.end = end
            self.deferred_ahead += deferred

    def rewind(self, offset: int, live_from: int) -> None:
        """After ``empty()``: read again from ``offset``; deferred publishes
        before ``live_from`` are deferred here, those after it came live."""
        self.read_offset = offset
        self.live_from = live_from
        self.deferred_ahead = 0
        self._skipped.clear()  # a rewind reads everything from its offset again
        self._write_meta()
        self._flushed_position = self.durable_position

    def hold(self) -> None:
        """The topic stops handing messages out (paused): where the cursor's
        end is, kept for a restart that finds the topic paused."""
        self._write_meta()

    def skip_held(self, latest: int) -> None:
        """The topic was emptied while it held the cursor back: the records
        from its end to ``latest`` are not the channel's (they were the
        topic's, as NSQ's paused topic keeps them in its own queue), so the
        cursor passes over them; what it had of its own before them stays."""
        if latest <= self.end:
            return
        if self._skipped and self._skipped[-1][1] == self.end:
            self._skipped[-1] = (self._skipped[-1][0], latest)
        else:
            self._skipped.append((self.end, latest))
        if self.read_offset == self.end and not self._buffer:
            self._jump_to(latest)
        self.end = latest
        self._write_meta()

    # --- the calls of a MessageQueue ------------------------------------------------------

    def put(self, data: bytes) -> None:
        self.side.put(data)

    def put_many(self, records: list[bytes]) -> None:
        self.side.put_many(records)

    def rewrite(self, token: Token, data: bytes) -> None:
        """A requeue: a log record stays where it is, unacknowledged, and is
        handed out again as ``data`` (the message with its attempts)."""
        if token[2] != LOG:
            self.side.rewrite(token, data)
        elif token[0] == self._generation:
            self._again.append((data, token))
        else:  # emptied since: no record of it here any more, as DiskQueue.rewrite
            self.side.put(data)

    def get_with_token(self) -> tuple[bytes, Token] | None:
        """The next record, taking turns between requeued ones, the side
        queue and the log; None when none is there."""
        self._turn = (self._turn + 1) % 3
        for source in range(self._turn, self._turn + 3):
            source %= 3
            if source == 0 and self._again:
                return self._again.popleft()
            if source == 1 and self.side.depth:
                taken = self.side.get_with_token()
                if taken is not None:
                    return taken
            if source == 2:
                taken = self._next_from_log()
                if taken is not None:
                    return taken
        return None

    def ack(self, token: Token) -> None:
        generation, sequence, number, offset = token
        if number != LOG:
            self.side.ack(token)
            return
        if generation != self._generation:
            return
        if self._moving is not None and self._moving[1] == offset:
            self._moving = None
            self._unsynced_ops = self.sync_every - 1  # the meta file forgets it at the sync below
        self._marks.pop(sequence, None)
        outstanding = self._outstanding
        if outstanding and outstanding[0][0] == sequence:
            outstanding.popleft()
            acked = self._acked
            while outstanding and outstanding[0][0] in acked:
                del acked[outstanding.popleft()[0]]
        else:
            self._acked[sequence] = offset
            self._unjournaled.append(sequence)
        self._count_op()

    def set_marks(self, marks: list[tuple[Token, int]]) -> None:
        """Each record's attempts, as ``DiskQueue.set_marks`` keeps them."""
        side: list[tuple[Token, int]] = []
        moved = False
        for token, mark in marks:
            generation, sequence, number, offset = token
            if number != LOG:
                side.append((token, mark))
            elif generation == self._generation:
                if mark == FIRST_DELIVERY and (self._delivered_to is None or offset > self._delivered_to):
                    self._delivered_to = offset
                    moved = True
                    continue
                self._marks[sequence] = (offset, mark)
                self._unjournaled.append(sequence)
                moved = True
        if side:
            self.side.set_marks(side)
        if moved:
            self._count_op()

    def mark_of(self, token: Token) -> int:
        generation, sequence, number, offset = token
        if number != LOG:
            return self.side.mark_of(token)
        if generation != self._generation:
            return 0
        marked = self._marks.get(sequence)
        if marked is not None:
            return marked[1]
        delivered_to = self._delivered_to
        return FIRST_DELIVERY if delivered_to is not None and offset <= delivered_to else 0

    # --- dead letters (dead_letter.py) ------------------------------------------------------

    def begin_move(self, token: Token) -> None:
        if token[2] != LOG:
            self.side.begin_move(token)
        elif token[0] == self._generation:
            self._moving = (LOG, token[3])
            self.sync()

    def settle_move(self, copied: bool) -> None:
        moving = self._moving
        if moving is None:
            self.side.settle_move(copied)
            return
        if copied:
            self._acked_before.add(moving[1])
            self._journal.append(0, moving[1], ACKED)
        self._moving = None
        self.sync()

    def record_at(self, start: tuple[int, int]) -> bytes:
        if start[0] != LOG:
            return self.side.record_at(start)
        return self._record(start[1])

    def last_record(self) -> bytes | None:
        """The newest record (dead_letter.py's check at start, whether the
        copy of a message being dead-lettered was published here): the
        log's, which every channel of the topic reaches; the side queue's
        when the log holds none."""
        topic_log = self.topic_log
        if topic_log.earliest < topic_log.latest:
            return self._record(topic_log.latest - 1)
        return self.side.last_record()

    # --- durability -----------------------------------------------------------------------

    def flush(self) -> None:
        """Acknowledgements and marks so far into the journal, no fsync (once
        per loop turn): kill -9 loses none of them."""
        self._dirty = False
        if self._closed:
            return
        self._journal_changes()
        self._journal.flush(fsync=False)

    def sync(self) -> None:
        """The journal fsynced; the meta file rewritten only when what it
        alone says changed (the journal's ``READ_TO`` carries the position)."""
        if self._closed:
            return
        self._journal_changes()
        self._journal.flush(fsync=True)
        if self._meta_fields() != self._written_fields:
            self._write_meta()
        self._unsynced_ops = 0
        if self._journal.should_compact(self._live_count()):
            self._compact()
        if self.side.needs_sync:
            self.side.sync()

    def empty(self) -> None:
        """Drop everything: the cursor moves to the end, the side queue empties."""
        self._generation += 1
        self._buffer.clear()
        self._again.clear()
        self._outstanding.clear()
        self._acked.clear()
        self._marks.clear()
        self._unjournaled.clear()
        self._acked_before.clear()
        self._marks_before.clear()
        self._delivered_to = self._journaled_delivered_to = None
        self._moving = None
        self.read_offset = self.end
        self.deferred_ahead = 0
        self._skipped.clear()
        self._write_meta()  # before the journal goes: a crash in between keeps the new position
        self._journal.remove()
        self._flushed_position = self.durable_position
        self.side.empty()

    def leave(self) -> DiskQueue:
        """The channel stops reading the log (its topic is no longer
        retained; nothing is owed): its side queue, the cursor's files gone."""
        self._closed = True
        self._journal.remove()
        remove_cursor(self.topic_log.directory, self.channel)
        return self.side

    def close(self) -> None:
        self.sync()
        self._closed = True
        self._journal.close()
        self.side.close()

    def delete(self) -> None:
        self._closed = True
        self._journal.remove()
        remove_cursor(self.topic_log.directory, self.channel)
        self.side.delete()

    # --- internals ------------------------------------------------------------------------

    def _next_from_log(self) -> tuple[bytes, Token] | None:
        """The next record read from the log, reading on past stretches
        with nothing to hand out (acknowledged before a restart, deferred)."""
        buffer = self._buffer
        while not buffer and self.read_offset < min(self.end, self.topic_log.latest):
            before = self.read_offset
            skipped_to = self._skipped_to(self.read_offset)
            if skipped_to is not None:
                self._jump_to(skipped_to)
                continue
            self._read_ahead()
            if self.read_offset == before:  # a read that failed: the next look tries again
                break
        if not buffer:
            if self.read_offset >= self.end:
                self.deferred_ahead = 0  # none can be left ahead
            return None
        sequence, offset, record = buffer.popleft()
        return record, (self._generation, sequence, LOG, offset)

    def _read_ahead(self) -> None:
        """Records from the read offset on, up to ``READ_BYTES``: each one
        outstanding from now on, handed out from the buffer; those
        acknowledged before a restart and the deferred publishes handed to
        the channel's deferred messages held as acknowledged, in order, so
        the durable position passes them only with what comes before them."""
        topic_log = self.topic_log
        if self.read_offset < topic_log.earliest:
            self.log.warning("CURSOR(%s): offsets %d to %d were removed by retention before it read them",
                             self.name, self.read_offset, topic_log.earliest - 1)
            self._jump_to(topic_log.earliest)
        stop = min(self.end, topic_log.latest, *(start for start, _ in self._skipped if start > self.read_offset))
        try:
            chunks, next_offset = topic_log.records(self.read_offset, stop, READ_BYTES)
        except CorruptChunk as error:
            skipped_to = topic_log.segment_end(self.read_offset)
            self.log.error("CURSOR(%s): offsets %d to %d skipped: %s", self.name, self.read_offset,
                           skipped_to - 1, error)
            self._jump_to(skipped_to)
            return
        except OSError as error:  # read again at the next look
            self.log.error("CURSOR(%s): reading offset %d failed: %s", self.name, self.read_offset, error)
            return
        now_ns = time.time_ns()
        for chunk in chunks:
            due_in = 0.0
            if chunk.flags & DEFERRED:
                if chunk.first_offset >= self.live_from:  # it reached the channel live
                    self.deferred_ahead = max(self.deferred_ahead - len(chunk.ids), 0)
                    self.read_offset = chunk.first_offset + len(chunk.ids)
                    continue
                due_in = seconds_until_due(chunk.timestamps[0], chunk.flags, now_ns)
            # the read offset passes each record once it is where it belongs, so a sync in
            # between (or a deferred queue that refuses a record) never skips nor repeats one
            for offset, (message_id, body, timestamp) in enumerate(
                    zip(chunk.ids, chunk.bodies, chunk.timestamps), chunk.first_offset):
                if offset in self._acked_before:
                    self._acked_before.discard(offset)
                    self._marks_before.pop(offset, None)
                    self.read_offset = offset + 1
                    self._hold_as_acknowledged(offset, journal=False)
                    continue
                record = encode_message(timestamp, 0, message_id, body)
                if due_in > 0 and self.defer is not None:
                    try:
                        self.defer(record, due_in)
                    except OSError as error:  # read again from here at the next look
                        self.log.error("CURSOR(%s): deferring offset %d failed: %s", self.name, offset, error)
                        return
                    self.read_offset = offset + 1
                    self._hold_as_acknowledged(offset, journal=True)
                    continue
                sequence = self._next_sequence
                self._next_sequence += 1
                self._outstanding.append((sequence, offset))
                if self._marks_before:
                    mark = self._marks_before.pop(offset, None)
                    if mark is not None:
                        self._marks[sequence] = (offset, mark)
                self._buffer.append((sequence, offset, record))
                self.read_offset = offset + 1
        self.read_offset = next_offset

    def _skipped_to(self, offset: int) -> int | None:
        """Where reading goes on when ``offset`` lies in a skipped range."""
        for start, stop in self._skipped:
            if start <= offset < stop:
                return stop
        return None

    def _jump_to(self, offset: int) -> None:
        """Reading goes on from ``offset`` (what lay before it is gone): what
        was known of the records skipped goes with them."""
        self.read_offset = offset
        self.deferred_ahead = 0
        self._acked_before = {acked for acked in self._acked_before if acked >= offset}
        self._marks_before = {marked: mark for marked, mark in self._marks_before.items() if marked >= offset}

    def _hold_as_acknowledged(self, offset: int, journal: bool) -> None:
        """A record read and done with at once. Behind an outstanding one
        it stays listed as acknowledged (in the journal too, when it is
        not there already) until the durable position passes it."""
        if self._outstanding:
            sequence = self._next_sequence
            self._next_sequence += 1
            self._outstanding.append((sequence, offset))
            self._acked[sequence] = offset
            if journal:
                self._unjournaled.append(sequence)
        if journal:
            self._count_op()

    def _record(self, offset: int) -> bytes:
        chunks, _ = self.topic_log.records(offset, offset + 1)
        chunk = chunks[0]
        return encode_message(chunk.timestamps[0], 0, chunk.ids[0], chunk.bodies[0])

    def _count_op(self) -> None:
        """One more acknowledgement or mark: a sync every ``sync_every`` of
        them (a failure is logged; the next one records the progress), and
        until then the owner hears once that there is something to flush."""
        self._unsynced_ops += 1
        if self._unsynced_ops >= self.sync_every:
            try:
                self.sync()
            except OSError as error:
                self.log.error("CURSOR(%s): sync failed: %s", self.name, error)
        elif not self._dirty and self.on_dirty is not None:
            self._dirty = True
            self.on_dirty(self)

    def _journal_changes(self) -> None:
        """New entries: acknowledgements still behind an outstanding record,
        marks on records still outstanding, how far first deliveries
        reached, and the durable position if it moved."""
        journal = self._journal
        delivered_to = self._delivered_to
        if delivered_to is not None and delivered_to != self._journaled_delivered_to:
            journal.append(0, delivered_to, DELIVERED_TO)
            self._journaled_delivered_to = delivered_to
        for sequence in dict.fromkeys(self._unjournaled):
            offset = self._acked.get(sequence)
            if offset is not None:
                journal.append(0, offset, ACKED)
                continue
            marked = self._marks.get(sequence)
            if marked is not None:
                journal.append(0, marked[0], marked[1])
        self._unjournaled.clear()
        position = self.durable_position
        if position != self._flushed_position:
            journal.append(0, position, READ_TO)
            self._flushed_position = position

    def _live_count(self) -> int:
        return len(self._acked) + len(self._acked_before) + len(self._marks) + len(self._marks_before)

    def _compact(self) -> None:
        """The journal rewritten with what still says something, once the
        meta file holds the durable position its ``READ_TO`` entries said."""
        self._write_meta()
        live: dict[tuple[int, int], int] = {(0, offset): mark for offset, mark in self._marks_before.items()}
        for offset, mark in self._marks.values():
            live[(0, offset)] = mark
        for offset in self._acked_before:
            live[(0, offset)] = ACKED
        for offset in self._acked.values():
            live[(0, offset)] = ACKED
        delivered_to = self._delivered_to
        if delivered_to is not None and delivered_to < self.durable_position:
            delivered_to = self._delivered_to = None
        self._journal.rewrite(live, None if delivered_to is None else (0, delivered_to))
        self._journaled_delivered_to = delivered_to
        self._flushed_position = -1  # the next flush says the position again

    def _meta_fields(self) -> tuple:
        """What the meta file says beside the position. A skipped range
        stays in it until the durable position, where a restart reads
        again, has passed it."""
        position = self.durable_position
        self._skipped = [pair for pair in self._skipped if pair[1] > position]
        return self.live_from, -1 if self._moving is None else self._moving[1], tuple(self._skipped)

    def _write_meta(self) -> None:
        """``<durable position> <live_from> <end> <record being moved or -1>``
        and each range to skip (``<start> <stop>``), durably."""
        live_from, moving, skipped = fields = self._meta_fields()
        bounds = b"".join(b" %d %d" % pair for pair in skipped)
        write_atomically(self.meta_path, b"%d %d %d %d%s\n" % (self.durable_position, live_from, self.end, moving,
                                                               bounds))
        self._written_fields = fields

    def _load(self) -> None:
        """The cursor's files as a crash or a stop left them."""
        meta_position, self.live_from, end, moving, skipped = _read_meta(self.meta_path)
        loaded = self._journal.load()
        read_to = _position(meta_position, loaded)
        latest = self.topic_log.latest
        if read_to > latest:  # the log's tail was cut (a power loss): nothing past it exists
            self.log.warning("CURSOR(%s): position %d is past the log's end %d; reading from the end",
                             self.name, read_to, latest)
            read_to = latest
        self.read_offset = read_to
        # the end was past every record the journal names, whatever the meta file last said of it
        named = [offset for _, offset in loaded.states if offset < latest]
        if loaded.delivered_to is not None:
            named.append(loaded.delivered_to[1])
        self.end = min(max(end, read_to, max(named, default=-1) + 1), latest)
        for (_, offset), state in loaded.states.items():
            if offset < read_to or offset >= latest:
                continue
            if state == ACKED:
                self._acked_before.add(offset)
            else:
                self._marks_before[offset] = state
        if loaded.delivered_to is not None and loaded.delivered_to[1] >= read_to:
            self._delivered_to = self._journaled_delivered_to = loaded.delivered_to[1]
        if moving >= read_to and moving not in self._acked_before:
            self._moving = (LOG, moving)
        self._skipped = [(max(start, read_to), stop) for start, stop in skipped if stop > read_to]
        self._written_fields = self._meta_fields()
        if loaded.read_to is not None:  # the meta file takes the position over, the journal shrinks
            self._compact()
