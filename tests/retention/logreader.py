"""An independent reader of ``GET /topic/read``'s framing, written from the
documented layout (docs/retention.md) with numpy, not from nsqd's codec:
what a Spark reader or any other client would write."""

import struct
import urllib.request
import zlib

import numpy as np

HEADER = struct.Struct("<4sIQIIII")


def decode(data: bytes) -> list[tuple[int, int, bytes, bytes]]:
    """[(offset, timestamp ns, id, body)] of every chunk in ``data``."""
    records = []
    pos = 0
    while pos < len(data):
        magic, size, first, count, body_size, crc, flags = HEADER.unpack_from(data, pos)
        assert magic == b"NQLC" and flags == 0 and size % 8 == 0
        assert zlib.crc32(data[pos + 32:pos + size]) == crc
        at = pos + 32
        timestamps = np.frombuffer(data, "<i8", count, at)
        at += 8 * count
        ids = np.frombuffer(data, "S16", count, at)
        at += 16 * count
        ends = np.frombuffer(data, "<i4", count + 1, at)
        at += 4 * (count + 1)
        at += -at % 8
        assert ends[0] == 0 and ends[-1] == body_size
        for i in range(count):
            records.append((first + i, int(timestamps[i]), bytes(ids[i]),
                            data[at + ends[i]:at + ends[i + 1]]))
        pos += size
    assert pos == len(data)
    return records


def read(http_url: str, topic: str, start: int, end: int | None = None, max_bytes: int | None = None):
    """-> (records, response headers) of one read."""
    query = f"topic={topic}&from={start}" + (f"&to={end}" if end is not None else "")
    query += f"&max_bytes={max_bytes}" if max_bytes is not None else ""
    with urllib.request.urlopen(f"{http_url}/topic/read?{query}", timeout=30) as response:
        assert response.headers["Content-Type"] == "application/vnd.nsqpy.log-chunks"
        return decode(response.read()), response.headers


def read_all(http_url: str, topic: str, start: int = 0) -> list[tuple[int, int, bytes, bytes]]:
    """Every record from ``start`` to the log's end, read in steps."""
    records = []
    while True:
        part, headers = read(http_url, topic, start, max_bytes=1 << 20)
        records += part
        start = int(headers["X-NSQ-Next-Offset"])
        if start >= int(headers["X-NSQ-Latest-Offset"]):
            return records
