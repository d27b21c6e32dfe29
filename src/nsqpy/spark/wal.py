"""The source's optional write-ahead log: each batch's rows, kept until committed.

When the driver dies after Spark logged a batch's offsets but before the
batch committed, Spark replays the batch on restart through
``readBetweenOffsets(start, end)``, possibly on an executor. Without a log
that replay is empty and nsqd's redelivery brings the messages back in a
later batch (at-least-once). With a log the replay returns exactly the
rows of the first attempt, so an idempotent sink sees the same batch twice
and stores it once.

The log also knows what reached a sink but was never FINished (the driver
died between the commit and the FIN): on restart those ids are dropped when
nsqd redelivers them, instead of archived again.

One Arrow IPC file per batch, ``<start>-<end>.arrow`` (20 digits each, so
names sort by position), written whole under a temporary name first, so a
crash never leaves a partial entry under a real name. The log goes through
``pyarrow.fs``: a local or mounted path (fsynced, renamed atomically), or a
URI such as ``hdfs://...`` or ``s3://...``. It must be storage every node
sees when executors may replay.
"""

import os
import random

import pyarrow as pa
import pyarrow.fs

from ..atomicfile import write_atomically

_SUFFIX = ".arrow"


def _filesystem(path: str) -> tuple[pyarrow.fs.FileSystem, str]:
    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), os.path.abspath(path)


class WriteAheadLog:
    def __init__(self, path: str):
        self.path = path
        self._fs, self._root = _filesystem(path)

    def _file(self, start: int, end: int) -> str:
        return f"{self._root}/{start:020d}-{end:020d}{_SUFFIX}"

    def entries(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every batch logged, in order."""
        listing = self._fs.get_file_info(pyarrow.fs.FileSelector(self._root, allow_not_found=True))
        found = []
        for info in listing:
            stem, dash, rest = info.base_name.partition("-")
            if dash and rest.endswith(_SUFFIX) and stem.isdigit() and rest[:-len(_SUFFIX)].isdigit():
                found.append((int(stem), int(rest[:-len(_SUFFIX)])))
        return sorted(found)

    def write(self, start: int, end: int, rows: pa.RecordBatch) -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, rows.schema) as writer:
            writer.write_batch(rows)
        data = sink.getvalue()
        target = self._file(start, end)
        self._fs.create_dir(self._root, recursive=True)
        if isinstance(self._fs, pyarrow.fs.LocalFileSystem):
            write_atomically(target, data.to_pybytes())
            return
        partial = f"{target}.{random.getrandbits(31)}.tmp"  # no entry's name: never read as one
        with self._fs.open_output_stream(partial) as out:
            out.write(data)
        self._fs.move(partial, target)

    def read(self, start: int, end: int) -> list[pa.RecordBatch]:
        with self._fs.open_input_file(self._file(start, end)) as source:
            table = pa.ipc.open_file(source).read_all()
        return table.combine_chunks().to_batches()
    def read_between(self, start: int, end: int) -> list[pa.RecordBatch] | None:
        """The rows of the logged batches covering exactly ``[start, end)``, or
        None when the log does not hold all of that range."""
        covering = [entry for entry in self.entries() if start <= entry[0] and entry[1] <= end]
        expected = start
        for entry_start, entry_end in covering:
            if entry_start != expected:
                return None
            expected = entry_end
        if expected != end:
            return None
        return [batch for entry in covering for batch in self.read(*entry)]

    def ids_through(self, committed: int) -> set[str]:
        """Message ids of the logged batches that end at or before ``committed``."""
        ids: set[str] = set()
        for entry in self.entries():
            if entry[1] <= committed:
                for batch in self.read(*entry):
                    ids.update(batch.column("id").to_pylist())
        return ids

    def remove(self, keep) -> None:
        """Delete every logged batch for which ``keep(start, end)`` is false."""
        for start, end in self.entries():
            if not keep(start, end):
                try:
                    self._fs.delete_file(self._file(start, end))
                except FileNotFoundError:
                    pass
