"""Messages as the source holds them: in chunks, one per read of a connection, already in columns.

The source receives hundreds of thousands of messages a second and hands
them to Spark as Arrow record batches. A ``Message`` object per message,
and the columns built from those objects when a batch is cut, cost more
than Spark's own path for the rows. So each read of a connection becomes
one ``Chunk`` on the consumer's loop thread, as it arrives (while Spark
writes the previous batch): the ids it is answered by, and its columns as
Arrow arrays. Cutting a batch then takes whole chunks (splitting the last),
and its record batch is a concatenation.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from ..protocol.dedupkey import split_key

_ID, _BODY, _TIMESTAMP, _ATTEMPTS, _ADDRESS = range(5)
_TYPES = (pa.binary(), pa.binary(), pa.int64(), pa.int32(), pa.string())  # as a chunk holds them
_NANOSECONDS = pa.timestamp("ns", tz="UTC")
_MICROSECONDS = pa.timestamp("us", tz="UTC")


def repeated(text: str, times: int) -> pa.StringArray:
    """``text`` ``times`` times, made from two buffers rather than a list."""
    data = text.encode()
    offsets = np.arange(times + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(times, pa.py_buffer(offsets), pa.py_buffer(data * times))


class Chunk:
    """Messages that came on one connection, in the order they came."""

    __slots__ = ("conn", "ids", "columns")

    def __init__(self, conn, ids: list[bytes], columns: list[pa.Array]):
        self.conn = conn
        self.ids = ids
        self.columns = columns  # id, body, timestamp, attempts, nsqd_address

    @classmethod
    def of(cls, conn, arrivals: list[tuple]) -> "Chunk":
        """From a read's ``(timestamp ns, attempts, id, body)`` tuples. Casts
        (ids to strings, nanoseconds to microseconds) cost a call each, so
        they are made once per batch (``to_record_batch``), not per chunk."""
        timestamps, attempts, ids, bodies = zip(*arrivals)
        ids = list(ids)
        return cls(conn, ids, [
            pa.array(ids, pa.binary()),
            pa.array(bodies, pa.binary()),
            pa.array(timestamps, pa.int64()),
            pa.array(attempts, pa.int32()),
            repeated(conn.address, len(ids)),
        ])

    def __len__(self) -> int:
        return len(self.ids)

    def split(self, count: int) -> tuple["Chunk", "Chunk"]:
        """The first ``count`` messages, and the rest."""
        return (Chunk(self.conn, self.ids[:count], [column.slice(0, count) for column in self.columns]),
                Chunk(self.conn, self.ids[count:], [column.slice(count) for column in self.columns]))

    def partition(self, ids: set[str]) -> tuple["Chunk | None", "Chunk | None"]:
        """The messages whose id is not in ``ids``, and those whose id is
        (None for an empty side)."""
        mask = [message_id.decode("ascii") in ids for message_id in self.ids]
        if not any(mask):
            return self, None
        if all(mask):
            return None, self
        keep = pa.array([not hit for hit in mask])
        hits = pa.array(mask)
        return (Chunk(self.conn, [i for i, hit in zip(self.ids, mask) if not hit],
                      [column.filter(keep) for column in self.columns]),
                Chunk(self.conn, [i for i, hit in zip(self.ids, mask) if hit],
                      [column.filter(hits) for column in self.columns]))


def redelivered_ids(chunks) -> set[str]:
    """Ids of the messages nsqd delivered more than once (``attempts`` > 1)."""
    found: set[str] = set()
    if not chunks or pc.max(pa.chunked_array([chunk.columns[_ATTEMPTS] for chunk in chunks])).as_py() <= 1:
        return found  # the usual case, in one call
    for chunk in chunks:
        again = pc.greater(chunk.columns[_ATTEMPTS], 1)
        if pc.any(again).as_py():
            found.update(message_id.decode("ascii") for message_id, hit in zip(chunk.ids, again.to_pylist()) if hit)
    return found


def count(chunks) -> int:
    return sum(map(len, chunks))


def message_ids(chunks) -> list[str]:
    return [message_id.decode("ascii") for chunk in chunks for message_id in chunk.ids]


def without(chunks: list[Chunk], ids: set[str]) -> tuple[list[Chunk], list[Chunk]]:
    """``chunks`` without the messages whose id is in ``ids``, and those messages."""
    kept, hits = [], []
    for chunk in chunks:
        rest, found = chunk.partition(ids)
        if rest is not None:
            kept.append(rest)
        if found is not None:
            hits.append(found)
    return kept, hits


def _column(chunks, index: int) -> pa.Array:
    if not chunks:
        return pa.array([], _TYPES[index])
    return pa.concat_arrays([chunk.columns[index] for chunk in chunks])


def to_record_batch(chunks, topic: str, schema: StructType, dedup_key: bool) -> pa.RecordBatch:
    """The chunks' messages as one Arrow record batch in the source's schema."""
    bodies = _column(chunks, _BODY)
    timestamps = _column(chunks, _TIMESTAMP).cast(_NANOSECONDS).cast(_MICROSECONDS, safe=False)
    columns = [_column(chunks, _ID).cast(pa.string()), bodies, timestamps, _column(chunks, _ATTEMPTS),
               repeated(topic, len(bodies)), _column(chunks, _ADDRESS)]
    if dedup_key:
        pairs = [split_key(body) for body in bodies.to_pylist()]
        columns[_BODY] = pa.array([body for _, body in pairs], pa.binary())
        columns.append(pa.array([key for key, _ in pairs], pa.string()))
    return pa.RecordBatch.from_arrays(columns, schema=to_arrow_schema(schema, timezone="UTC"))
