"""The retained topic log's chunk: how records lie in a segment file and in
an offset read's HTTP response, byte for byte the same, so nsqd serves a
read straight from its files and a reader builds Arrow columns from each
chunk's arrays without Python work per record.

A chunk holds consecutive offsets, little-endian, every part 8-byte aligned::

    0   4s   magic b"NQLC"
    4   u32  chunk size in bytes, this header included (a multiple of 8)
    8   u64  first offset
    16  u32  count (records)
    20  u32  body bytes
    24  u32  CRC-32 (zlib's) of bytes 32 .. chunk size
    28  u32  flags: DEFERRED (bit 0) for a deferred publish (DPUB), alone in its
             chunk; bits 1-31 then hold its delay in milliseconds
    32  i64  timestamps[count]      acceptance time, Unix nanoseconds
        16s  ids[count]             NSQ message ids (16 hex characters)
        i32  body_offsets[count+1]  body i is bodies[body_offsets[i]:body_offsets[i+1]];
                                    body_offsets[0] == 0; padded to 8 bytes
        ...  bodies                 padded to 8 bytes

Record ``i`` of a chunk has offset ``first offset + i``: offsets are
contiguous within a chunk and from one chunk to the next in a segment.
Little-endian, unlike NSQ's wire, because the arrays are read in place by
Arrow and numpy on the machines that run them.
"""

import struct
import sys
import zlib
from array import array
from typing import Final, NamedTuple

MAGIC: Final = b"NQLC"
HEADER: Final = struct.Struct("<4sIQIIII")
HEADER_SIZE: Final = HEADER.size  # 32
ID_SIZE: Final = 16
MAX_CHUNK_SIZE: Final = 1 << 31  # body offsets are int32
DEFERRED: Final = 1  # flags: a deferred publish's record, alone in its chunk; bits 1-31: its delay (ms)
MAX_DELAY_MS: Final = (1 << 31) - 1  # about 24.8 days, past any --max-req-timeout in use


def deferred_flags(delay_ms: int) -> int:
    """A DPUB's chunk flags: DEFERRED, and its delay (clamped to MAX_DELAY_MS)."""
    return DEFERRED | (min(max(delay_ms, 0), MAX_DELAY_MS) << 1)


def delay_ms(flags: int) -> int:
    """The delay a DEFERRED chunk's publish asked for; 0 for any other chunk."""
    return flags >> 1 if flags & DEFERRED else 0


def seconds_until_due(timestamp_ns: int, flags: int, now_ns: int) -> float:
    """How long until a deferred publish accepted at ``timestamp_ns`` falls
    due (0 or less: it has)."""
    return (timestamp_ns + delay_ms(flags) * 1_000_000 - now_ns) / 1e9


class CorruptChunk(ValueError):
    """Bytes that are not a whole, intact chunk (a torn write, a bad disk)."""


class ChunkHeader(NamedTuple):
    size: int
    first_offset: int
    records: int  # how many (``count`` is a tuple method)
    body_size: int
    crc: int
    flags: int

    @property
    def end_offset(self) -> int:
        """The offset after this chunk's last record."""
        return self.first_offset + self.records


def numbers(typecode: str, data) -> array:
    """An ``array`` of ``typecode`` ('q' or 'i') read from little-endian bytes."""
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def _little_endian(values: array) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _pad(size: int) -> int:
    return -size & 7


def layout(count: int, body_size: int) -> tuple[int, int, int, int]:
    """Where a chunk's arrays start: (ids, body offsets, bodies, chunk size)."""
    ids_at = HEADER_SIZE + 8 * count
    offsets_at = ids_at + ID_SIZE * count
    bodies_at = offsets_at + 4 * (count + 1)
    bodies_at += _pad(bodies_at)
    end = bodies_at + body_size
    return ids_at, offsets_at, bodies_at, end + _pad(end)


