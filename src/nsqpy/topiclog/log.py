"""A retained topic's log: every message the topic accepted, in acceptance
order, each with an offset that is never reused.

Files, in ``<data-path>/<topic>.log/``: segment files named by their first
offset (segment.py), each a run of chunks (protocol/logchunk.py). Only the
last segment is written; a new one starts when a chunk would take it past
``segment_bytes`` (``--max-bytes-per-file``). The last segment is never
deleted, so its name keeps the next offset through any restart even when
retention has removed every record. A log deleted whole (its topic
deleted, or its retention turned off) leaves ``<topic>.log.next`` with
its next offset, where a new log of that topic begins: an offset a reader
saw is never given to another record.

Writes: a publish's records wait in memory until the end of the event
loop's turn (``flush``, called by the owner when ``on_pending`` asks, and
before it sends the turn's answers), so the turn's publishes make one
chunk and one write, and no OK goes out before its records are in the
file: kill -9 loses no acknowledged record. With ``sync_every`` 1 a
publish is written and fsynced before ``append`` returns; otherwise
fsyncs come every ``sync_every`` publishes and on the owner's timer, as
nsqd's disk queues have them. A write that fails (a full disk) keeps its
records waiting, offsets and all, for the next write; until one
succeeds, each publish is written at once and refused when it cannot be
(``append`` raises), so publishers hear of it and nothing is taken that
cannot be kept.

Reads never change the log: ``plan`` names the file ranges (and the at
most two re-encoded edge chunks: where the range starts or ends inside
one, or a first chunk bigger than the read's budget) that hold an offset
range, opened so a segment removed meanwhile still reads whole;
``records`` decodes them.
"""

import bisect
import logging
import os
from typing import Callable, Final, NamedTuple

from ..atomicfile import write_atomically
from ..protocol import logchunk
from ..protocol.logchunk import HEADER_SIZE, Records, deferred_flags
from ..diskqueue.synchold import SyncHold
from .pending import Pending
from .segment import SEGMENT_SUFFIX, Segment

CHUNK_RECORDS: Final = 8192  # a turn's records beyond this start another chunk
CHUNK_BYTES: Final = 4 * 1024 * 1024
BACKLOG_FILE: Final = "backlog"  # where a channel-less topic's backlog starts in the log
NEXT_SUFFIX: Final = ".next"  # beside a deleted log's directory: the offset its topic's next log begins at
DEFAULT_READ_BYTES: Final = 16 * 1024 * 1024
MAX_READ_BYTES: Final = 256 * 1024 * 1024


class OffsetOutOfRange(ValueError):
    """An offset before the earliest retained one or past the log's end."""


class ReadPlan(NamedTuple):
    """What a read serves: records ``first_offset`` .. ``next_offset`` - 1 as
    ``pieces``, each ``bytes`` or ``(fd, position, length)``.
    ``first_offset`` is past the asked start only where offsets are
    missing (a corrupt segment skipped)."""

    first_offset: int
    next_offset: int
    pieces: list
    size: int
    fds: list[int]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


