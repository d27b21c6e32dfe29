"""One segment file of a topic log and its sparse index.

A segment is named by its first offset (``00000000000000001234.seg``, so
names sort as offsets do) and holds whole chunks (protocol/logchunk.py)
back to back. Its index, kept in memory, has one entry per
``INDEX_INTERVAL`` bytes of file (the chunk starting there: its first
offset, its position, and the newest timestamp up to its end), as Kafka's
offset and time indexes do: finding an offset or a time reads one index
entry's worth of chunk headers, whatever the segment's size.

A sealed segment (one the log has moved past) has its index written beside
it (``.idx``) so a restart does not read the whole file again; the last
segment is always scanned at start, CRCs checked, and cut at the last whole
chunk (a write torn by kill -9 or a full disk).
"""

import bisect
import os
import struct
import sys
from array import array
from typing import Final

from ..atomicfile import write_atomically
from ..protocol import logchunk
from ..protocol.logchunk import HEADER_SIZE, ChunkHeader, CorruptChunk

INDEX_INTERVAL: Final = 64 * 1024
SCAN_BLOCK: Final = 4 * 1024 * 1024
SEGMENT_SUFFIX: Final = ".seg"
INDEX_SUFFIX: Final = ".idx"
_INDEX_TRAILER: Final = struct.Struct("<QQqqQ")  # size, end offset, first ts, max ts, valid size
_INDEX_MAGIC: Final = b"NQLI001" + sys.byteorder[:1].encode()  # the arrays are in this byte order


def segment_name(base: int) -> str:
    return f"{base:020d}{SEGMENT_SUFFIX}"


