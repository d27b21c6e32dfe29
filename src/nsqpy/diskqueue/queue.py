"""A FIFO of byte records in NSQ's go-diskqueue format, so a data directory
moves between NSQ's nsqd and ours.

Files in ``data_path``:

* ``<name>.diskqueue.<NNNNNN>.dat``: back-to-back ``[int32 BE length][payload]``
  records; a new file is started before a record would push the current one
  past ``max_bytes_per_file``.
* ``<name>.diskqueue.meta.dat``: ``"<depth>\\n<readFileNum>,<readPos>\\n<writeFileNum>,<writePos>\\n"``,
  replaced atomically (temp file, fsync, rename).

The queue does its I/O synchronously; the owner decides when to ``sync()``
(every ``sync_every`` operations here, and on a timer it runs itself), and
when to ``flush()`` acknowledgements and marks to the journal without an
fsync, which keeps them through a crash of the process (``on_dirty`` says
when there is something to flush).

Beyond go-diskqueue, a record can stay on disk after it is read:
``get_with_token()`` hands out a token, and until ``ack(token)`` the meta file
keeps the read position at the oldest unacknowledged record (and counts
everything after it in the depth), and no segment holding it is deleted. So
after a crash every record read but not acknowledged is read again.

Records acknowledged out of order (behind one still outstanding) are noted
in the queue's journal (journal.py), and skipped when read again after a
restart: a crash brings back only what was not acknowledged, so a message
finished, requeued elsewhere or dead-lettered is not handled a second time,
however many are acknowledged behind one held record. The owner can also
mark a record it handed out with a number that survives a crash
(``set_marks``, ``mark_of``: nsqd keeps a message's attempts there); a
record's first delivery (mark 1) is kept as how far first deliveries
reached, one position for them all. Go's
nsqd reads the meta file only (its depth still counts the acknowledged
records), so it reads those records again: at least once, as NSQ always was.

A record written again at the tail of its own queue (``rewrite``: nsqd's
requeue while memory is full) is released in the same step: the journal
names the pair before the copy is written, so a crash leaves one of them.

A record about to be copied to another queue and then acknowledged (a
dead-letter topic) is named first on a line ``moving <file>,<pos>``: a crash
between the copy and the acknowledgement leaves that line, so the owner can
look for the copy (``moving``, ``record_at``, ``last_record``) and settle it
(``settle_move``) rather than copy it twice.
"""

import logging
import os
import struct
from collections import deque
from typing import BinaryIO, Callable, Final, Iterator, NoReturn

from ..atomicfile import write_atomically
from .journal import ACKED, DELIVERED_TO, ENTRY, FIRST_DELIVERY, READ_TO, Journal, checksum
from .synchold import SyncHold

_LENGTH: Final = struct.Struct(">i")
RECORD_HEADER_SIZE: Final = _LENGTH.size  # the int32 length before every record
READ_BUFFER_SIZE: Final = 1 << 16  # a segment is read 64 KiB at a time (Python's default: 8 KiB)
ACKED_PREFIX: Final = "acked "  # the meta line that listed out-of-order acks before the journal
# what get_with_token hands out for ack(): (generation, sequence, file number, position)
Token = tuple[int, int, int, int]
MOVING_PREFIX: Final = "moving "

log = logging.getLogger("nsqpy.diskqueue")


class CorruptionSkipped(Exception):
    """Raised inside the queue only; the bad file is renamed and reading goes on."""