class TopicLog:
    def __init__(self, directory: str, *, segment_bytes: int, sync_every: int,
                 logger: logging.Logger, on_pending: Callable[["TopicLog"], None] | None = None):
        self.directory = directory
        self.name = os.path.basename(directory)  # <topic>.log, as logs name it
        self.segment_bytes = segment_bytes
        self.sync_every = max(1, sync_every)
        self.logger = logger
        self.on_pending = on_pending  # asked once per turn with records waiting: call flush() soon
        self.segments: list[Segment] = []
        self.bytes = 0  # of all segments
        self.failed: OSError | None = None  # the last write's failure, until one succeeds
        self._fd = -1
        self._unsynced = 0
        self._dirty = False  # written since the last fsync
        self.sync_hold: SyncHold | None = None  # its owner's, when it may hold a due fsync back (synchold.py)
        self._closed = False
        self._pending = Pending()
        self._next_offset = 0
        os.makedirs(directory, exist_ok=True)
        self._open_segments()
        self.backlog_from = self._read_backlog()

    # --- what it holds ------------------------------------------------------------

    @property
    def earliest(self) -> int:
        """The first offset still retained (== ``latest`` when none is)."""
        for segment in self.segments:
            if segment.count:
                return segment.base
        return self._next_offset - len(self._pending) if len(self._pending) else self.segments[-1].base

    @property
    def latest(self) -> int:
        """The offset the next message will have (Kafka's log end offset)."""
        return self._next_offset

    @property
    def earliest_time(self) -> int:
        """Unix ns of the first retained record (0: none)."""
        for segment in self.segments:
            if segment.count:
                return segment.first_ts
        return self._pending.timestamps[0] if len(self._pending) else 0

    @property
    def latest_time(self) -> int:
        pending = self._pending.timestamps
        return pending[-1] if pending else max((s.max_ts for s in self.segments), default=0)

    @property
    def needs_sync(self) -> bool:
        return self._dirty or bool(len(self._pending))

    @property
    def waiting(self) -> bool:
        """Records wait in memory for the next write."""
        return len(self._pending) > 0

    # --- writing --------------------------------------------------------------------

    def append(self, ids: list[bytes], bodies: list[bytes], timestamp: int, defer_ms: int = 0) -> int:
        """Records for one publish; -> the first one's offset. Raises
        ``OSError`` when the write it waits for fails (nothing of this
        publish is then in the log). A deferred publish (DPUB, ``defer_ms``)
        is written at once in a chunk of its own, marked ``DEFERRED`` with
        its delay: a channel that replays the log skips what it received
        live, and defers the rest until the time the publish asked for."""
        if defer_ms > 0:
            return self._append_alone(ids, bodies, timestamp, defer_ms)
        first = self._next_offset
        self._pending.add(ids, bodies, timestamp)
        self._added(len(ids))
        return first

    def _append_alone(self, ids: list[bytes], bodies: list[bytes], timestamp: int, defer_ms: int) -> int:
        self.flush()  # what waits goes first, in its own chunk
        pending = self._pending
        first = self._next_offset
        pending.add(ids, bodies, timestamp)
        pending.flags = deferred_flags(defer_ms)
        self._next_offset += len(ids)
        self._unsynced += len(ids)
        try:
            self.flush()
        except OSError:
            pending.drop_last(len(ids))
            pending.flags = 0
            self._next_offset = first
            raise
        self._sync_when_due()
        return first

    def append_mpub(self, payload: bytes, count: int, timestamp: int, ids: list[bytes]) -> int:
        """An MPUB's validated body (``[count]([size][body])*``) as records."""
        first = self._next_offset
        self._pending.add_mpub(payload, count, timestamp, ids)
        self._added(count)
        return first

    def _added(self, count: int) -> None:
        pending = self._pending
        self._next_offset += count
        self._unsynced += count
        if self.sync_every == 1 or self.failed is not None:
            try:
                self.flush()
            except OSError:
                pending.drop_last(count)  # refused: their offsets are the next ones again
                self._next_offset -= count
                raise
        elif len(pending) >= CHUNK_RECORDS or pending.body_bytes >= CHUNK_BYTES:
            try:
                self.flush()
            except OSError:
                pending.drop_last(count)  # refused: nothing of this publish stays to be written later
                self._next_offset -= count
                raise
        elif len(pending) == count and self.on_pending is not None:
            self.on_pending(self)
        self._sync_when_due()

    def _sync_when_due(self) -> None:
        hold = self.sync_hold
        if self._unsynced >= self.sync_every and (hold is None or not hold.take(self)):
            self.sync()

    def flush(self) -> None:
        """Write the records waiting in memory as one chunk. Raises
        ``OSError`` when the disk refuses; they keep waiting."""
        pending = self._pending
        if not len(pending) or self._closed:
            return
        first = self._next_offset - len(pending)
        chunk = pending.chunk(first)
        active = self.segments[-1]
        try:
            if active.size and active.size + len(chunk) > self.segment_bytes:
                self._roll(first)
                active = self.segments[-1]
            self._write(chunk, active)
        except OSError as error:
            self.failed = error
            raise
        self.failed = None
        active.added(logchunk.read_header(chunk), pending.timestamps[0], max(pending.timestamps))
        self._pending = Pending()
        self.bytes += len(chunk)
        self._dirty = True

    def _write(self, chunk: bytes, active: Segment) -> None:
        data = memoryview(chunk)
        try:
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
        except OSError:
            os.ftruncate(self._fd, active.size)  # the file ends at its last whole chunk again
            raise

    def sync(self) -> None:
        """What was appended so far, written and fsynced."""
        self.flush()
        if self._dirty and self._fd >= 0:
            os.fsync(self._fd)
        self._dirty = False
        self._unsynced = 0

    def _roll(self, base: int) -> None:
        """Seal the last segment (fsynced, its index written) and start one
        at ``base``. Raises ``OSError`` with nothing changed when the new
        file cannot be made."""
        sealed = self.segments[-1]
        os.fsync(self._fd)
        self._dirty = False
        old_fd = self._fd
        self._start_segment(base)
        os.close(old_fd)
        try:  # the index only spares the next start a scan of the file
            sealed.write_index()
        except OSError as error:
            self.logger.warning("LOG(%s): cannot write the index of %s: %s", self.name,
                                os.path.basename(sealed.path), error)

    def _start_segment(self, base: int) -> None:
        segment = Segment(self.directory, base)
        self._fd = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.segments.append(segment)
        try:
            _fsync_directory(self.directory)
        except OSError:
            pass  # its name is known again from the segment before it

    # --- retention ---------------------------------------------------------------------

    def retain(self, now_ns: int, seconds: float, max_bytes: int, keep_from: int | None = None) -> int:
        """Remove the oldest segments wholly older than ``seconds`` (0: no
        limit by age) or beyond ``max_bytes`` (0: none); -> how many. The
        last segment is sealed first when all of it has aged out, so an idle
        topic's records go too; it is never removed for its size. No segment
        holding ``keep_from`` or later goes (what a channel has yet to
        receive: the owner's ``keep_from``)."""
        removed = 0

        def removable(segment: Segment) -> bool:
            return len(self.segments) > 1 and (keep_from is None or segment.end_offset <= keep_from)

        if seconds:
            cutoff = now_ns - int(seconds * 1e9)
            active = self.segments[-1]
            if active.count and active.max_ts < cutoff and not len(self._pending) and (
                    keep_from is None or keep_from >= self._next_offset):
                self._roll(self._next_offset)
            while removable(self.segments[0]) and self.segments[0].max_ts < cutoff:
                self._remove_oldest()
                removed += 1
        if max_bytes:
            while removable(self.segments[0]) and self.bytes > max_bytes:
                self._remove_oldest()
                removed += 1
        return removed

    def segment_end(self, offset: int) -> int:
        """Where the segment holding ``offset`` ends (a reader skips a
        corrupt one so)."""
        for segment in self.segments:
            if segment.base <= offset < max(segment.end_offset, segment.base + 1):
                following = [later.base for later in self.segments if later.base > offset]
                return following[0] if following else self._next_offset
        return self._next_offset

    def _remove_oldest(self) -> None:
        segment = self.segments.pop(0)
        self.bytes -= segment.size
        for path in (segment.path, segment.index_path):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    # --- reading -------------------------------------------------------------------------

    def offset_at(self, ts: int) -> int:
        """The first offset whose record was accepted at Unix ns ``ts`` or
        later (``latest`` when none was)."""
        self.flush()
        for segment in self.segments:
            if segment.max_ts < ts:
                continue
            fd = os.open(segment.path, os.O_RDONLY)
            try:
                found = segment.first_at_or_after(fd, ts)
            finally:
                os.close(fd)
            if found is not None:
                return found
        return self._next_offset

    def plan(self, start: int, end: int | None = None, max_bytes: int = DEFAULT_READ_BYTES, *,
             whole_first_chunk: bool = False) -> ReadPlan:
        """The records from offset ``start`` up to ``end`` (exclusive; the
        log's end when None) in at most ``max_bytes`` of chunks: whole chunks
        as they lie in the files, a chunk cut (re-encoded) only where the
        range starts or ends inside it, or where it is the first and does not
        fit; at least one record, so a reader never stalls on a record
        bigger than its budget. ``whole_first_chunk``: a first chunk that
        does not fit goes whole instead (nsqd's own readers decode every
        record anyway; cutting it would decode it twice).
        ``OffsetOutOfRange`` for a ``start`` before ``earliest`` or past
        ``latest``."""
        self.flush()
        earliest, latest = self.earliest, self._next_offset
        if not earliest <= start <= latest:
            raise OffsetOutOfRange(f"offset {start} is outside the retained offsets [{earliest}, {latest}]")
        end = latest if end is None else min(end, latest)
        plan = ReadPlan(start, start, [], 0, [])
        offset, budget = start, max_bytes
        first = None
        try:
            for segment in self.segments[max(bisect.bisect_right([s.base for s in self.segments], start) - 1, 0):]:
                if offset >= end or budget <= 0:
                    break
                if segment.end_offset <= offset or not segment.count:
                    continue
                offset = max(offset, segment.base)
                if offset >= end:
                    break
                fd = os.open(segment.path, os.O_RDONLY)
                plan.fds.append(fd)
                if first is None:
                    first = offset
                offset, budget = self._plan_segment(plan, segment, fd, offset, end, budget, whole_first_chunk)
                if offset < segment.end_offset:  # stopped by the range or the budget
                    break
        except BaseException:
            plan.close()
            raise
        size = sum(len(piece) if isinstance(piece, bytes) else piece[2] for piece in plan.pieces)
        return plan._replace(first_offset=start if first is None else first, next_offset=offset, size=size)

    def _plan_segment(self, plan: ReadPlan, segment: Segment, fd: int, offset: int, end: int,
                      budget: int, whole_first_chunk: bool) -> tuple[int, int]:
        """Add the pieces of ``segment`` from ``offset``; -> (next offset,
        budget left). Runs of whole chunks that fit go as one file range; a
        chunk that does not fit ends the read, unless it would be empty:
        then the chunk is cut to the records that fit (one at least)."""
        position = segment.position_of(fd, offset)[0]
        while offset < end and position < segment.size:
            header = logchunk.read_header(os.pread(fd, HEADER_SIZE, position))
            first = not plan.pieces
            room = max(budget, header.size) if first and whole_first_chunk else budget
            if header.first_offset == offset:
                stop = segment.whole_chunks_end(fd, position, position + room, end)
                if stop > position:
                    plan.pieces.append((fd, position, stop - position))
                    budget -= stop - position
                    offset = self._offset_at_position(segment, fd, stop)
                    position = stop
                    continue
            high = min(end, header.end_offset)
            fitting = _records_fitting(fd, position, header, offset, high, room)
            if fitting < high - offset and not first:
                break  # the next read starts with this chunk
            taken = max(fitting, 1)
            piece = logchunk.trimmed(os.pread(fd, header.size, position), 0, offset, offset + taken)
            plan.pieces.append(piece)
            budget -= len(piece)
            offset += taken
            if offset < header.end_offset:  # cut: by the range's end or the budget
                break
            position += header.size
        return offset, budget

    @staticmethod
    def _offset_at_position(segment: Segment, fd: int, position: int) -> int:
        if position >= segment.size:
            return segment.end_offset
        return logchunk.read_header(os.pread(fd, HEADER_SIZE, position)).first_offset

    def records(self, start: int, end: int | None = None,
                max_bytes: int = DEFAULT_READ_BYTES) -> tuple[list[Records], int]:
        """The chunks of ``plan(start, end, max_bytes)`` (its first chunk
        whole), decoded, and the offset the next read starts at."""
        plan = self.plan(start, end, max_bytes, whole_first_chunk=True)
        try:
            chunks = []
            for piece in plan.pieces:
                data = piece if isinstance(piece, bytes) else os.pread(piece[0], piece[2], piece[1])
                pos = 0
                while pos < len(data):
                    chunks.append(logchunk.decode(data, pos))
                    pos += logchunk.read_header(data, pos).size
            return chunks, plan.next_offset
        finally:
            plan.close()

    # --- a backlog kept for the first channel ------------------------------------------------

    def mark_backlog(self, offset: int) -> None:
        """The topic has no channel and its messages from ``offset`` on wait
        here for the first one (NSQ keeps them in the topic's queue): noted
        on disk before the publish is answered, once per such stretch."""
        if self.backlog_from is None:
            write_atomically(self._backlog_path, b"%d\n" % offset)
            self.backlog_from = offset

    def take_backlog(self) -> int | None:
        """Where the first channel starts (None: no backlog); forgotten."""
        offset, self.backlog_from = self.backlog_from, None
        if offset is not None:
            try:
                os.remove(self._backlog_path)
            except FileNotFoundError:
                pass
        return offset

    @property
    def _backlog_path(self) -> str:
        return os.path.join(self.directory, BACKLOG_FILE)

    def _read_backlog(self) -> int | None:
        try:
            with open(self._backlog_path, "rb") as f:
                return int(f.read().strip())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            self.logger.error("LOG(%s): cannot read %s: %s", self.name, BACKLOG_FILE, error)
            return None

    # --- opening and closing ---------------------------------------------------------------

    def _open_segments(self) -> None:
        names = sorted(name for name in os.listdir(self.directory) if name.endswith(SEGMENT_SUFFIX))
        bases = []
        for name in names:
            try:
                bases.append(int(name[:-len(SEGMENT_SUFFIX)]))
            except ValueError:
                self.logger.warning("LOG(%s): ignoring %s: not a segment name", self.name, name)
        for number, base in enumerate(bases):
            last = number == len(bases) - 1
            segment = Segment(self.directory, base)
            size = os.path.getsize(segment.path)
            if last or not segment.read_index(size):
                self._scan(segment, size, last)
            self.segments.append(segment)
            self.bytes += segment.size
        if not self.segments:
            self._next_offset = self._left_by_deleted_log()
            self._start_segment(self._next_offset)
            return
        active = self.segments[-1]
        self._fd = os.open(active.path, os.O_WRONLY | os.O_APPEND)
        self._next_offset = active.end_offset

    def _scan(self, segment: Segment, size: int, last: bool) -> None:
        fd = os.open(segment.path, os.O_RDWR)
        try:
            problem = segment.scan(fd, size)
            if problem is not None and last:
                os.ftruncate(fd, segment.size)
                os.fsync(fd)
                self.logger.warning("LOG(%s): %s: cut %d bytes after the last whole chunk (%s)",
                                    self.name, os.path.basename(segment.path), size - segment.size, problem)
            elif problem is not None:
                self.logger.error("LOG(%s): %s: offsets from %d are skipped (%s)", self.name,
                               os.path.basename(segment.path), segment.end_offset, problem)
        finally:
            os.close(fd)
        if not last and problem is None:
            segment.write_index()

    def close(self) -> None:
        """Write and fsync what waits, and index the last segment."""
        if self._closed:
            return
        try:
            self.sync()
        finally:
            self._closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _left_by_deleted_log(self) -> int:
        try:
            with open(self.directory + NEXT_SUFFIX, "rb") as f:
                return int(f.read())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as error:
            self.logger.error("LOG(%s): cannot read %s%s (%s): offsets begin at 0", self.name, self.name,
                              NEXT_SUFFIX, error)
            return 0

    def delete(self) -> None:
        """Every file of the log, and its directory; its next offset is
        kept beside it, for the topic's next log."""
        try:
            write_atomically(self.directory + NEXT_SUFFIX, b"%d\n" % self._next_offset)
        except OSError as error:
            self.logger.error("LOG(%s): cannot keep its next offset %d (%s): a new log of this topic "
                              "begins at 0", self.name, self._next_offset, error)
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for name in os.listdir(self.directory):
            os.remove(os.path.join(self.directory, name))
        os.rmdir(self.directory)


def _records_fitting(fd: int, position: int, header: logchunk.ChunkHeader, low: int, high: int,
                     room: int) -> int:
    """How many of the records [``low``, ``high``) of the chunk at
    ``position``, from ``low`` on, make a chunk of at most ``room`` bytes:
    found from its body offsets alone (the one array read), since a cut
    chunk's size follows from its count and body bytes."""
    offsets_at = logchunk.layout(header.records, header.body_size)[1]
    ends = logchunk.numbers("i", os.pread(fd, 4 * (header.records + 1), position + offsets_at))
    skip = low - header.first_offset
    return bisect.bisect_right(range(1, high - low + 1), room,
                               key=lambda count: logchunk.layout(count, ends[skip + count] - ends[skip])[3])


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