def encode(first_offset: int, timestamps: array, ids: list[bytes], body_offsets: array, bodies: list,
           flags: int = 0) -> bytes:
    """One chunk: ``timestamps`` an ``array('q')``, ``body_offsets`` an
    ``array('i')`` of ``count + 1`` ends starting at 0, ``bodies`` the
    bodies (bytes-like) in order."""
    count = len(ids)
    body_size = body_offsets[count]
    _, offsets_at, bodies_at, size = layout(count, body_size)
    if size > MAX_CHUNK_SIZE:
        raise ValueError(f"chunk of {size} bytes is over {MAX_CHUNK_SIZE}")
    offsets_end = offsets_at + 4 * (count + 1)
    payload = b"".join([
        _little_endian(timestamps), *ids, _little_endian(body_offsets), bytes(bodies_at - offsets_end), *bodies,
        bytes(_pad(bodies_at + body_size)),
    ])
    return HEADER.pack(MAGIC, size, first_offset, count, body_size, zlib.crc32(payload), flags) + payload


def read_header(data, pos: int = 0) -> ChunkHeader:
    """The header at ``pos``; ``CorruptChunk`` unless it looks like one."""
    if len(data) - pos < HEADER_SIZE:
        raise CorruptChunk(f"{len(data) - pos} bytes at {pos} is less than a chunk header")
    magic, size, first_offset, count, body_size, crc, flags = HEADER.unpack_from(data, pos)
    if magic != MAGIC or not count or size % 8 or layout(count, body_size)[3] != size:
        raise CorruptChunk(f"no chunk header at {pos}")
    return ChunkHeader(size, first_offset, count, body_size, crc, flags)


def check(data, pos: int, header: ChunkHeader) -> None:
    """``CorruptChunk`` unless the chunk at ``pos`` is whole and its CRC holds."""
    end = pos + header.size
    if len(data) < end:
        raise CorruptChunk(f"chunk at {pos} is cut short ({len(data) - pos} of {header.size} bytes)")
    if zlib.crc32(memoryview(data)[pos + HEADER_SIZE:end]) != header.crc:
        raise CorruptChunk(f"chunk at {pos} fails its CRC")


class Records(NamedTuple):
    """A chunk's records, decoded (for nsqd's replay and for tests; a
    columnar reader uses ``layout`` and reads the arrays in place)."""

    first_offset: int
    timestamps: list[int]
    ids: list[bytes]
    bodies: list[bytes]
    flags: int


def decode(data: bytes, pos: int = 0) -> Records:
    """The checked chunk at ``pos`` (nsqd's replay decodes every record it
    moves into a channel: this is compiled, setup.py)."""
    header = read_header(data, pos)
    check(data, pos, header)
    count = header.records
    ids_at, offsets_at, bodies_at, _ = layout(count, header.body_size)
    timestamps = numbers("q", data[pos + HEADER_SIZE:pos + ids_at]).tolist()
    ends = numbers("i", data[pos + offsets_at:pos + offsets_at + 4 * (count + 1)]).tolist()
    ids = [data[at:at + ID_SIZE] for at in range(pos + ids_at, pos + offsets_at, ID_SIZE)]
    start = pos + bodies_at
    bodies = [data[start + ends[i]:start + ends[i + 1]] for i in range(count)]
    return Records(header.first_offset, timestamps, ids, bodies, header.flags)


def trimmed(data: bytes, pos: int, low: int, high: int) -> bytes:
    """The chunk at ``pos`` cut to offsets [``low``, ``high``), re-encoded
    (a read range that starts or ends inside a chunk)."""
    records = decode(data, pos)
    first = max(low - records.first_offset, 0)
    last = min(high - records.first_offset, len(records.ids))
    bodies = records.bodies[first:last]
    return encode(records.first_offset + first, array("q", records.timestamps[first:last]),
                  records.ids[first:last], body_offsets_of(bodies), bodies, records.flags)


def body_offsets_of(bodies: list) -> array:
    """``array('i')`` of the running ends of ``bodies``, starting at 0."""
    ends = array("i", [0])
    total = 0
    for body in bodies:
        total += len(body)
        ends.append(total)
    return ends
