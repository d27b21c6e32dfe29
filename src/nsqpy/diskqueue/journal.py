"""What happened to a disk queue's records after they were written, kept
beside the queue as an append-only file, ``<name>.diskqueue.journal.dat``.

Each entry is 16 bytes: ``[int32 file number][int64 position][int32 state]``
naming one record by where it starts. State ``ACKED`` (-1) says the record
was acknowledged out of order (behind one still outstanding); a state of 0
or more is a mark the owner set on it (nsqd: how many times the message was
delivered). The last entry for a record wins.

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
the list is long. Here each acknowledgement or mark costs one entry appended
at the next sync, and the meta file keeps go-diskqueue's three lines (Go's
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
from typing import BinaryIO, Final

from ..atomicfile import write_atomically

ENTRY: Final = struct.Struct(">iqi")
ACKED: Final = -1
MOVED: Final = -2
COMPACT_SLACK: Final = 65536  # entries (1 MiB) appended before a compaction is considered

Start = tuple[int, int]  # where a record begins: (file number, position)
Move = tuple[Start, Start, int]  # a record, where its copy starts, the copy's checksum


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

    def load(self) -> tuple[dict[Start, int], list[Move]]:
        """Every record's last state, and the move pairs; a torn last entry
        (or pair) is cut off. A queue without a journal opens nothing (a
        topic can be created while the process is out of descriptors)."""
        if not os.path.exists(self.path):
            return {}, []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}, []
        entries = list(ENTRY.iter_unpack(memoryview(data)[:len(data) - len(data) % ENTRY.size]))
        if entries and entries[-1][2] == MOVED:
            entries.pop()  # half a pair (a checksum is never MOVED): its copy was never written
        whole = len(entries) * ENTRY.size
        if whole < len(data):
            os.truncate(self.path, whole)
        states: dict[Start, int] = {}
        moves: list[Move] = []
        index = 0
        while index < len(entries):
            number, position, state = entries[index]
            if state == MOVED:
                copy_number, copy_position, copy_checksum = entries[index + 1]
                moves.append(((number, position), (copy_number, copy_position), copy_checksum))
                index += 2
                continue
            states[(number, position)] = state
            index += 1
        self.entries = len(entries)
        return states, moves

    def append(self, number: int, position: int, state: int) -> None:
        """Written at the next ``flush``."""
        self._pending.append(ENTRY.pack(number, position, state))
        self.entries += 1

    def write_move(self, record: Start, copy: Start, copy_checksum: int) -> None:
        """A move pair, in the file at once (written, not fsynced: the next
        sync makes it durable with the copy), so that it is there before
        the copy. Raises ``OSError`` when the disk refuses: nothing of it
        stays."""
        self._write_out(ENTRY.pack(*record, MOVED) + ENTRY.pack(*copy, copy_checksum), fsync=False)
        self.entries += 2

    def should_compact(self, live: int) -> bool:
        return self.entries > 2 * live + COMPACT_SLACK

    def flush(self) -> None:
        """The appended entries on disk, fsynced. Raises ``OSError`` when the
        disk refuses: what part of them was written is cut off again (so
        later entries stay aligned), and they are tried at the next flush."""
        if not self._pending:
            return
        self._write_out(b"".join(self._pending), fsync=True)
        self._pending.clear()

    def _write_out(self, data: bytes, fsync: bool) -> None:
        journal = self._file
        if journal is None:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            journal = self._file = os.fdopen(fd, "ab", buffering=0)
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

    def rewrite(self, live: dict[tuple[int, int], int]) -> None:
        """Replace the file with ``live`` entries only (none: remove it)."""
        self._close_file()
        if not live:
            self.remove()
            return
        # what is pending is part of ``live``; dropped only once the new file is in place
        write_atomically(self.path, b"".join(ENTRY.pack(n, p, s) for (n, p), s in live.items()))
        self._pending.clear()
        self.entries = len(live)

    def remove(self) -> None:
        """No entries, pending or written."""
        self._close_file()
        self._pending.clear()
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