class DiskQueue:
    def __init__(
        self,
        name: str,
        data_path: str,
        *,
        max_bytes_per_file: int,
        min_msg_size: int,
        max_msg_size: int,
        sync_every: int,
        logger: logging.Logger | None = None,
    ):
        self.name = name
        self.data_path = data_path
        self.max_bytes_per_file = max_bytes_per_file
        self.min_msg_size = min_msg_size
        self.max_msg_size = max_msg_size
        self.sync_every = max(1, sync_every)
        self.log = logger or log

        self.depth = 0
        self.read_file_num = 0
        self.read_pos = 0
        self.write_file_num = 0
        self.write_pos = 0

        self._writer: BinaryIO | None = None
        self._reader: BinaryIO | None = None
        self._read_file_size = -1  # size of a read file older than the write file
        self._unsynced_ops = 0
        self.unsynced_writes = 0  # records written since the last fsync: lost by a crash
        self.sync_hold: SyncHold | None = None  # its owner's, when it may hold a due fsync back (synchold.py)
        self._closed = False
        # records read but not acknowledged, in read order: [sequence, file number, position]
        self._outstanding: deque[tuple[int, int, int]] = deque()
        # acknowledged behind an outstanding record: sequence -> (file number, position)
        self._acked: dict[int, tuple[int, int]] = {}
        # acknowledged before the last restart and not read again yet: skipped when read
        self._acked_before: set[tuple[int, int]] = set()
        # marks set on outstanding records: sequence -> (file number, position, mark)
        self._marks: dict[int, tuple[int, int, int]] = {}
        # marks set before the last restart on records not read again yet
        self._marks_before: dict[tuple[int, int], int] = {}
        # outstanding records acknowledged out of order or marked since the
        # journal was last written, by sequence: their entries are made at
        # the next flush or sync, from what is still true of them then
        self._unjournaled: list[int] = []
        # the furthest record marked FIRST_DELIVERY (records are marked in the
        # order they are read), and the last such position the journal holds
        self._delivered_to: tuple[int, int] | None = None
        self._journaled_delivered_to: tuple[int, int] | None = None
        self._journal = Journal(os.path.join(data_path, f"{name}.diskqueue.journal.dat"))
        # a record being copied elsewhere before its ack (begin_move); after a
        # restart, one whose copy may or may not have been made (settle_move)
        self.moving: tuple[int, int] | None = None
        self._next_sequence = 0
        self._last_record_start = (0, 0)
        self._generation = 0  # bumped by empty(): tokens from before are void
        self._oldest_file = 0  # lowest segment number that may still exist
        self._written_metadata = ""  # what the meta file says since this queue last wrote it
        # called once when acknowledgements or marks wait for flush(), until it runs
        self.on_dirty: Callable[[DiskQueue], None] | None = None
        self._dirty = False
        self._load_metadata()
        self._flushed_position = self._durable_position()[:2]

    # --- paths ----------------------------------------------------------

    def file_name(self, number: int) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.{number:06d}.dat")

    @property
    def metadata_file_name(self) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.meta.dat")

    # --- public API -------------------------------------------------------

    def __len__(self) -> int:
        return self.depth

    @property
    def needs_sync(self) -> bool:
        return self._unsynced_ops > 0

    def put(self, data: bytes) -> None:
        """Append one record. Raises ``OSError`` when the disk refuses it; the
        queue is left as it was before the call."""
        self._write([data])
        self._count_op()

    def put_many(self, records: list[bytes]) -> None:
        """Append records, each segment's share in one write, and count them as
        one batch, so --sync-every=1 costs one fsync for a whole MPUB (group
        commit), not one per message. Raises ``OSError`` when the disk refuses
        a write: the records from that write on are not queued."""
        self._write(records)
        self._unsynced_ops += len(records) - 1
        self._count_op()

    def rewrite(self, token: Token, data: bytes) -> None:
        """The record behind ``token`` written again at the tail as ``data``
        (nsqd: a requeue while memory is full) and acknowledged, as one
        step: the journal names both before the copy is written, so after a
        crash anywhere in between exactly one of them is read again; one
        sync towards ``sync_every``, not two. Raises ``OSError`` when the
        disk refuses: the record stays as it was."""
        generation, _, number, position = token
        if generation != self._generation:  # emptied since: nothing to release
            self.put(data)
            return
        size = len(data)
        copy_at = (self.write_file_num, self.write_pos)
        if self._starts_new_file(self.write_pos, size):
            copy_at = (self.write_file_num + 1, 0)
        # with sync_every=1 the pair is fsynced too: a power loss must not keep the copy without it
        self._journal.write_move((number, position), copy_at, checksum(data), fsync=self.sync_every == 1)
        self._write([data])
        self.ack(token)

    def _starts_new_file(self, position: int, size: int) -> bool:
        """Whether a record of ``size`` bytes written at ``position`` goes to a new segment."""
        return position > 0 and position + RECORD_HEADER_SIZE + size > self.max_bytes_per_file

    def _write(self, records: list[bytes]) -> None:
        for data in records:
            size = len(data)
            if not self.min_msg_size <= size <= self.max_msg_size:
                raise ValueError(f"invalid record size {size}")
        parts: list[bytes] = []
        position = self.write_pos
        for data in records:
            size = len(data)
            if self._starts_new_file(position, size):
                self._write_segment_part(parts, position)
                parts = []
                self._roll_write_file()
                position = 0
            parts.append(_LENGTH.pack(size))
            parts.append(data)
            position += RECORD_HEADER_SIZE + size
        self._write_segment_part(parts, position)

    def _write_segment_part(self, parts: list[bytes], end: int) -> None:
        """``parts`` (length, record, ...) at the write position, in one write."""
        if not parts:
            return
        writer = self._writer
        if writer is None:
            if not self._written_metadata and not os.path.exists(self.metadata_file_name):
                # a journal is read only beside its meta file (_load_metadata): a new
                # queue has one before its first record, or the acknowledgements
                # flushed before its first sync would count for nothing after a crash
                self._write_metadata()
            writer = self._writer = self._open_append(self.file_name(self.write_file_num))
            writer.seek(self.write_pos)
        data = memoryview(b"".join(parts))
        try:
            while data:  # unbuffered: a short write (a full disk) is seen here, and truncated away below
                written = writer.write(data)  # a name of its own: mypyc evaluates a call in a slice twice
                data = data[written:]
        except OSError:
            # leave the file where the last good record ended
            self._close_writer(truncate_to=self.write_pos)
            raise
        count = len(parts) // 2
        self.write_pos = end
        self.depth += count
        self.unsynced_writes += count

    def get(self) -> bytes | None:
        """Pop the oldest record for good, or None when the queue is empty."""
        taken = self.get_with_token()
        if taken is None:
            return None
        data, token = taken
        self.ack(token)
        return data

    def get_with_token(self) -> tuple[bytes, Token] | None:
        """The oldest record and a token for ``ack()``; until then a crash
        brings it back. None when the queue is empty."""
        data = self._get()
        if data is None:
            return None
        sequence = self._next_sequence
        self._next_sequence += 1
        start = number, position = self._last_record_start
        self._outstanding.append((sequence, number, position))
        if self._marks_before:
            mark = self._marks_before.pop(start, None)
            if mark is not None:
                self._marks[sequence] = (number, position, mark)
        # no sync: the durable position and depth are what they were (the
        # record is outstanding now)
        return data, (self._generation, sequence, number, position)

    def set_marks(self, marks: list[tuple[Token, int]]) -> None:
        """Attach a number to each outstanding record (nsqd: its attempts),
        durable at the next sync, counted as one operation towards it;
        after a crash ``mark_of`` gives it back when the record is read again.
        A ``FIRST_DELIVERY`` past those before only moves how far first
        deliveries reached: the caller marks records in the order it read them."""
        unjournaled = self._unjournaled
        delivered_to = self._delivered_to
        furthest_number, furthest_position = delivered_to if delivered_to is not None else (-1, -1)
        moved = False
        for (generation, sequence, number, position), mark in marks:
            if generation == self._generation:
                if mark == FIRST_DELIVERY and (number > furthest_number
                                               or (number == furthest_number and position > furthest_position)):
                    furthest_number, furthest_position, moved = number, position, True
                    continue
                self._marks[sequence] = (number, position, mark)
                unjournaled.append(sequence)
        if moved:  # compared as numbers: no tuple per message
            self._delivered_to = (furthest_number, furthest_position)
        self._count_op_quietly()

    def mark_of(self, token: Token) -> int:
        """The last mark set on the record behind ``token``, before or since a restart (0: none)."""
        generation, sequence, number, position = token
        if generation != self._generation:
            return 0
        marked = self._marks.get(sequence)
        if marked is not None:
            return marked[2]
        delivered_to = self._delivered_to
        if delivered_to is None or number > delivered_to[0] or (
                number == delivered_to[0] and position > delivered_to[1]):
            return 0
        return FIRST_DELIVERY

    def ack(self, token: Token) -> None:
        """The record behind ``token`` is delivered or safely elsewhere."""
        generation, sequence, number, position = token
        if generation != self._generation:
            return
        outstanding = self._outstanding
        if self.moving is not None and self.moving == (number, position):
            self.moving = None
            self._unsynced_ops = self.sync_every - 1  # the ack below syncs: the move is over for good
        if self._marks:
            self._marks.pop(sequence, None)
        if outstanding and outstanding[0][0] == sequence:
            outstanding.popleft()
            acked = self._acked
            while outstanding and outstanding[0][0] in acked:
                del acked[outstanding.popleft()[0]]
        else:
            self._acked[sequence] = (number, position)
            self._unjournaled.append(sequence)
        self._count_op_quietly()

    def begin_move(self, token: Token) -> None:
        """The record behind ``token`` is about to be copied to another queue,
        then acknowledged: recorded durably now (raises ``OSError`` if the disk
        refuses), so a crash in between can be settled after the restart."""
        generation, _, number, position = token
        if generation == self._generation:
            self.moving = (number, position)
            self.sync()

    def settle_move(self, copied: bool) -> None:
        """After a restart, the move interrupted by the crash: ``copied`` means
        the copy is complete, so the record counts as acknowledged; otherwise
        it is read again like any unacknowledged record."""
        if self.moving is None:
            return
        if copied:
            self._acked_before.add(self.moving)
            self._journal.append(*self.moving, ACKED)
            self.depth -= 1
        self.moving = None
        self.sync()

    def record_at(self, start: tuple[int, int]) -> bytes:
        """The record that begins at ``start`` (file number, position)."""
        number, position = start
        with open(self.file_name(number), "rb") as f:
            f.seek(position)
            size = _LENGTH.unpack(f.read(RECORD_HEADER_SIZE))[0]
            return f.read(size)

    def _holds(self, start: tuple[int, int], copy_checksum: int) -> bool:
        """Whether the record at ``start`` (within the written range) is the
        copy a move pair names."""
        try:
            return checksum(self.record_at(start)) == copy_checksum
        except (OSError, struct.error):
            return False

    def last_record(self) -> bytes | None:
        """The newest record not yet read, or None (its segment is scanned from
        the read position or its start: fine for a check made once at startup)."""
        if not self.depth:
            return None
        number, end = self.write_file_num, self.write_pos
        if end == 0:  # just rolled: the newest record ends the previous segment
            number -= 1
            try:
                end = os.path.getsize(self.file_name(number))
            except FileNotFoundError:
                return None
        position = self.read_pos if number == self.read_file_num else 0
        last = None
        with open(self.file_name(number), "rb") as f:
            f.seek(position)
            while position < end:
                size = _LENGTH.unpack(f.read(RECORD_HEADER_SIZE))[0]
                last = f.read(size)
                position += RECORD_HEADER_SIZE + size
        return last

    def unread(self) -> Iterator[bytes]:
        """Every record written and not yet read, oldest first, without
        taking them (the queue does not change): what a replicated nsqd
        copies to a new peer. The files are opened now, with the end of
        what is written now, and read as the iterator is: later records
        are not in it, and a file the queue reads past and deletes
        meanwhile is still read whole (an open file outlives its name).
        Stops at a damaged record, as reading it would."""
        if self._writer is not None:
            self._writer.flush()
        spans: list[tuple[BinaryIO, int, int, int]] = []  # (file, its number, start, end)
        number, position = self.read_file_num, self.read_pos
        while number <= self.write_file_num:
            try:
                f = open(self.file_name(number), "rb")
            except FileNotFoundError:
                number, position = number + 1, 0
                continue
            end = self.write_pos if number == self.write_file_num else os.fstat(f.fileno()).st_size
            spans.append((f, number, position, end))
            number, position = number + 1, 0
        return _read_spans(spans, self.min_msg_size, self.max_msg_size, set(self._acked_before))

    @property
    def unacked_count(self) -> int:
        return len(self._outstanding) - len(self._acked)

    def _durable_position(self) -> tuple[int, int, int]:
        """(file, position, depth) that a restart must resume from."""
        if self._outstanding:
            sequence, number, position = self._outstanding[0]
            return number, position, self.depth + (self._next_sequence - sequence)
        return self.read_file_num, self.read_pos, self.depth

    def _release_files(self) -> None:
        """Delete segments that are fully read and hold nothing unacknowledged
        (after a sync: the meta file no longer points into them)."""
        durable_file = self._durable_position()[0]
        while self._oldest_file < min(durable_file, self.read_file_num):
            self._remove(self.file_name(self._oldest_file))
            self._oldest_file += 1

    def _get(self) -> bytes | None:
        while self.depth > 0:
            if self.read_file_num == self.write_file_num and self.read_pos >= self.write_pos:
                # everything written has been read: the depth was wrong (a skipped
                # bad file held records), not the data
                self.log.error("diskqueue(%s): depth %d but nothing left to read; corrected to 0",
                               self.name, self.depth)
                self.depth = 0
                break
            try:
                data = self._read_one()
            except CorruptionSkipped:
                continue
            if self._acked_before and self._last_record_start in self._acked_before:
                self._pass_over_acked(self._last_record_start)
                continue
            return data
        return None

    def _pass_over_acked(self, start: tuple[int, int]) -> None:
        """A record acknowledged before the restart, read again: handled as
        read and acknowledged at once. Behind an outstanding record it stays
        listed (and counted in the meta file's depth, as Go's reader expects)."""
        self._acked_before.discard(start)
        self._marks_before.pop(start, None)
        self.depth += 1  # not counted since the restart (_load_journal); _read_one took it off
        if self._outstanding:
            sequence = self._next_sequence
            self._next_sequence += 1
            self._outstanding.append((sequence, *start))
            self._acked[sequence] = start

    def flush(self) -> None:
        """Acknowledgements and marks since the last flush, written to the
        journal without an fsync (with the read position they reached, as a
        ``READ_TO`` entry): after this a crash of the process (kill -9, not
        a power loss) loses none of them. Raises ``OSError`` when the disk
        refuses; they are written again at the next flush or sync."""
        self._dirty = False
        if self._closed:
            return
        self._journal_changes()
        self._journal_read_to()
        self._journal.flush(fsync=False)

    def _journal_changes(self) -> bool:
        """The journal's entries for what changed since it was last written:
        each acknowledgement still behind an outstanding record, and the
        last mark of each record still outstanding. A record acknowledged
        since, in order or by its gap closing, costs no entry: the read
        position passes it (under a steady stream of deliveries and FINs,
        most of them). Returns whether one was left out for that reason."""
        delivered_to = self._delivered_to
        if delivered_to is not None and delivered_to != self._journaled_delivered_to:
            self._journal.append(delivered_to[0], delivered_to[1], DELIVERED_TO)
            self._journaled_delivered_to = delivered_to
        unjournaled = self._unjournaled
        if not unjournaled:
            return False
        acked, marks = self._acked, self._marks
        entries: list[bytes] = []
        passed = False
        for sequence in dict.fromkeys(unjournaled):
            start = acked.get(sequence)
            if start is not None:
                entries.append(ENTRY.pack(start[0], start[1], ACKED))
                continue
            marked = marks.get(sequence)
            if marked is not None:
                entries.append(ENTRY.pack(marked[0], marked[1], marked[2]))
            else:
                passed = True
        unjournaled.clear()
        self._journal.extend(entries)
        return passed

    def _journal_read_to(self) -> None:
        """A ``READ_TO`` entry, if the durable read position moved since the
        journal or the meta file last said it."""
        position = self._durable_position()[:2]
        if position != self._flushed_position:
            self._journal.append(position[0], position[1], READ_TO)
            self._flushed_position = position

    def sync(self) -> None:
        """Make durable what changed since the last sync, and only that: the
        segment written to, the journal's new entries, a meta file that says
        something new (an in-order FIN moves the read position; a delivery
        mark only adds a journal entry).

        In this order, so that a crash between any two steps loses nothing:
        records, then what the journal adds, then the meta file's new read
        position; only once that is durable may the journal shrink to what
        is still live (its old entries guard the old read position) and
        fully read segments go."""
        self._sync_writer()
        journal = self._journal
        if self._journal_changes():
            # acknowledgements that needed an entry when made and need none now:
            # the position that covers them goes first, before the meta file has it
            self._journal_read_to()
        journal.flush()
        self._write_metadata()
        self._flushed_position = self._durable_position()[:2]
        self._dirty = False
        self._unsynced_ops = 0
        self.unsynced_writes = 0
        if journal.should_compact(self._live_count()):
            self._compact_journal()
        self._release_files()

    def empty(self) -> None:
        """Drop every record; files are removed and numbering moves on."""
        self._close_reader()
        self._close_writer()
        for number in range(self._oldest_file, self.write_file_num + 1):
            self._remove(self.file_name(number))
        self.write_file_num += 1
        self.write_pos = 0
        self.read_file_num = self._oldest_file = self.write_file_num
        self.read_pos = 0
        self.depth = 0
        self._outstanding.clear()
        self._acked.clear()
        self._acked_before.clear()
        self._marks.clear()
        self._marks_before.clear()
        self._unjournaled.clear()
        self._delivered_to = self._journaled_delivered_to = None
        self._journal.remove()
        self.moving = None
        self._generation += 1
        self.sync()

    def delete(self) -> None:
        self.empty()
        self._remove(self.metadata_file_name)
        self._closed = True

    def close(self) -> None:
        if self._closed:
            return
        self.sync()
        if not self._live_count():
            self._journal.remove()  # a clean stop leaves no journal that says nothing
        self._journal.close()
        self._close_reader()
        self._close_writer()
        self._closed = True

    # --- internals ----------------------------------------------------------

    def _count_op(self) -> None:
        self._unsynced_ops += 1
        if self._unsynced_ops >= self.sync_every:
            hold = self.sync_hold
            if hold is None or not hold.take(self):
                self.sync()

    def _open_append(self, path: str) -> BinaryIO:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        return os.fdopen(fd, "wb", buffering=0)

    def _sync_writer(self) -> None:
        if self._writer is not None and self.unsynced_writes:
            self._writer.flush()
            os.fsync(self._writer.fileno())

    def _roll_write_file(self) -> None:
        self._sync_writer()
        self._close_writer()
        if self.read_file_num == self.write_file_num:
            self._read_file_size = self.write_pos  # complete now: its reader moves on at its end
        self.write_file_num += 1
        self.write_pos = 0
        self._write_metadata()

    def _close_writer(self, truncate_to: int | None = None) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            if truncate_to is not None:
                writer.truncate(truncate_to)
            writer.close()
        except OSError:
            pass

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _open_reader(self) -> BinaryIO:
        path = self.file_name(self.read_file_num)
        try:
            reader = open(path, "rb", buffering=READ_BUFFER_SIZE)
        except FileNotFoundError:
            self._skip_file(f"missing {path}")
        reader.seek(self.read_pos)
        self._reader = reader
        self._read_file_size = os.fstat(reader.fileno()).st_size if self.read_file_num < self.write_file_num else -1
        return reader

    def _read_one(self) -> bytes:
        reader = self._reader
        if reader is None:
            reader = self._open_reader()
        while 0 <= self._read_file_size <= self.read_pos:  # read to its end before the writer rolled
            self._finish_read_file()
            reader = self._open_reader()
        start = (self.read_file_num, self.read_pos)
        header = reader.read(4)
        if len(header) < RECORD_HEADER_SIZE:
            self._skip_file(f"truncated record header at {self.read_pos}")
        size = _LENGTH.unpack(header)[0]
        if not self.min_msg_size <= size <= self.max_msg_size:
            self._skip_file(f"invalid record size {size} at {self.read_pos}")
        data = reader.read(size)
        if len(data) < size:
            self._skip_file(f"truncated record at {self.read_pos}")
        self.read_pos += RECORD_HEADER_SIZE + size
        self.depth -= 1
        self._last_record_start = start
        if 0 <= self._read_file_size <= self.read_pos:
            self._finish_read_file()
        return data

    def _count_op_quietly(self) -> None:
        """Count an ack or a mark; a failed sync here is logged, not raised:
        the record is already taken, and the next sync records the progress.
        Without a sync, the owner hears there is something to flush."""
        try:
            self._count_op()
        except OSError as error:
            self.log.error("diskqueue(%s): sync failed: %s", self.name, error)
        if self._unsynced_ops and not self._dirty:
            self._dirty = True
            if self.on_dirty is not None:
                self.on_dirty(self)

    def _finish_read_file(self) -> None:
        """Move on to the next segment; this one goes at a sync once nothing
        read from it is outstanding (``_release_files``)."""
        self._close_reader()
        self._read_file_size = -1
        self.read_file_num += 1
        self.read_pos = 0

    def _skip_file(self, reason: str) -> NoReturn:
        """Set a bad read file aside as ``.bad`` and go on with the next one."""
        path = self.file_name(self.read_file_num)
        self._close_reader()
        if os.path.exists(path):
            os.replace(path, path + ".bad")
        self.log.error("diskqueue(%s): %s in %s; renamed it .bad and skipped it", self.name, reason, path)
        if self.read_file_num == self.write_file_num:
            self._close_writer()
            self.write_file_num += 1
            self.write_pos = 0
        skipped_file = self.read_file_num
        self._acked_before = {start for start in self._acked_before if start[0] != skipped_file}
        self._marks_before = {start: mark for start, mark in self._marks_before.items() if start[0] != skipped_file}
        self.read_file_num += 1
        self.read_pos = 0
        if self.read_file_num == self.write_file_num and self.write_pos == 0:
            self.depth = 0
        raise CorruptionSkipped(reason)

    def _remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def _load_metadata(self) -> None:
        # A new queue opens no file until it is written: asking with stat()
        # first lets a topic be created while the process is out of descriptors.
        if not os.path.exists(self.metadata_file_name):
            self._recover_tail()  # a first segment without meta: count what it holds
            self._journal.remove()  # one without its meta file (a queue deleted elsewhere) says nothing
            return
        try:
            with open(self.metadata_file_name) as f:
                text = f.read()
        except FileNotFoundError:
            self._recover_tail()
            self._journal.remove()
            return
        try:
            depth_line, read_line, write_line, *rest = text.split("\n")
            self.depth = int(depth_line)
            self.read_file_num, self.read_pos = map(int, read_line.split(","))
            self.write_file_num, self.write_pos = map(int, write_line.split(","))
        except ValueError:
            # positions unknown: guess nothing, overwrite nothing; start after every segment
            existing = [int(n.split(".")[-2]) for n in os.listdir(self.data_path)
                        if n.startswith(f"{self.name}.diskqueue.") and n.endswith(".dat")
                        and n.split(".")[-2].isdigit()]
            self.read_file_num = self.write_file_num = self._oldest_file = max(existing, default=-1) + 1
            self.depth = self.read_pos = self.write_pos = 0
            os.replace(self.metadata_file_name, self.metadata_file_name + ".bad")
            self.log.error("diskqueue(%s): unreadable metadata %r renamed .bad; starting empty at segment "
                           "%d, older segments left in place", self.name, text[:80], self.write_file_num)
            self._journal.remove()
            return
        self._oldest_file = self.read_file_num
        listed: set[tuple[int, int]] = set()
        for line in rest:
            if line.startswith(ACKED_PREFIX):
                listed = self._listed_acks(line)
            elif line.startswith(MOVING_PREFIX):
                self._load_moving(line)
        self._recover_tail()
        self._load_journal(listed)

    def _load_moving(self, line: str) -> None:
        try:
            number, position = map(int, line[len(MOVING_PREFIX):].split(","))
        except ValueError:
            return  # the record is read again: at least once
        if (self.read_file_num, self.read_pos) <= (number, position) < (self.write_file_num, self.write_pos):
            self.moving = (number, position)

    @staticmethod
    def _listed_acks(line: str) -> set[tuple[int, int]]:
        """The meta line that listed out-of-order acks before the journal
        (a data dir from an earlier nsqpy); unreadable: none."""
        listed: set[tuple[int, int]] = set()
        try:
            for item in line[len(ACKED_PREFIX):].split():
                number, position = item.split(",")
                listed.add((int(number), int(position)))
        except ValueError:
            listed.clear()
        return listed

    def _load_journal(self, listed: set[tuple[int, int]]) -> None:
        """What the journal (and an old meta line, ``listed``) says of the
        records not read yet: acknowledged ones are skipped when read and
        not counted in the depth; marks come back with their records. An
        acknowledgement for a record outside the queue, or more of them than
        the depth, means the journal does not fit this queue: its
        acknowledgements are ignored (those records are read again, at least
        once) and said so."""
        loaded = self._journal.load()
        states = loaded.states
        for start in listed:
            states[start] = ACKED
        write_to = (self.write_file_num, self.write_pos)
        read_from, skipped = (self.read_file_num, self.read_pos), 0
        if loaded.read_to is not None and read_from < loaded.read_to:
            between = self._records_between(read_from, loaded.read_to) if loaded.read_to <= write_to else None
            if between is None:  # past the end, or not where a record starts: not this queue's, or stale
                self._drop_misfit_journal(0)
                return
            read_from, skipped = loaded.read_to, between
        for start, copy_at, copy_checksum in loaded.moves:
            if read_from <= start < copy_at < write_to and self._holds(copy_at, copy_checksum):
                states[start] = ACKED  # its copy is complete: the requeue happened
        acked: set[tuple[int, int]] = set()
        marks: dict[tuple[int, int], int] = {}
        misfits = 0
        for start, state in states.items():
            if start < read_from:
                continue  # read and acknowledged in order since
            if start >= write_to:
                misfits += 1
            elif state == ACKED:
                acked.add(start)
            else:
                marks[start] = state
        if misfits or len(acked) > self.depth - skipped:
            self._drop_misfit_journal(len(acked))
            return
        delivered_to = loaded.delivered_to
        if delivered_to is not None and (delivered_to < read_from or delivered_to >= write_to
                                         or self._records_between(read_from, delivered_to) is None):
            delivered_to = None  # read past since, or not where a record of this queue starts
        # the journal fits: the read position it reached, then what it says of the records after it
        self.read_file_num, self.read_pos = read_from
        self.depth -= skipped
        if self.moving is not None and (self.moving < read_from or self.moving in acked):
            self.moving = None  # acknowledged, in order or not: the move is over
        self._marks_before = marks
        self._acked_before = acked
        self._delivered_to = self._journaled_delivered_to = delivered_to
        self.depth -= len(acked)
        if listed:  # into the journal, so the meta line can go
            for number, position in listed:
                self._journal.append(number, position, ACKED)
        if loaded.read_to is not None:
            # the meta file takes the position over, then the journal is rewritten without
            # it: an old READ_TO left in the file could name records written later
            self._write_metadata()
            self._compact_journal()

    def _drop_misfit_journal(self, acknowledgements: int) -> None:
        self.log.error("diskqueue(%s): ignoring a journal that does not fit the queue (%d acknowledged "
                       "records); they will be read again", self.name, acknowledgements)
        self._marks_before.clear()
        self._journal.remove()  # left in place, it could name records written later

    def _records_between(self, start: tuple[int, int], end: tuple[int, int]) -> int | None:
        """How many records lie from ``start`` up to ``end``; None when ``end``
        is not where a record starts (or a segment between is missing)."""
        count = 0
        number, position = start
        while (number, position) < end:
            try:
                with open(self.file_name(number), "rb") as f:
                    f.seek(position)
                    stop = end[1] if number == end[0] else os.fstat(f.fileno()).st_size
                    while position < stop:
                        size = _LENGTH.unpack(f.read(RECORD_HEADER_SIZE))[0]
                        f.seek(size, os.SEEK_CUR)
                        position += RECORD_HEADER_SIZE + size
                        count += 1
            except (FileNotFoundError, struct.error):
                return None
            if number == end[0]:
                return count if position == end[1] else None
            number, position = number + 1, 0
        return count

    def _recover_tail(self) -> None:
        """Records written after the last meta update (a crash between writing
        and syncing) are complete in the file but not counted: count them back
        in, and cut off a torn last record. NSQ starts a new file and loses
        them; after kill -9 they are in the page cache and were acknowledged."""
        path = self.file_name(self.write_file_num)
        if not os.path.exists(path):
            return
        try:
            with open(path, "rb") as f:
                f.seek(self.write_pos)
                tail = f.read()
        except FileNotFoundError:
            return
        pos = 0
        recovered = 0
        while len(tail) - pos >= RECORD_HEADER_SIZE:
            size = _LENGTH.unpack_from(tail, pos)[0]
            if not self.min_msg_size <= size <= self.max_msg_size or len(tail) - pos - RECORD_HEADER_SIZE < size:
                break
            pos += RECORD_HEADER_SIZE + size
            recovered += 1
        if recovered:
            self.log.warning("diskqueue(%s): recovered %d records written after the last sync", self.name,
                             recovered)
            self.write_pos += pos
            self.depth += recovered
        if pos < len(tail):
            self.log.warning("diskqueue(%s): cut %d bytes of a torn write off %s", self.name, len(tail) - pos,
                             path)
            os.truncate(path, self.write_pos)

    def _live_count(self) -> int:
        return len(self._acked) + len(self._acked_before) + len(self._marks) + len(self._marks_before)

    def _compact_journal(self) -> None:
        """The journal rewritten with what still says something: the live
        entries, and how far first deliveries reached if records there are
        still outstanding or unread."""
        delivered_to = self._delivered_to
        if delivered_to is not None and delivered_to < self._durable_position()[:2]:
            delivered_to = self._delivered_to = None
        self._journal.rewrite(self._live_journal(), delivered_to)
        self._journaled_delivered_to = delivered_to

    def _live_journal(self) -> dict[tuple[int, int], int]:
        """The journal entries that still say something: acknowledged records
        not yet passed by the durable position, and marks on records not
        yet acknowledged."""
        live: dict[tuple[int, int], int] = dict(self._marks_before)
        for number, position, mark in self._marks.values():
            live[(number, position)] = mark
        for start in self._acked_before:
            live[start] = ACKED
        for start in self._acked.values():
            live[start] = ACKED
        return live

    def _write_metadata(self) -> None:
        read_file, read_pos, depth = self._durable_position()
        text = f"{depth + len(self._acked_before)}\n{read_file},{read_pos}\n{self.write_file_num},{self.write_pos}\n"
        if self.moving is not None:
            text += f"{MOVING_PREFIX}{self.moving[0]},{self.moving[1]}\n"
        if text != self._written_metadata:
            write_atomically(self.metadata_file_name, text.encode())
            self._written_metadata = text


def _read_spans(spans: list[tuple[BinaryIO, int, int, int]], min_size: int, max_size: int,
                acked: set[tuple[int, int]]) -> Iterator[bytes]:
    """The records of ``spans`` (DiskQueue.unread), but those ``acked``;
    every file is closed once read, or when the reading stops early."""
    try:
        for f, number, position, end in spans:
            f.seek(position)
            while position < end:
                header = f.read(RECORD_HEADER_SIZE)
                size = _LENGTH.unpack(header)[0] if len(header) == RECORD_HEADER_SIZE else -1
                if not min_size <= size <= max_size:
                    return
                data = f.read(size)
                if len(data) < size:
                    return
                if (number, position) not in acked:
                    yield data
                position += RECORD_HEADER_SIZE + size
            f.close()
    finally:
        for f, _, _, _ in spans:
            f.close()
