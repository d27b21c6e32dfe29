"""What happened to a disk queue's records after they were written, kept
beside the queue as an append-only file, ``<name>.diskqueue.journal.dat``.

Each entry is 16 bytes: ``[int32 file number][int64 position][int32 state]``
naming one record by where it starts. State ``ACKED`` (-1) says the record
was acknowledged out of order (behind one still outstanding); a state of 0
or more is a mark the owner set on it (nsqd: how many times the message was
delivered). The last entry for a record wins.

State ``READ_TO`` (-3) names the oldest record not yet acknowledged, so
everything before it is: the read position the meta file will hold after
the next sync. The queue writes it, with the other new entries, as soon as
its owner asks (``DiskQueue.flush``: nsqd, once per loop turn), without an
fsync: a crash of the process then loses no acknowledgement it made, while
a power loss is covered from the next sync on, as before.

State ``DELIVERED_TO`` (-4) names the furthest record handed out for the
first time (nsqd: delivered with attempts 1). Records are handed out in
the order they are read, so every record from the read position up to
and including it was handed out at least once: after a crash, one there
with no entry of its own comes back with mark 1, as if it had its own.
So the first delivery of a record, the commonest mark by far, costs no
entry; later ones (a redelivery from disk) have their own.

A pair of entries says a record is being written again at the tail (nsqd:
a requeue while memory is full): ``[file][position][MOVED]`` for the
record, then ``[file][position][checksum]`` for where its copy starts and
the low 31 bits of the copy's CRC-32. The pair is written before the copy
and needs no entry after it: when loading, a complete copy with that
checksum means the record is acknowledged, whatever came after the pair
for it; no copy (a crash before it was written, a disk that refused it)
means the pair says nothing. So a crash anywhere in a requeue leaves
exactly one of the two records, for the price of one sync.

Why a file of its own and not lines in the meta file: the meta file is
rewritten whole at every sync, so a list there costs each sync as much as
the list is long. Here each acknowledgement or mark costs at most one entry,
appended at the next flush or sync (none once the read position has passed
its record), and the meta file keeps go-diskqueue's three lines (Go's
nsqd never reads this file: it reads those records again, at least once).

The file only grows until the queue compacts it: once it holds more than
twice the live entries plus ``COMPACT_SLACK``, the queue rewrites it with the
live entries only (atomically), so the work per entry stays O(1) amortised
and the file stays within a constant factor of what is live. Entries are
never wrong once written: an acknowledgement is final, a mark only grows,
and records before the queue's read position are ignored when loading. So a
lost compaction or a torn last entry (cut off when loading) loses nothing.
"""

import os
import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Final

from ..atomicfile import write_atomically

ENTRY: Final = struct.Struct(">iqi")
ACKED: Final = -1
MOVED: Final = -2
READ_TO: Final = -3
DELIVERED_TO: Final = -4
FIRST_DELIVERY: Final = 1  # the mark ``DELIVERED_TO`` stands for
COMPACT_SLACK: Final = 65536  # entries (1 MiB) appended before a compaction is considered

Start = tuple[int, int]  # where a record begins: (file number, position)
Move = tuple[Start, Start, int]  # a record, where its copy starts, the copy's checksum


@dataclass
class Loaded:
    """What a journal file says (``Journal.load``)."""
    states: dict[Start, int]  # each record's last state
    moves: list[Move]
    read_to: Start | None  # the furthest READ_TO
    delivered_to: Start | None  # the furthest DELIVERED_TO


def whole_entries(data: bytes) -> list[tuple[int, int, int]]:
    """The entries in a journal's bytes, a torn last one left out."""
    return list(ENTRY.iter_unpack(memoryview(data)[:len(data) - len(data) % ENTRY.size]))


def checksum(data: bytes) -> int:
    """What a move pair says of the copy: fits an entry's int32 state, and
    is never ``MOVED``, so a pair's halves cannot be mistaken."""
    return zlib.crc32(data) & 0x7FFFFFFF