class Segment:
    """What the log knows of one file: its offsets, bytes, times and index."""

    def __init__(self, directory: str, base: int):
        self.base = base
        self.path = os.path.join(directory, segment_name(base))
        self.size = 0  # bytes of whole chunks
        self.end_offset = base  # the offset after its last record
        self.first_ts = 0
        self.max_ts = 0
        self.index_offsets = array("Q")
        self.index_positions = array("Q")
        self.index_max_ts = array("q")
        self._indexed_to = -INDEX_INTERVAL  # file position of the last index entry

    @property
    def count(self) -> int:
        return self.end_offset - self.base

    @property
    def index_path(self) -> str:
        return self.path[:-len(SEGMENT_SUFFIX)] + INDEX_SUFFIX

    def added(self, header: ChunkHeader, first_ts: int, max_ts: int) -> None:
        """The chunk ``header`` now ends the file (written or scanned)."""
        position = self.size
        if not self.count:
            self.first_ts = first_ts
        self.max_ts = max(self.max_ts, max_ts)
        if position - self._indexed_to >= INDEX_INTERVAL:
            self.index_offsets.append(header.first_offset)
            self.index_positions.append(position)
            self.index_max_ts.append(self.max_ts)
            self._indexed_to = position
        else:
            self.index_max_ts[-1] = self.max_ts
        self.size = position + header.size
        self.end_offset = header.end_offset

    # --- finding ---------------------------------------------------------------

    def position_of(self, fd: int, offset: int) -> tuple[int, ChunkHeader]:
        """The position and header of the chunk holding ``offset`` (which the
        segment holds)."""
        entry = bisect.bisect_right(self.index_offsets, offset) - 1
        return self._walk(fd, self.index_positions[max(entry, 0)],
                          lambda header: header.end_offset > offset)

    def first_at_or_after(self, fd: int, ts: int) -> int | None:
        """The offset of the first record whose timestamp is ``ts`` or later,
        or None when the segment has none."""
        if self.max_ts < ts or not self.count:
            return None
        entry = bisect.bisect_left(self.index_max_ts, ts)
        start = self.index_positions[entry - 1] if entry > 0 else 0
        position, header = self._walk(fd, start, lambda header: True)
        while True:
            timestamps = logchunk.numbers("q", os.pread(fd, 8 * header.records, position + HEADER_SIZE))
            for i, stamp in enumerate(timestamps):
                if stamp >= ts:
                    return header.first_offset + i
            position += header.size
            if position >= self.size:
                return None
            header = logchunk.read_header(os.pread(fd, HEADER_SIZE, position))

    def _walk(self, fd: int, position: int, found) -> tuple[int, ChunkHeader]:
        """From ``position``, the first chunk for which ``found(header)``."""
        while True:
            header = logchunk.read_header(os.pread(fd, HEADER_SIZE, position))
            if found(header) or position + header.size >= self.size:
                return position, header
            position += header.size

    def whole_chunks_end(self, fd: int, start: int, limit: int, end_offset: int) -> int:
        """From chunk boundary ``start``, where the run of whole chunks ends
        that lies within file position ``limit`` and before offset
        ``end_offset``: ``start`` itself when the first chunk does not (the
        reader cuts that one to fit). The index skips the chunks before the
        last entry within both bounds; only the rest are walked."""
        entry = min(bisect.bisect_right(self.index_positions, limit),
                    bisect.bisect_right(self.index_offsets, end_offset)) - 1
        position = max(start, self.index_positions[max(entry, 0)])
        while position < self.size:
            header = logchunk.read_header(os.pread(fd, HEADER_SIZE, position))
            if position + header.size > limit or header.end_offset > end_offset:
                break
            position += header.size
        return position

    # --- reading what is on disk ------------------------------------------------

    def scan(self, fd: int, file_size: int) -> CorruptChunk | None:
        """Index the file from the start, checking every chunk's CRC; stops
        at the first chunk that is torn or corrupt and says where (None:
        every byte is a whole chunk)."""
        position = 0
        while position < file_size:
            block = os.pread(fd, SCAN_BLOCK, position)
            pos = 0
            try:
                while len(block) - pos >= HEADER_SIZE:
                    header = logchunk.read_header(block, pos)
                    if pos + header.size > len(block):
                        if position + pos + header.size > file_size:
                            raise CorruptChunk(f"cut short ({file_size - position - pos} of {header.size} bytes)")
                        if pos:
                            break  # the next block starts with it
                        block = os.pread(fd, header.size, position)  # one chunk bigger than a block
                    logchunk.check(block, pos, header)
                    timestamps = logchunk.numbers("q", memoryview(block)[pos + HEADER_SIZE:pos + HEADER_SIZE + 8 * header.records])
                    self.added(header, timestamps[0], max(timestamps))
                    pos += header.size
            except CorruptChunk as error:
                return CorruptChunk(f"chunk at byte {position + pos}: {error}")
            if not pos:
                return CorruptChunk(f"{file_size - position} bytes at byte {position} are not a chunk")
            position += pos
        return None

    def write_index(self) -> None:
        """The index beside the sealed file, for the next start."""
        trailer = _INDEX_TRAILER.pack(self.size, self.end_offset, self.first_ts, self.max_ts, self.size)
        write_atomically(self.index_path, b"".join([
            _INDEX_MAGIC, struct.pack("<Q", len(self.index_offsets)), self.index_offsets.tobytes(),
            self.index_positions.tobytes(), self.index_max_ts.tobytes(), trailer]))

    def read_index(self, file_size: int) -> bool:
        """Load the index written at sealing; False (nothing loaded) when it
        is missing or does not describe a file of ``file_size`` bytes."""
        try:
            with open(self.index_path, "rb") as f:
                data = f.read()
        except OSError:
            return False
        if data[:8] != _INDEX_MAGIC or len(data) < 16 + _INDEX_TRAILER.size:
            return False
        (entries,) = struct.unpack_from("<Q", data, 8)
        if len(data) != 16 + 24 * entries + _INDEX_TRAILER.size:
            return False
        size, end_offset, first_ts, max_ts, _ = _INDEX_TRAILER.unpack_from(data, len(data) - _INDEX_TRAILER.size)
        if size != file_size:
            return False
        at = 16
        for column in (self.index_offsets, self.index_positions, self.index_max_ts):
            column.frombytes(data[at:at + 8 * entries])
            at += 8 * entries
        self.size, self.end_offset, self.first_ts, self.max_ts = size, end_offset, first_ts, max_ts
        self._indexed_to = self.index_positions[-1] if entries else -INDEX_INTERVAL
        return True
