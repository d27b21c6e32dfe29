"""A retained topic's log over nsqd's HTTP API, as Arrow: its offsets
(``GET /topic/offsets``) and the records of an offset range (``GET
/topic/read``), for the log reader (``logsource.py``).

A read's answer is chunks (protocol/logchunk.py) whose arrays are
little-endian and aligned, so each chunk's columns are Arrow arrays over
the answer's own bytes; a batch is their concatenation, with no Python
work per message.
"""

import http.client
import json
import logging
import time
import urllib.parse

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from ..protocol.dedupkey import split_key
from ..protocol.logchunk import HEADER_SIZE, ID_SIZE, CorruptChunk, check, layout, read_header
from .chunks import repeated
from .source import source_schema

log = logging.getLogger("nsqpy.spark")

READ_BYTES = 16 * 1024 * 1024  # asked of nsqd per request
_TIMEOUT = 30.0
_NANOSECONDS = pa.timestamp("ns", tz="UTC")
_MICROSECONDS = pa.timestamp("us", tz="UTC")


class NotRetained(Exception):
    """The topic keeps no log on that nsqd (or does not exist there)."""


class LogGone(Exception):
    """Offsets the read needed were removed by retention; says which."""


def log_schema(dedup_key: bool) -> StructType:
    """The channel readers' columns (``attempts`` always null: a log has no
    deliveries) and ``offset``, the record's offset on its nsqd."""
    return StructType([*source_schema(dedup_key).fields, StructField("offset", LongType(), nullable=True)])


def _http_url(address: str) -> str:
    return address if "://" in address else f"http://{address}"


def offsets(http_address: str, topic: str, at_ms: int | None = None) -> dict:
    """The log's extent on one nsqd (``earliest_offset``, ``latest_offset``,
    ...; ``offset_at_time`` with ``at_ms``). ``NotRetained`` when nsqd has
    no log for the topic; ``OSError`` when it does not answer."""
    query = {"topic": topic}
    if at_ms is not None:
        query["time"] = f"{at_ms}ms"
    connection = _connection(http_address)
    try:
        connection.request("GET", f"/topic/offsets?{urllib.parse.urlencode(query)}")
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if response.status in (400, 404):
        raise NotRetained(_message(body) or f"HTTP {response.status}")
    if response.status != 200:
        raise OSError(f"nsqd {http_address}: /topic/offsets answered {response.status} {_message(body)}")
    return json.loads(body)


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace")


def _connection(http_address: str) -> http.client.HTTPConnection:
    url = urllib.parse.urlsplit(_http_url(http_address))
    kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    return kind(url.hostname, url.port, timeout=_TIMEOUT)