class Journal:
    def __init__(self, path: str):
        self.path = path
        self.entries = 0  # in the file, including those not written yet
        self._pending: list[bytes] = []
        self._file: BinaryIO | None = None
        self._unsynced = False  # entries written without an fsync since the last one

    def load(self) -> "Loaded":
        """Every record's last state, the move pairs and the furthest
        ``READ_TO`` and ``DELIVERED_TO``; a torn last entry (or pair) is cut off. A queue without
        a journal opens nothing (a topic can be created while the process
        is out of descriptors)."""
        loaded = Loaded({}, [], None, None)
        if not os.path.exists(self.path):
            return loaded
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return loaded
        entries = whole_entries(data)
        if entries and entries[-1][2] == MOVED:
            entries.pop()  # half a pair (a checksum is never MOVED): its copy was never written
        whole = len(entries) * ENTRY.size
        if whole < len(data):
            os.truncate(self.path, whole)
        index = 0
        while index < len(entries):
            number, position, state = entries[index]
            if state == MOVED:
                copy_number, copy_position, copy_checksum = entries[index + 1]
                loaded.moves.append(((number, position), (copy_number, copy_position), copy_checksum))
                index += 2
                continue
            if state == READ_TO:
                if loaded.read_to is None or (number, position) > loaded.read_to:
                    loaded.read_to = (number, position)
            elif state == DELIVERED_TO:
                if loaded.delivered_to is None or (number, position) > loaded.delivered_to:
                    loaded.delivered_to = (number, position)
            else:
                loaded.states[(number, position)] = state
            index += 1
        self.entries = len(entries)
        return loaded

    def append(self, number: int, position: int, state: int) -> None:
        """Written at the next ``flush``."""
        self._pending.append(ENTRY.pack(number, position, state))
        self.entries += 1

    def extend(self, entries: list[bytes]) -> None:
        """Entries packed already (``ENTRY``), written at the next ``flush``."""
        self._pending.extend(entries)
        self.entries += len(entries)

    def write_move(self, record: Start, copy: Start, copy_checksum: int, fsync: bool) -> None:
        """A move pair, in the file at once, so that it is there before the
        copy (``fsync``: on disk too, so a power loss cannot keep the copy
        without it; otherwise the next sync makes it durable with the copy).
        Raises ``OSError`` when the disk refuses: nothing of it stays."""
        self._write_out(ENTRY.pack(*record, MOVED) + ENTRY.pack(*copy, copy_checksum), fsync=fsync)
        self.entries += 2
        self._unsynced = not fsync  # an fsync covers what was written before it too

    def should_compact(self, live: int) -> bool:
        return self.entries > 2 * live + COMPACT_SLACK

    def flush(self, fsync: bool = True) -> None:
        """The appended entries written to the file; with ``fsync``, made
        durable too (with those written before without it). Raises
        ``OSError`` when the disk refuses: what part of them was written is
        cut off again (so later entries stay aligned), and they are tried
        at the next flush."""
        if self._pending:
            self._write_out(b"".join(self._pending), fsync=fsync)
            self._pending.clear()
            self._unsynced = not fsync
        elif fsync and self._unsynced:
            os.fsync(self._opened().fileno())
            self._unsynced = False

    def _opened(self) -> BinaryIO:
        journal = self._file
        if journal is None:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            journal = self._file = os.fdopen(fd, "ab", buffering=0)
        return journal

    def _write_out(self, data: bytes, fsync: bool) -> None:
        journal = self._opened()
        end = os.fstat(journal.fileno()).st_size
        view = memoryview(data)
        try:
            while view:
                written = journal.write(view)
                view = view[written:]
            if fsync:
                os.fsync(journal.fileno())
        except OSError:
            self._close_file()
            os.truncate(self.path, end)
            raise

    def rewrite(self, live: dict[tuple[int, int], int], delivered_to: Start | None = None) -> None:
        """Replace the file with ``live`` entries only, and ``delivered_to``
        (none of either: remove it)."""
        self._close_file()
        entries = [ENTRY.pack(n, p, s) for (n, p), s in live.items()]
        if delivered_to is not None:
            entries.append(ENTRY.pack(*delivered_to, DELIVERED_TO))
        if not entries:
            self.remove()
            return
        # what is pending is part of ``live``; dropped only once the new file is in place
        write_atomically(self.path, b"".join(entries))
        self._pending.clear()
        self._unsynced = False
        self.entries = len(entries)

    def remove(self) -> None:
        """No entries, pending or written."""
        self._close_file()
        self._pending.clear()
        self._unsynced = False
        self.entries = 0
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        self._close_file()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

