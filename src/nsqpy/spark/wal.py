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

``PartitionLog`` is the same idea for the executors reader
(``partitioned.py``): one file per partition of a micro-batch, written by the
task that read it, before it FINishes a single message.
"""

import os
import random
import re

import pyarrow as pa
import pyarrow.fs

from ..atomicfile import write_atomically

_SUFFIX = ".arrow"


def _filesystem(path: str) -> tuple[pyarrow.fs.FileSystem, str]:
    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), os.path.abspath(path)


def _ipc_bytes(rows: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, rows.schema) as writer:
        writer.write_batch(rows)
    return sink.getvalue().to_pybytes()


def _put(fs: pyarrow.fs.FileSystem, root: str, target: str, data: bytes) -> None:
    """``data`` under ``target`` whole or not at all: written under a name no
    entry has, then renamed (fsynced on a local or mounted path)."""
    fs.create_dir(root, recursive=True)
    if isinstance(fs, pyarrow.fs.LocalFileSystem):
        write_atomically(target, data)
        return
    partial = f"{target}.{random.getrandbits(31)}.tmp"  # no entry's name: never read as one
    with fs.open_output_stream(partial) as out:
        out.write(data)
    fs.move(partial, target)


def _read(fs: pyarrow.fs.FileSystem, path: str) -> list[pa.RecordBatch]:
    with fs.open_input_file(path) as source:
        table = pa.ipc.open_file(source).read_all()
    return table.combine_chunks().to_batches()


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
        _put(self._fs, self._root, self._file(start, end), _ipc_bytes(rows))

    def read(self, start: int, end: int) -> list[pa.RecordBatch]:
        return _read(self._fs, self._file(start, end))

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


_PARTITION = re.compile(r"^batch-(\d{20})-part-(\d{5})\.arrow$")
_CONFIRMED = ".confirmed"
WATCH_SECONDS = 24 * 3600  # how long redeliveries of unconfirmed partitions are looked for


class PartitionLog:
    """The executors reader's log: one file per (micro-batch, partition).

    ``batch-<batch>-part-<index>.arrow`` holds a partition's rows, written
    before any of its messages is FINished; ``<same>.confirmed`` (empty)
    says nsqd confirmed all of those FINs. A task that finds its file
    replays it instead of reading nsqd. Once the batch commits, a confirmed
    entry is deleted; an unconfirmed one moves to ``watch/`` for
    ``WATCH_SECONDS``. The ids of unconfirmed entries, logged or watched, are
    what later partitions drop when nsqd delivers them again.
    """

    def __init__(self, path: str):
        self.path = path
        self._fs, self._root = _filesystem(path)

    def _file(self, batch: int, index: int, folder: str = "") -> str:
        return f"{self._root}{folder}/batch-{batch:020d}-part-{index:05d}{_SUFFIX}"

    def _listing(self, folder: str = "") -> list:
        return self._fs.get_file_info(pyarrow.fs.FileSelector(self._root + folder, allow_not_found=True))

    def write(self, batch: int, index: int, rows: pa.RecordBatch) -> None:
        _put(self._fs, self._root, self._file(batch, index), _ipc_bytes(rows))

    def confirm(self, batch: int, index: int) -> None:
        _put(self._fs, self._root, self._file(batch, index) + _CONFIRMED, b"")

    def read(self, batch: int, index: int) -> list[pa.RecordBatch] | None:
        """The partition's rows as first read, or None when it never got that far."""
        try:
            return _read(self._fs, self._file(batch, index))
        except FileNotFoundError:
            return None

    def rows_logged(self, batch: int) -> dict[int, int]:
        """Rows each partition of ``batch`` logged (one that received nothing logs nothing)."""
        return {index: sum(rows.num_rows for rows in self.read(batch, index) or ())
                for logged, index, _ in self.entries() if logged == batch}

    def entries(self) -> list[tuple[int, int, bool]]:
        """``(batch, partition, confirmed)`` of every partition logged, in order."""
        names = {info.base_name for info in self._listing()}
        found = []
        for name in names:
            match = _PARTITION.match(name)
            if match:
                found.append((int(match.group(1)), int(match.group(2)), name + _CONFIRMED in names))
        return sorted(found)

    def settle(self, committed: int, now: float) -> int:
        """Forget the partitions of every batch up to ``committed``: delete the
        confirmed ones, watch the others; drop watches older than
        ``WATCH_SECONDS``. Returns how many rows went to watch: up to that many
        messages may be delivered again."""
        watched = 0
        for batch, index, confirmed in self.entries():
            if batch > committed:
                continue
            entry = self._file(batch, index)
            if confirmed:
                self._delete(entry + _CONFIRMED)
                self._delete(entry)
            else:
                self._fs.create_dir(self._root + "/watch", recursive=True)
                self._fs.move(entry, self._file(batch, index, "/watch"))
                watched += sum(rows.num_rows for rows in self.read_watched(batch, index))
        for info in self._listing("/watch"):
            if info.mtime is not None and now - info.mtime.timestamp() > WATCH_SECONDS:
                self._delete(info.path)
        return watched

    def read_watched(self, batch: int, index: int) -> list[pa.RecordBatch]:
        return _read(self._fs, self._file(batch, index, "/watch"))

    def unconfirmed_ids(self) -> set[str]:
        """Ids of messages archived by partitions whose FINs nsqd has not
        confirmed: watched ones, and logged ones without their mark (a
        partition still answering, or one that failed to)."""
        files = [info.path for info in self._listing("/watch") if _PARTITION.match(info.base_name)]
        files += [self._file(batch, index) for batch, index, confirmed in self.entries() if not confirmed]
        ids: set[str] = set()
        for path in files:
            try:
                batches = _read(self._fs, path)
            except FileNotFoundError:  # confirmed and deleted, or moved to watch, meanwhile
                continue
            for rows in batches:
                ids.update(rows.column("id").to_pylist())
        return ids

    def _delete(self, path: str) -> None:
        try:
            self._fs.delete_file(path)
        except FileNotFoundError:
            pass