class RangeReader:
    """Reads offsets [``start``, ``end``) of ``topic`` from one nsqd as Arrow
    record batches. An nsqd that does not answer is waited for up to
    ``wait`` seconds (a restart), then the read fails. Offsets removed by
    retention: ``LogGone`` when ``fail_on_data_loss``, else skipped (logged).
    ``auth_secret`` goes to an nsqd with AUTH on as ``Authorization: Bearer``
    (nsqd asks its auth server whether the secret may subscribe to the topic)."""

    def __init__(self, http_address: str, node: str, topic: str, schema: StructType, *, dedup_key: bool,
                 fail_on_data_loss: bool, wait: float, auth_secret: str = ""):
        self.http_address = http_address
        self.headers = {"Authorization": f"Bearer {auth_secret}"} if auth_secret else {}
        self.node = node
        self.topic = topic
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.dedup_key = dedup_key
        self.fail_on_data_loss = fail_on_data_loss
        self.wait = wait
        self.skipped = 0

    def batches(self, start: int, end: int):
        connection = _connection(self.http_address)
        try:
            offset = start
            while offset < end:
                data, first, following = self._read(connection, offset, end)
                if following <= offset:
                    raise OSError(f"nsq log reader: nsqd {self.node} ends topic {self.topic}'s log before offset "
                                  f"{offset} (its log was deleted or cut since the batch was planned)")
                if first > offset:
                    self._lost(offset, first)
                if data:
                    yield self.record_batch(data)
                offset = following
        finally:
            connection.close()

    def _read(self, connection, offset: int, end: int) -> tuple[bytes, int, int]:
        """One request, retried while nsqd does not answer (up to ``wait``);
        -> (chunks, first offset in them, where the next read starts)."""
        query = urllib.parse.urlencode({"topic": self.topic, "from": offset, "to": end, "max_bytes": READ_BYTES})
        deadline = time.monotonic() + self.wait
        while True:
            try:
                connection.request("GET", f"/topic/read?{query}", headers=self.headers)
                response = connection.getresponse()
                body = response.read()
                break
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                if time.monotonic() >= deadline:
                    raise OSError(f"nsq log reader: nsqd {self.node} did not answer for {self.wait:g}s while "
                                  f"reading {self.topic} offsets {offset}-{end - 1}: {error}") from None
                time.sleep(0.5)
        if response.status == 416:  # before the earliest offset: removed by retention
            earliest = offsets(self.http_address, self.topic)["earliest_offset"]
            if earliest <= offset:
                raise OSError(f"nsq log reader: nsqd {self.node} refused offset {offset}: {_message(body)}")
            self._lost(offset, min(earliest, end))
            return b"", min(earliest, end), min(earliest, end)
        if response.status in (401, 403):  # AUTH: never the secret itself, which nsqd does not echo
            hint = " (give the secret as option auth_secret)" if response.status == 401 else ""
            raise PermissionError(f"nsq log reader: nsqd {self.node} refused reading {self.topic}: "
                                  f"{response.status} {_message(body)}{hint}")
        if response.status != 200:
            raise OSError(f"nsq log reader: nsqd {self.node} answered {response.status} reading {self.topic}: "
                          f"{_message(body)}")
        return body, int(response.getheader("X-NSQ-First-Offset")), int(response.getheader("X-NSQ-Next-Offset"))

    def _lost(self, start: int, end: int) -> None:
        message = (f"offsets {start}-{end - 1} of topic {self.topic} on nsqd {self.node} were removed by "
                   f"retention before they were read")
        if self.fail_on_data_loss:
            raise LogGone(f"{message} (failOnDataLoss=true; set it false to skip them)")
        self.skipped += end - start
        log.warning("nsq log reader: skipping %s", message)

    def record_batch(self, data: bytes) -> pa.RecordBatch:
        """The chunks in ``data`` as one record batch in the reader's schema."""
        buffer = pa.py_buffer(data)
        ids, bodies, timestamps, firsts, counts = [], [], [], [], []
        pos = 0
        while pos < len(data):
            try:
                header = read_header(data, pos)
                check(data, pos, header)
            except CorruptChunk as error:
                raise OSError(f"nsq log reader: a corrupt chunk from nsqd {self.node} (topic {self.topic}): "
                              f"{error}") from None
            size, first, count, body_size = header.size, header.first_offset, header.records, header.body_size
            ids_at, offsets_at, bodies_at, _ = layout(count, body_size)
            timestamps.append(pa.Array.from_buffers(pa.int64(), count, [None, buffer.slice(pos + HEADER_SIZE,
                                                                                            8 * count)]))
            ids.append(pa.Array.from_buffers(pa.binary(ID_SIZE), count, [None, buffer.slice(pos + ids_at,
                                                                                             ID_SIZE * count)]))
            bodies.append(pa.Array.from_buffers(pa.binary(), count, [
                None, buffer.slice(pos + offsets_at, 4 * (count + 1)), buffer.slice(pos + bodies_at, body_size)]))
            firsts.append(first)
            counts.append(count)
            pos += size
        total = sum(counts)
        body = pa.concat_arrays(bodies)
        columns = [
            _as_strings(pa.concat_arrays(ids), total),
            body,
            pa.concat_arrays(timestamps).cast(_NANOSECONDS).cast(_MICROSECONDS, safe=False),
            pa.nulls(total, pa.int32()),
            repeated(self.topic, total),
            repeated(self.node, total),
            pa.array(_offsets(firsts, counts), pa.int64()),
        ]
        if self.dedup_key:
            pairs = [split_key(value) for value in body.to_pylist()]
            columns[1] = pa.array([value for _, value in pairs], pa.binary())
            columns.append(pa.array([key for key, _ in pairs], pa.string()))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)


def _as_strings(ids: pa.FixedSizeBinaryArray, count: int) -> pa.StringArray:
    """16-byte ids as strings, over the same bytes (NSQ's ids are hex)."""
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(ID_SIZE)
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), ids.buffers()[1])


def _offsets(firsts: list[int], counts: list[int]) -> np.ndarray:
    """The offset of every record: each chunk's first offset, counted on."""
    starts = np.repeat(np.asarray(firsts, dtype=np.int64) - np.cumsum([0, *counts[:-1]], dtype=np.int64), counts)
    return starts + np.arange(sum(counts), dtype=np.int64)
